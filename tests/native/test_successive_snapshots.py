"""Successive snapshots of one process: each says what NVML says at that moment.

The compiled backend keeps what it decoded last (per GPU entry, identity, process table
and pair table) and hands the same records out again only for the same bytes; these
tests change the node between two reads and check that every change is seen, by both
backends alike.
"""

from __future__ import annotations

import copy
from itertools import pairwise
from pathlib import Path

import pytest

from placement_native import Process, _snapshot
from placement_native.errors import NVMLError
from placement_native.testing import FakeProcess, FakeTopologyError, Topology, topology
from placement_native.testing.pytest_plugin import FakeNvmlFixture

from .conftest import Take

GiB = 1 << 30
MiB = 1 << 20


def _busy(machine: Topology, *, churn: int = 0) -> Topology:
    for i, gpu in enumerate(machine.gpus):
        gpu.memory_used = 20 * GiB
        gpu.processes = [FakeProcess(4000 + i, 12 * GiB), FakeProcess(5000 + i, 8 * GiB)]
        gpu.memory_churn = churn
    return machine


def test_an_unchanged_node_reads_alike_every_time(take: Take) -> None:
    machine = _busy(topology("pcie-4x-nvlink-bridges"))
    first = take(machine)
    again = [take(machine) for _ in range(3)]
    assert all(snap == first for snap in again)


def test_memory_that_moves_between_reads_is_seen_every_time(
    take: Take, nvml_backend: _snapshot.Backend
) -> None:
    take(_busy(topology("dgx-h100"), churn=MiB))
    reads = [_snapshot.take(nvml_backend) for _ in range(3)]
    for before, after in pairwise(reads):
        for a, b in zip(before.accelerators, after.accelerators, strict=True):
            assert b.memory_used_bytes == a.memory_used_bytes + MiB
            assert [p.used_memory_bytes for p in b.processes or ()] == [
                p.used_memory_bytes + MiB for p in a.processes or ()
            ]
            assert (b.uuid, b.cpu_affinity, b.nvswitch_links) == (
                a.uuid,
                a.cpu_affinity,
                a.nvswitch_links,
            )


def test_churn_starts_over_before_memory_in_use_passes_the_total(
    take: Take, nvml_backend: _snapshot.Backend
) -> None:
    machine = _busy(topology("dgx-h100"), churn=GiB)
    machine.gpus[0].memory = 22 * GiB  # room for two steps above the 20 GiB declared
    seen = [take(machine).accelerators[0].memory_used_bytes]
    seen += [_snapshot.take(nvml_backend).accelerators[0].memory_used_bytes for _ in range(3)]
    assert seen == [21 * GiB, 22 * GiB, 20 * GiB, 21 * GiB]


def test_processes_that_start_and_stop_between_reads_are_seen(take: Take) -> None:
    machine = _busy(topology("dgx-h100"))
    assert take(machine).accelerators[3].processes == (
        Process(4003, 12 * GiB),
        Process(5003, 8 * GiB),
    )
    started = copy.deepcopy(machine)
    started.gpus[3].processes.append(FakeProcess(6003, GiB))
    assert take(started).accelerators[3].processes == (
        Process(4003, 12 * GiB),
        Process(5003, 8 * GiB),
        Process(6003, GiB),
    )
    stopped = copy.deepcopy(machine)
    stopped.gpus[3].processes = []
    snap = take(stopped)
    assert snap.accelerators[3].processes == ()
    assert snap.accelerators[2].processes == (Process(4002, 12 * GiB), Process(5002, 8 * GiB))


def test_a_process_replaced_by_another_of_the_same_size_is_seen(take: Take) -> None:
    machine = _busy(topology("dgx-h100"))
    take(machine)
    replaced = copy.deepcopy(machine)
    replaced.gpus[4].processes[1] = FakeProcess(7004, 8 * GiB)  # same count, same memory
    assert take(replaced).accelerators[4].processes == (
        Process(4004, 12 * GiB),
        Process(7004, 8 * GiB),
    )


def test_memory_moving_between_processes_of_a_gpu_is_seen(take: Take) -> None:
    machine = _busy(topology("dgx-h100"))
    take(machine)
    moved = copy.deepcopy(machine)
    moved.gpus[4].processes = [FakeProcess(4004, 10 * GiB), FakeProcess(5004, 10 * GiB)]
    acc = take(moved).accelerators[4]
    assert acc.memory_used_bytes == 20 * GiB
    assert acc.processes == (Process(4004, 10 * GiB), Process(5004, 10 * GiB))


