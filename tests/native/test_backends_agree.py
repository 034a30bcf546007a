"""The compiled backend and the nvidia-ml-py fallback read the same node the same way."""

from __future__ import annotations

import dataclasses
from concurrent.futures import ThreadPoolExecutor

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from placement_native import _backend, _snapshot
from placement_native.testing import (
    FakeGpu,
    FakeLink,
    FakeMig,
    FakeProcess,
    Topology,
    topology_names,
)

from .conftest import UseNode

pytestmark = pytest.mark.skipif(
    _backend.native_module is None, reason="the compiled backend is not active"
)


@pytest.mark.parametrize("name", topology_names())
def test_backends_agree_field_by_field(name: str, use_node: UseNode) -> None:
    use_node(name)
    compiled = _snapshot.take("cffi")
    fallback = _snapshot.take("purepython")
    assert dataclasses.replace(fallback, source="nvml-cffi") == compiled
    assert (compiled.source, fallback.source) == ("nvml-cffi", "nvml-pynvml")


@pytest.mark.parametrize("name", ["no-permission", "no-driver"])
def test_backends_raise_the_same_error_when_strict(name: str, use_node: UseNode) -> None:
    use_node(name)
    errors = []
    for backend in ("cffi", "purepython"):
        with pytest.raises(Exception) as info:
            _snapshot.take(backend, strict=True)
        errors.append(info.value)
    assert type(errors[0]) is type(errors[1])
    assert str(errors[0]) == str(errors[1])


def test_switching_libraries_between_snapshots_follows_the_setting(
    use_node: UseNode,
) -> None:
    for name in ("old-driver", "dgx-h100", "old-driver"):
        fake = use_node(name)
        for backend in ("cffi", "purepython"):
            assert len(_snapshot.take(backend).accelerators) == len(fake.topology.gpus)


def _random_topology(draw: st.DrawFn) -> Topology:
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
            "nvmlDeviceGetMemoryInfo_v2",
            "nvmlDeviceGetComputeRunningProcesses_v3",
            "nvmlDeviceGetComputeRunningProcesses",
            "nvmlDeviceGetNvLinkRemoteDeviceType",
        ]
    )
    memory = st.one_of(st.none(), st.integers(min_value=0, max_value=1 << 40))
    gpus = []
    for i in range(count):
        links = []
        slots = draw(st.integers(min_value=0, max_value=6))
        for k in range(slots):
            target = draw(st.sampled_from([*buses, switch, "00000000:EE:00.0", "garbage"]))
            kind = "switch" if target == switch else "gpu"
            if draw(st.booleans()):  # the same bus id as another driver may spell it
                target = target[4:].lower()
            links.append(FakeLink(k, target, active=draw(st.booleans()), remote=kind))
        mig = draw(st.sampled_from([None, False, True]))
        slots_run = [None, 1] if mig else [None]
        processes = [
            FakeProcess(pid, draw(memory), draw(st.sampled_from(slots_run)))
            for pid in draw(st.lists(st.integers(1, 2**32 - 1), max_size=70, unique=True))
        ]
        gpus.append(
            FakeGpu(
                uuid=f"GPU-{i}",
                bus=buses[i],
                numa=draw(st.sampled_from([None, 0, 1])),
                cpus=draw(st.sampled_from([None, "0-3", "4-7,64-71"])),
                mig=mig,
                mig_slots=3 if mig else 0,
                mig_devices=[FakeMig(1, 1, 0, 1 << 30, f"MIG-{i}", "MIG 1g.10gb")] if mig else [],
                nvlink_slots=slots,
                nvlinks=links,
                fail=draw(st.dictionaries(functions, codes, max_size=2)),
                memory_used=draw(st.integers(min_value=0, max_value=1 << 30)),
                processes=processes,
                process_races=draw(st.integers(min_value=0, max_value=5)),
            )
        )
    levels = {
        (a, b): draw(st.sampled_from(["PIX", "PXB", "PHB", "NODE", "SYS"]))
        for a in range(count)
        for b in range(a + 1, count)
    }
    p2p = {pair: draw(st.sampled_from(["OK", "CNS", "NS"])) for pair in levels}
    return Topology(gpus=gpus, levels=levels, p2p=p2p, old_driver=draw(st.booleans()))


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_backends_agree_on_random_nodes(data: st.DataObject, use_node: UseNode) -> None:
    use_node(data.draw(st.composite(_random_topology)()))
    compiled = _snapshot.take("cffi")
    fallback = _snapshot.take("purepython")
    assert dataclasses.replace(fallback, source="nvml-cffi") == compiled


def test_snapshots_from_many_threads_agree(use_node: UseNode) -> None:
    use_node("dgx-h100")
    expected = _snapshot.take("cffi")
    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(lambda _: _snapshot.take("cffi"), range(32)))
    assert all(result == expected for result in results)
