"""Test placement code without GPUs: a fake ``libnvidia-ml`` serving a machine you choose.

>>> from placement_native.testing import fake_nvml
>>> import placement_native
>>> with fake_nvml("pcie-4x-nvlink-bridges"):
...     snap = placement_native.snapshot()
>>> snap.accelerators[0].nvlink_peers
((2, 4),)

``fake_nvml(machine)`` takes a named machine (``topology_names()``), a JSON topology file or
a ``Topology``; both backends (compiled and nvidia-ml-py) and everything built on
``placement_native.snapshot()`` see that machine until the ``with`` block ends. The fake
library is compiled from the C source shipped in this package on first use, into a
per-user cache (``$PLACEMENT_FAKE_NVML_CACHE``; a C compiler is needed once).

With pytest, installing placement-native is enough: the ``fake_nvml`` fixture is registered
through the ``pytest11`` entry point (``placement_native.testing.pytest_plugin``, whose
``FakeNvmlFixture`` is the fixture's type).
"""

from __future__ import annotations

from placement_native.errors import FakeNVMLBuildError, FakeTopologyError

from ._build import CACHE_ENV, cache_dir, library
from ._fake import TOPOLOGY_ENV, FakeNvml, fake_nvml
from ._health import CONFIGURATIONS, degraded_tray, health_mask
from ._machines import topology, topology_names
from ._topology import (
    FakeFabric,
    FakeGpu,
    FakeLink,
    FakeMig,
    FakeProcess,
    Topology,
    load_topology,
)

__all__ = [
    "CACHE_ENV",
    "CONFIGURATIONS",
    "TOPOLOGY_ENV",
    "FakeFabric",
    "FakeGpu",
    "FakeLink",
    "FakeMig",
    "FakeNVMLBuildError",
    "FakeNvml",
    "FakeProcess",
    "FakeTopologyError",
    "Topology",
    "cache_dir",
    "degraded_tray",
    "fake_nvml",
    "health_mask",
    "library",
    "load_topology",
    "topology",
    "topology_names",
]
