"""placement-native: this node's GPU topology through NVML in one compiled call, and free
ports that cannot be stolen.

>>> import placement_native
>>> placement_native.BACKEND in ("cffi", "purepython")
True
"""

from __future__ import annotations

import logging

from ._backend import BACKEND
from ._model import Accelerator, Link, MigInstance, NodeSnapshot
from ._version import __version__
from .errors import (
    BackendMismatchError,
    NativeError,
    NoFreePortsError,
    NVMLError,
    PortError,
)
from .ports import PortReservation, find_free_ports, reserve_ports
from ._snapshot import snapshot

logging.getLogger(__name__).addHandler(logging.NullHandler())

__all__ = [
    "BACKEND",
    "Accelerator",
    "BackendMismatchError",
    "Link",
    "MigInstance",
    "NVMLError",
    "NativeError",
    "NoFreePortsError",
    "NodeSnapshot",
    "PortError",
    "PortReservation",
    "__version__",
    "find_free_ports",
    "reserve_ports",
    "snapshot",
]
