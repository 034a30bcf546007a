"""Busy accelerators: memory in use and the compute processes on each GPU, both backends."""

from __future__ import annotations

import json
import pickle

import pytest

from placement_native import Process, _cli
from placement_native.errors import NVMLError
from placement_native.testing import FakeProcess, Topology, topology

from .conftest import Take, UseNode

GiB = 1 << 30


def _busy(
    machine: Topology,
    gpu: int,
    processes: list[tuple[int, int | None]],
    *,
    used: int = 0,
    reserved: int = 0,
    mig_slot: int | None = None,
) -> Topology:
    """The machine with ``processes`` (pid, used memory) running on one GPU (or MIG slot)."""
    target = machine.gpus[gpu]
    target.processes += [FakeProcess(pid, memory, mig_slot) for pid, memory in processes]
    target.memory_used, target.memory_reserved = used, reserved
    return machine


# --- idle and busy GPUs -----------------------------------------------------------------


def test_idle_gpus_list_no_processes_and_no_memory_in_use(take: Take) -> None:
    snap = take(topology("dgx-h100"))
    assert all(acc.processes == () for acc in snap.accelerators)
    assert all(acc.memory_used_bytes == 0 for acc in snap.accelerators)


def test_processes_are_listed_in_nvml_order_with_their_memory(take: Take) -> None:
    machine = _busy(topology("dgx-h100"), 3, [(4242, 12 * GiB), (17, 8 * GiB)], used=20 * GiB)
    acc = take(machine).accelerators[3]
    assert acc.processes == (Process(4242, 12 * GiB), Process(17, 8 * GiB))
    assert acc.memory_used_bytes == 20 * GiB


def test_other_gpus_stay_idle_beside_a_busy_one(take: Take) -> None:
    snap = take(_busy(topology("dgx-h100"), 3, [(4242, GiB)]))
    assert [bool(acc.processes) for acc in snap.accelerators] == [i == 3 for i in range(8)]


def test_memory_nvml_cannot_measure_is_none(take: Take) -> None:
    acc = take(_busy(topology("dgx-h100"), 0, [(4242, None)])).accelerators[0]
    assert acc.processes == (Process(4242, None),)


def test_used_memory_leaves_out_what_the_driver_reserves(take: Take) -> None:
    machine = _busy(topology("dgx-h100"), 0, [], used=5 * GiB, reserved=GiB)
    assert take(machine).accelerators[0].memory_used_bytes == 5 * GiB


def test_an_old_driver_reports_used_memory_and_processes_through_v1(take: Take) -> None:
    machine = _busy(topology("old-driver"), 1, [(99, GiB)], used=5 * GiB, reserved=GiB)
    acc = take(machine).accelerators[1]
    assert acc.memory_used_bytes == 6 * GiB  # v1's used counts the reserved memory in
    assert acc.processes == (Process(99, GiB),)


# --- the INSUFFICIENT_SIZE protocol -----------------------------------------------------


def test_more_processes_than_the_first_query_offers_room_for_are_all_listed(take: Take) -> None:
    listed = [(1000 + k, k * 1024) for k in range(70)]
    acc = take(_busy(topology("dgx-h100"), 2, listed)).accelerators[2]
    assert acc.processes == tuple(Process(pid, used) for pid, used in listed)
    assert acc.error is None


def test_processes_that_start_between_two_queries_are_asked_for_again(take: Take) -> None:
    machine = _busy(topology("dgx-h100"), 1, [(4242, GiB)])
    machine.gpus[1].process_races = 3  # three answers of INSUFFICIENT_SIZE, then the list
    acc = take(machine).accelerators[1]
    assert acc.processes == (Process(4242, GiB),)
    assert acc.error is None


def test_a_list_that_keeps_growing_becomes_the_gpu_error(take: Take) -> None:
    machine = _busy(topology("dgx-h100"), 1, [(4242, GiB)])
    machine.gpus[1].process_races = 4  # as many as the queries a device gets
    acc = take(machine).accelerators[1]
    assert acc.processes is None
    assert acc.error is not None
    assert "nvmlDeviceGetComputeRunningProcesses_v3" in acc.error
    assert "NVML_ERROR_INSUFFICIENT_SIZE" in acc.error


def test_a_growing_list_raises_with_strict(take: Take) -> None:
    machine = _busy(topology("dgx-h100"), 1, [(4242, GiB)])
    machine.gpus[1].process_races = 4
    with pytest.raises(NVMLError, match="NVML_ERROR_INSUFFICIENT_SIZE") as info:
        take(machine, strict=True)
    assert info.value.code == 7


def test_processes_beyond_what_a_node_lists_are_reported(take: Take) -> None:
    machine = topology("dgx-h100")
    for gpu in range(3):
        _busy(machine, gpu, [(10_000 * (gpu + 1) + k, GiB) for k in range(1500)])
    snap = take(machine)
    assert [len(acc.processes or ()) for acc in snap.accelerators[:3]] == [1500, 1500, 1096]
    assert snap.accelerators[1].error is None
    error = snap.accelerators[2].error
    assert error is not None
    assert "1500 compute processes" in error
    assert "1096 are listed" in error


# --- a process list NVML refuses ------------------------------------------------------


