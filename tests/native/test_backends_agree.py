"""The compiled backend and the nvidia-ml-py fallback read the same node the same way."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import fakelib
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

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


def _random_topology(draw: st.DrawFn) -> fakelib.Topology:
    count = draw(st.integers(min_value=0, max_value=6))
    buses = [f"00000000:{0x10 + 0x11 * i:02X}:00.0" for i in range(count)]
    switch = "00000000:05:00.0"
    codes = st.sampled_from([2, 4, 15, 999])
    functions = st.sampled_from(
        [
            "nvmlDeviceGetHandleByIndex_v2",
            "nvmlDeviceGetUUID",
            "nvmlDeviceGetMemoryInfo",
            "nvmlDeviceGetNumaNodeId",
            "nvmlDeviceGetNvLinkState",
            "nvmlDeviceGetMigMode",
            "nvmlDeviceGetTopologyCommonAncestor",
        ]
    )
    gpus = []
    for i in range(count):
        links = []
        slots = draw(st.integers(min_value=0, max_value=6))
        for k in range(slots):
            target = draw(st.sampled_from([*buses, switch, "00000000:EE:00.0", "garbage"]))
            kind = fakelib.LINK_SWITCH if target == switch else fakelib.LINK_GPU
            if draw(st.booleans()):  # the same bus id as another driver may spell it
                target = target[4:].lower()
            links.append((k, draw(st.integers(0, 1)), kind, target))
        mig = draw(st.sampled_from([None, False, True]))
        gpus.append(
            fakelib.FakeGpu(
                uuid=f"GPU-{i}",
                bus=buses[i],
                numa=draw(st.sampled_from([None, 0, 1])),
                cpus=draw(st.sampled_from([None, "0-3", "4-7,64-71"])),
                mig=mig,
                mig_slots=3 if mig else 0,
                mig_devices=[(1, 1, 0, 1 << 30, f"MIG-{i}", "MIG 1g.10gb")] if mig else [],
                link_slots=slots,
                links=links,
                fail=draw(st.dictionaries(functions, codes, max_size=2)),
            )
        )
    levels = {
        (a, b): draw(st.sampled_from([10, 20, 30, 40, 50]))
        for a in range(count)
        for b in range(a + 1, count)
    }
    p2p = {pair: draw(st.sampled_from([0, 1, 5])) for pair in levels}
    return fakelib.Topology(gpus=gpus, levels=levels, p2p=p2p, old_driver=draw(st.booleans()))


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_backends_agree_on_random_nodes(
    data: st.DataObject, use_node: Callable[[fakelib.Topology], Path]
) -> None:
    use_node(data.draw(st.composite(_random_topology)()))
    compiled = _snapshot.take("cffi")
    fallback = _snapshot.take("purepython")
    assert dataclasses.replace(fallback, source="nvml-cffi") == compiled


def test_snapshots_from_many_threads_agree(use_node: Callable[[fakelib.Topology], Path]) -> None:
    use_node(fakelib.dgx_h100())
    expected = _snapshot.take("cffi")
    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(lambda _: _snapshot.take("cffi"), range(32)))
    assert all(result == expected for result in results)