def test_a_gpu_that_starts_failing_reports_it_and_recovers(take: Take) -> None:
    machine = _busy(topology("dgx-h100"))
    assert take(machine).accelerators[5].error is None
    failing = copy.deepcopy(machine)
    failing.gpus[5].fail["nvmlDeviceGetUUID"] = 4  # NO_PERMISSION
    acc = take(failing).accelerators[5]
    assert acc.uuid is None
    assert (acc.error or "").startswith("nvmlDeviceGetUUID failed: NVML_ERROR_NO_PERMISSION")
    assert take(machine).accelerators[5] == take(machine).accelerators[5]
    assert take(machine).accelerators[5].error is None


def test_strict_raises_for_a_gpu_that_fails_on_a_later_read(take: Take) -> None:
    machine = _busy(topology("dgx-h100"))
    take(machine, strict=True)
    failing = copy.deepcopy(machine)
    failing.gpus[2].fail["nvmlDeviceGetMemoryInfo_v2"] = 4
    for _ in range(2):  # the error is raised anew by each read, not replayed
        with pytest.raises(NVMLError, match="GPU 2"):
            take(failing, strict=True)


def test_a_gpu_that_leaves_the_node_is_gone_from_the_next_read(take: Take) -> None:
    machine = _busy(topology("dgx-h100"))
    assert len(take(machine).accelerators) == 8
    smaller = copy.deepcopy(machine)
    del smaller.gpus[6:]
    smaller.levels = {pair: level for pair, level in smaller.levels.items() if max(pair) < 6}
    smaller.p2p = {pair: status for pair, status in smaller.p2p.items() if max(pair) < 6}
    snap = take(smaller)
    assert [acc.index for acc in snap.accelerators] == list(range(6))
    assert len(take(machine).accelerators) == 8


def test_two_machines_read_in_turn_each_read_as_itself(take: Take) -> None:
    dgx, bridges = _busy(topology("dgx-h100")), _busy(topology("pcie-4x-nvlink-bridges"))
    for _ in range(2):
        assert take(dgx).accelerators[0].nvswitch_links == 18
        acc = take(bridges).accelerators[0]
        assert acc.nvswitch_links == 0
        assert acc.nvlink_peers != ()


def test_numa_from_sysfs_follows_the_sysfs_root(
    fake_nvml: FakeNvmlFixture, nvml_backend: _snapshot.Backend, tmp_path: Path
) -> None:
    machine = topology("old-driver")  # no NUMA answer: sysfs completes it
    roots = {}
    for numa in (0, 1):
        root = tmp_path / f"sys{numa}"
        device = root / "bus" / "pci" / "devices" / "0000:3b:00.0"  # GPU 0, sysfs form
        device.mkdir(parents=True)
        (device / "numa_node").write_text(f"{numa}\n")
        roots[numa] = root
    for numa in (0, 1, 0):
        fake_nvml(machine, sysfs=roots[numa])
        assert _snapshot.take(nvml_backend).accelerators[0].numa_node == numa


# --- the fake's memory_churn ---------------------------------------------------------------


def test_memory_churn_beyond_the_gpus_memory_is_refused() -> None:
    machine = topology("dgx-h100")
    machine.gpus[1].memory_churn = machine.gpus[1].memory + 1
    with pytest.raises(FakeTopologyError, match=r"gpus\[1\]\.memory_churn"):
        machine.validate()


def test_memory_churn_below_zero_is_refused() -> None:
    machine = topology("dgx-h100")
    machine.gpus[0].memory_churn = -1
    with pytest.raises(FakeTopologyError, match=r"gpus\[0\]\.memory_churn"):
        machine.validate()


@pytest.mark.parametrize(
    ("field", "value"),
    [("memory_churn", "1 MiB"), ("memory_churn", True), ("memory_used", "20GB"), ("name", 5)],
)
def test_a_field_of_the_wrong_type_is_named_before_anything_reads_it(
    field: str, value: object
) -> None:
    machine = topology("dgx-h100")
    setattr(machine.gpus[2], field, value)
    with pytest.raises(FakeTopologyError, match=rf"gpus\[2\]\.{field}: expected"):
        machine.validate()


def test_a_process_of_the_wrong_type_is_named() -> None:
    machine = topology("dgx-h100")
    machine.gpus[1].processes = [FakeProcess("4242")]  # type: ignore[arg-type]
    with pytest.raises(FakeTopologyError, match=r"gpus\[1\]\.processes\[0\]\.pid"):
        machine.validate()


def test_memory_churn_is_read_from_the_json_form() -> None:
    machine = Topology.from_dict({"gpus": [{"memory_churn": 4096}]})
    assert machine.gpus[0].memory_churn == 4096