def test_a_refused_process_list_is_none_and_the_gpu_error(take: Take) -> None:
    machine = topology("dgx-h100")
    machine.gpus[5].fail["nvmlDeviceGetComputeRunningProcesses_v3"] = 4
    acc = take(machine).accelerators[5]
    assert acc.processes is None
    assert acc.error is not None
    assert "NVML_ERROR_NO_PERMISSION" in acc.error


def test_an_unsupported_process_list_is_none_without_an_error(take: Take) -> None:
    machine = topology("dgx-h100")
    machine.gpus[5].fail["nvmlDeviceGetComputeRunningProcesses_v3"] = 3
    acc = take(machine).accelerators[5]
    assert acc.processes is None
    assert acc.error is None


def test_a_refused_v2_memory_query_keeps_used_memory_unknown(take: Take) -> None:
    machine = topology("dgx-h100")
    machine.gpus[2].fail["nvmlDeviceGetMemoryInfo_v2"] = 4
    acc = take(machine).accelerators[2]
    assert (acc.memory_bytes, acc.memory_used_bytes) == (None, None)
    assert acc.error is not None
    assert "nvmlDeviceGetMemoryInfo_v2" in acc.error


# --- MIG ----------------------------------------------------------------------------------


def test_mig_instances_list_their_own_processes_and_memory(take: Take) -> None:
    machine = _busy(topology("mig"), 0, [(7, GiB)], mig_slot=0)
    machine = _busy(machine, 0, [(8, 2 * GiB), (9, None)], mig_slot=3)
    instances = {m.index: m for m in take(machine).accelerators[0].mig_instances}
    assert instances[0].processes == (Process(7, GiB),)
    assert instances[0].memory_used_bytes == GiB
    assert instances[1].processes == ()
    assert instances[3].processes == (Process(8, 2 * GiB), Process(9, None))
    assert instances[3].memory_used_bytes == 2 * GiB


def test_a_mig_gpu_lists_the_processes_of_its_instances(take: Take) -> None:
    machine = _busy(topology("mig"), 0, [(8, GiB)], mig_slot=3)
    machine = _busy(machine, 0, [(7, GiB)], mig_slot=0)
    gpu = take(machine).accelerators[0]
    assert gpu.processes == (Process(7, GiB), Process(8, GiB))  # in MIG slot order


def test_a_gpu_beside_a_mig_gpu_lists_its_own_processes(take: Take) -> None:
    snap = take(_busy(topology("mig"), 1, [(10, GiB)]))
    assert snap.accelerators[1].processes == (Process(10, GiB),)


# --- the JSON contract and the CLI ----------------------------------------------------------


def test_json_carries_memory_used_and_processes(take: Take) -> None:
    machine = _busy(topology("dgx-h100"), 0, [(4242, GiB), (4243, None)], used=2 * GiB)
    entry = json.loads(take(machine).to_json())["accelerators"][0]
    assert entry["memory_used_bytes"] == 2 * GiB
    assert entry["processes"] == [
        {"pid": 4242, "used_memory_bytes": GiB},
        {"pid": 4243, "used_memory_bytes": None},
    ]


def test_json_writes_an_unlisted_process_list_as_null(take: Take) -> None:
    machine = topology("dgx-h100")
    machine.gpus[0].fail["nvmlDeviceGetComputeRunningProcesses_v3"] = 3
    assert take(machine).to_dict()["accelerators"][0]["processes"] is None


def test_mig_instances_carry_memory_used_and_processes_in_json(take: Take) -> None:
    machine = _busy(topology("mig"), 0, [(7, GiB)], mig_slot=0)
    instance = take(machine).to_dict()["accelerators"][0]["mig_instances"][0]
    assert instance["memory_used_bytes"] == GiB
    assert instance["processes"] == [{"pid": 7, "used_memory_bytes": GiB}]


def test_process_records_pickle_and_compare_by_value() -> None:
    process = Process(4242, GiB)
    assert pickle.loads(pickle.dumps(process)) == process
    assert hash(process) == hash(Process(4242, GiB))


def test_snapshot_report_lists_processes_under_their_gpu(
    use_node: UseNode, capsys: pytest.CaptureFixture[str]
) -> None:
    use_node(_busy(topology("dgx-h100"), 0, [(4242, 12 * GiB), (4243, None)], used=12 * GiB))
    assert _cli.main(["snapshot"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "12.0 GiB  0  " in lines[3]  # USED beside MEMORY, then the NUMA node
    assert lines[4] == "  processes: 4242 (12.0 GiB), 4243 (-)"


def test_topo_lists_used_memory_and_pids(
    use_node: UseNode, capsys: pytest.CaptureFixture[str]
) -> None:
    machine = _busy(topology("pcie-2-switches"), 1, [(4242, GiB), (4243, GiB)], used=2 * GiB)
    machine.gpus[2].fail["nvmlDeviceGetComputeRunningProcesses_v3"] = 3
    use_node(machine)
    assert _cli.main(["topo"]) == 0
    rows = [line.split() for line in capsys.readouterr().out.splitlines()[1:5]]
    assert rows[0][-3:] == ["0.0", "GiB", "-"]
    assert rows[1][-3:] == ["2.0", "GiB", "4242,4243"]
    assert rows[2][-1] == "?"
