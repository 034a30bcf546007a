"""The compiled backend and the nvidia-ml-py fallback read the same node the same way."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path

import fakelib
import pytest

from placement_native import _backend, _snapshot

SCENARIOS = {
    "dgx_h100": fakelib.dgx_h100,
    "pcie_two_switches": fakelib.pcie_two_switches,
    "mig_node": fakelib.mig_node,
    "no_permission": fakelib.no_permission,
    "old_driver": fakelib.old_driver,
    "init_failure": fakelib.init_failure,
}

pytestmark = pytest.mark.skipif(
    _backend.native_module is None, reason="the compiled backend is not active"
)


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_backends_agree_field_by_field(
    name: str, use_node: Callable[[fakelib.Topology], Path]
) -> None:
    use_node(SCENARIOS[name]())
    compiled = _snapshot.take("cffi")
    fallback = _snapshot.take("purepython")
    assert dataclasses.replace(fallback, source="nvml-cffi") == compiled
    assert (compiled.source, fallback.source) == ("nvml-cffi", "nvml-pynvml")


@pytest.mark.parametrize("name", ["no_permission", "init_failure"])
def test_backends_raise_the_same_error_when_strict(
    name: str, use_node: Callable[[fakelib.Topology], Path]
) -> None:
    use_node(SCENARIOS[name]())
    errors = []
    for backend in ("cffi", "purepython"):
        with pytest.raises(Exception) as info:
            _snapshot.take(backend, strict=True)
        errors.append(info.value)
    assert type(errors[0]) is type(errors[1])
    assert str(errors[0]) == str(errors[1])


def test_switching_libraries_between_snapshots_follows_the_setting(
    use_node: Callable[[fakelib.Topology], Path],
) -> None:
    for topology in (fakelib.old_driver(), fakelib.dgx_h100(), fakelib.old_driver()):
        use_node(topology)
        for backend in ("cffi", "purepython"):
            assert len(_snapshot.take(backend).accelerators) == len(topology.gpus)
