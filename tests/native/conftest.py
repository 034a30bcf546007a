"""Fixtures for the placement-native tests: the fake NVML library and both backends."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "fake_nvml"))

import fakelib

from placement_native import _backend, _snapshot, _socket_table
from placement_native._model import NodeSnapshot

BACKENDS = ["cffi", "purepython"]


@pytest.fixture(scope="session")
def fake_nvml_libs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The fake libnvidia-ml.so.1, built once per session: current and old-driver variants."""
    root = tmp_path_factory.mktemp("fake_nvml")
    return {"current": fakelib.build(root), "old": fakelib.build(root, old_driver=True)}


@pytest.fixture
def sysfs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty sysfs tree standing in for /sys (tests add the files they need)."""
    root = tmp_path / "sys"
    root.mkdir()
    monkeypatch.setenv("PLACEMENT_SYSFS_ROOT", str(root))
    return root


@pytest.fixture
def use_node(
    fake_nvml_libs: dict[str, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    sysfs: Path,
) -> Callable[[fakelib.Topology], Path]:
    """Point both backends at the fake library serving the given topology."""

    written = iter(range(1_000_000))

    def use(topology: fakelib.Topology) -> Path:
        # A new file each time: the fake re-reads a topology when its path or stat changes,
        # and two writes within one timestamp tick could otherwise look unchanged.
        path = topology.write(tmp_path / f"topology-{next(written)}.txt")
        monkeypatch.setenv("FAKE_NVML_TOPOLOGY", str(path))
        library = fake_nvml_libs["old" if topology.old_driver else "current"]
        monkeypatch.setenv("PLACEMENT_NVML_LIBRARY", str(library))
        return library

    return use


@pytest.fixture(params=BACKENDS)
def nvml_backend(request: pytest.FixtureRequest) -> str:
    """Each snapshot test runs against the compiled backend and the nvidia-ml-py one."""
    if request.param == "cffi" and _backend.native_module is None:
        pytest.skip("the compiled backend is not active")
    return str(request.param)


@pytest.fixture
def take(
    nvml_backend: str, use_node: Callable[[fakelib.Topology], Path]
) -> Callable[..., NodeSnapshot]:
    """``take(topology, strict=False)``: the snapshot of a fake node via the backend under test."""

    def run(topology: fakelib.Topology, *, strict: bool = False) -> NodeSnapshot:
        use_node(topology)
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
