"""Fixtures for the placement-native tests: fake nodes (the package's own testing kit,
``placement_native.testing``, through its ``fake_nvml`` fixture) and both backends."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from placement_native import _backend, _snapshot, _socket_table
from placement_native._model import NodeSnapshot
from placement_native.testing import FakeNvml, Topology
from placement_native.testing.pytest_plugin import FakeNvmlFixture

BACKENDS = ["cffi", "purepython"]

Machine = str | Topology
UseNode = Callable[[Machine], FakeNvml]
Take = Callable[..., NodeSnapshot]


@pytest.fixture
def sysfs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty sysfs tree standing in for /sys (tests add the files they need)."""
    root = tmp_path / "sys"
    root.mkdir()
    monkeypatch.setenv("PLACEMENT_SYSFS_ROOT", str(root))
    return root


@pytest.fixture
def use_node(fake_nvml: FakeNvmlFixture, sysfs: Path) -> UseNode:
    """Point both backends at a fake machine (a name or a ``Topology``), over ``sysfs``."""

    def use(machine: Machine) -> FakeNvml:
        return fake_nvml(machine, sysfs=sysfs)

    return use


@pytest.fixture(params=BACKENDS)
def nvml_backend(request: pytest.FixtureRequest) -> str:
    """Each snapshot test runs against the compiled backend and the nvidia-ml-py one."""
    if request.param == "cffi" and _backend.native_module is None:
        pytest.skip("the compiled backend is not active")
    return str(request.param)


@pytest.fixture
def take(nvml_backend: str, use_node: UseNode) -> Take:
    """``take(machine, strict=False)``: the snapshot of a fake node via the backend under test."""

    def run(machine: Machine, *, strict: bool = False) -> NodeSnapshot:
        use_node(machine)
        return _snapshot.take(nvml_backend, strict=strict)

    return run


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Port tests: run with the compiled netlink reader, then with the /proc reader."""
    if request.param == "cffi":
        if _backend.native_module is None:
            pytest.skip("the compiled extension is not active")
        monkeypatch.setattr(_socket_table, "_netlink_refused", False)
    else:
        monkeypatch.setattr(_socket_table, "_native_lib", lambda: None)
    return str(request.param)
