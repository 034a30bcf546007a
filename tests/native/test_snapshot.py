"""snapshot() on fake nodes, run against the compiled backend and the nvidia-ml-py one."""

from __future__ import annotations

import dataclasses
import sys
from itertools import combinations
from pathlib import Path

import pytest

from placement_native import _nvml_pynvml, _snapshot
from placement_native.errors import (
    NVMLDriverNotLoadedError,
    NVMLError,
    NVMLFunctionNotFoundError,
    NVMLLibraryNotFoundError,
    NVMLNoPermissionError,
)
from placement_native.testing import FakeLink, topology

from .conftest import Take, UseNode


def _write_pci(sysfs: Path, bus: str, *, numa: int | None = None, cpus: str | None = None) -> None:
    device = sysfs / "bus" / "pci" / "devices" / bus
    device.mkdir(parents=True)
    if numa is not None:
        (device / "numa_node").write_text(f"{numa}\n")
    if cpus is not None:
        (device / "local_cpulist").write_text(f"{cpus}\n")


# --- DGX-H100-like node: 8 GPUs on an NVSwitch fabric -----------------------------------


def test_dgx_lists_every_gpu_with_its_identity(take: Take) -> None:
    snap = take("dgx-h100")
    assert [a.index for a in snap.accelerators] == list(range(8))
    first = snap.accelerators[0]
    assert first.type == "nvidia"
    assert first.model == "NVIDIA H100 80GB HBM3"
    assert first.uuid == "GPU-00000100-1111-2222-3333-000000000100"
    assert first.pci_bus_id == "00000000:18:00.0"
    assert first.memory_bytes == 85520809984
    assert first.compute_capability == (9, 0)
    assert first.mig is False
    assert first.error is None


def test_dgx_gpus_carry_numa_node_and_cpu_affinity(take: Take) -> None:
    snap = take("dgx-h100")
    assert [a.numa_node for a in snap.accelerators] == [0, 0, 0, 0, 1, 1, 1, 1]
    assert snap.accelerators[0].cpu_affinity == "0-55,112-167"
    assert snap.accelerators[7].cpu_affinity == "56-111,168-223"


def test_nvswitch_remote_is_a_fabric_not_a_peer(take: Take) -> None:
    snap = take("dgx-h100")
    for acc in snap.accelerators:
        assert acc.nvlink_peers == ()
        assert acc.nvswitch_links == 18


def test_every_pair_on_the_fabric_shows_nv18_like_nvidia_smi(take: Take) -> None:
    snap = take("dgx-h100")
    assert len(snap.links) == 28
    assert {link.label for link in snap.links} == {"NV18"}


def test_pcie_level_and_p2p_are_kept_beside_the_nvlink_count(take: Take) -> None:
    snap = take("dgx-h100")
    same_numa, across = snap.link(0, 3), snap.link(3, 4)
    assert same_numa is not None
    assert across is not None
    assert (same_numa.level, same_numa.nvlinks, same_numa.p2p) == ("NODE", 18, "OK")
    assert (across.level, across.nvlinks) == ("SYS", 18)


def test_driver_source_and_no_error_on_a_healthy_node(take: Take, nvml_backend: str) -> None:
    snap = take("dgx-h100")
    assert snap.driver == "550.54.15"
    assert snap.source == {"cffi": "nvml-cffi", "purepython": "nvml-pynvml"}[nvml_backend]
    assert snap.nvml_error is None


# --- PCIe box: two switches, two NUMA nodes, no NVLink ----------------------------------


def test_pcie_pairs_show_the_pcie_level(take: Take) -> None:
    snap = take("pcie-2-switches")
    assert len(snap.links) == 28
    from_0 = [snap.link(0, b).label for b in range(1, 8)]  # type: ignore[union-attr]
    assert from_0 == ["PIX", "NODE", "NODE", "SYS", "SYS", "SYS", "SYS"]
    assert (snap.link(6, 7).label, snap.link(4, 6).label) == ("PIX", "NODE")  # type: ignore[union-attr]


def test_pcie_p2p_status_is_named_like_nvidia_smi(take: Take) -> None:
    snap = take("pcie-2-switches")
    assert snap.link(0, 1).p2p == "OK"  # type: ignore[union-attr]
    assert snap.link(1, 2).p2p == "CNS"  # type: ignore[union-attr]


def test_pcie_gpus_without_nvlink_or_mig_support_are_not_errors(take: Take) -> None:
    snap = take("pcie-2-switches")
    for acc in snap.accelerators:
        assert acc.error is None
        assert acc.mig is False
        assert acc.nvlink_peers == ()
        assert acc.nvswitch_links == 0
    assert [a.numa_node for a in snap.accelerators] == [0] * 4 + [1] * 4
    assert [a.cpu_affinity for a in snap.accelerators] == ["0-31"] * 4 + ["32-63"] * 4


# --- MIG node ---------------------------------------------------------------------------


def test_mig_instances_are_listed_with_their_uuids(take: Take) -> None:
    snap = take("mig")
    gpu0, gpu1 = snap.accelerators
    assert gpu0.mig is True
    assert [m.index for m in gpu0.mig_instances] == [0, 1, 3]
    first = gpu0.mig_instances[0]
    assert first.uuid == "MIG-11111111-aaaa-bbbb-cccc-000000000000"
    assert first.model == "NVIDIA A100-SXM4-40GB MIG 3g.20gb"
    assert first.memory_bytes == 20937965568
    assert (first.gpu_instance_id, first.compute_instance_id) == (1, 0)
    assert gpu1.mig is False
    assert gpu1.mig_instances == ()


def test_direct_nvlinks_are_counted_per_peer_by_remote_bus_id(take: Take) -> None:
    snap = take("mig")
    assert snap.accelerators[0].nvlink_peers == ((1, 4),)
    assert snap.accelerators[1].nvlink_peers == ((0, 4),)
    link = snap.link(0, 1)
    assert link is not None
    assert (link.label, link.level) == ("NV4", "PXB")


# --- a GPU that refuses access, a GPU that is lost --------------------------------------


def test_a_gpu_refusing_access_is_listed_with_its_error(take: Take) -> None:
    snap = take("no-permission")
    assert len(snap.accelerators) == 8
    refused = snap.accelerators[1]
    assert refused.error is not None
    assert "NVML_ERROR_NO_PERMISSION" in refused.error
    assert "nvmlDeviceGetHandleByIndex_v2" in refused.error
    assert (refused.uuid, refused.pci_bus_id, refused.memory_bytes) == (None, None, None)
    assert snap.accelerators[0].error is None
    assert snap.accelerators[2].error is None


def test_a_lost_gpu_keeps_what_was_read_before_it_was_lost(take: Take) -> None:
    snap = take("no-permission")
    lost = snap.accelerators[3]
    assert lost.error is not None
    assert "NVML_ERROR_GPU_IS_LOST" in lost.error
    assert lost.uuid == "GPU-00000203-1111-2222-3333-000000000203"
    assert lost.memory_bytes is None
    assert lost.numa_node is None  # asked nothing after the loss


def test_pairs_with_an_unreadable_gpu_are_left_out(take: Take) -> None:
    snap = take("no-permission")
    assert [(link.a, link.b) for link in snap.links] == list(combinations([0, 2, 4, 5, 6, 7], 2))


def test_strict_raises_the_first_device_error_typed(take: Take) -> None:
    with pytest.raises(NVMLNoPermissionError) as info:
        take("no-permission", strict=True)
    assert info.value.code == 4
    assert info.value.function == "nvmlDeviceGetHandleByIndex_v2"


# --- an old driver without the optional symbols ------------------------------------------


def test_old_driver_missing_symbols_are_not_errors(take: Take) -> None:
    snap = take("old-driver")
    assert snap.nvml_error is None
    for acc in snap.accelerators:
        assert acc.error is None
        assert acc.mig is False
        assert acc.mig_instances == ()
    assert [a.cpu_affinity for a in snap.accelerators] == ["0-19", "20-39"]


def test_old_driver_numa_node_comes_from_sysfs(take: Take, sysfs: Path) -> None:
    _write_pci(sysfs, "0000:3b:00.0", numa=0)
    _write_pci(sysfs, "0000:5e:00.0", numa=1)
    snap = take("old-driver")
    assert [a.numa_node for a in snap.accelerators] == [0, 1]


def test_without_the_remote_type_a_local_bus_id_is_a_peer_and_others_a_fabric(take: Take) -> None:
    snap = take("old-driver")
    gpu0, gpu1 = snap.accelerators
    assert (gpu0.nvlink_peers, gpu0.nvswitch_links) == (((1, 2),), 1)
    assert (gpu1.nvlink_peers, gpu1.nvswitch_links) == (((0, 2),), 0)
    assert snap.link(0, 1).label == "NV2"  # type: ignore[union-attr]


def test_sysfs_fills_numa_and_cpus_nvml_cannot_tell(take: Take, sysfs: Path) -> None:
    machine = topology("pcie-2-switches")
    for gpu in machine.gpus:
        gpu.numa = gpu.cpus = None
    _write_pci(sysfs, "0000:1b:00.0", numa=0, cpus="0-15,32-47")
    _write_pci(sysfs, "0000:9b:00.0", numa=-1, cpus="")
    snap = take(machine)
    assert (snap.accelerators[0].numa_node, snap.accelerators[0].cpu_affinity) == (0, "0-15,32-47")
    assert (snap.accelerators[4].numa_node, snap.accelerators[4].cpu_affinity) == (None, None)
    assert (snap.accelerators[1].numa_node, snap.accelerators[1].cpu_affinity) == (None, None)


# --- NVML unusable ----------------------------------------------------------------------


def test_init_failure_gives_no_accelerators_and_the_reason(take: Take) -> None:
    snap = take("no-driver")
    assert snap.accelerators == ()
    assert snap.links == ()
    assert snap.nvml_error is not None
    assert "nvmlInit" in snap.nvml_error
    assert "NVML_ERROR_DRIVER_NOT_LOADED" in snap.nvml_error
    assert snap.driver is None


def test_init_failure_raises_typed_only_when_strict(take: Take) -> None:
    with pytest.raises(NVMLDriverNotLoadedError) as info:
        take("no-driver", strict=True)
    assert (info.value.code, info.value.function) == (9, "nvmlInit")
    assert isinstance(info.value, RuntimeError)


def test_other_init_codes_raise_the_generic_nvml_error(take: Take) -> None:
    with pytest.raises(NVMLError) as info:
        take(dataclasses.replace(topology("no-driver"), init_error=999), strict=True)
    assert info.value.code == 999
    assert "NVML_ERROR_UNKNOWN" in str(info.value)


def test_missing_library_gives_no_accelerators(
    nvml_backend: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("PLACEMENT_NVML_LIBRARY", str(tmp_path / "libnvidia-ml.so.1"))
    snap = _snapshot.take(nvml_backend)
    assert snap.accelerators == ()
    assert snap.nvml_error is not None
    assert "NVML_ERROR_LIBRARY_NOT_FOUND" in snap.nvml_error
    assert str(tmp_path) in snap.nvml_error  # dlopen's own words name the path
    with pytest.raises(NVMLLibraryNotFoundError):
        _snapshot.take(nvml_backend, strict=True)


def test_a_library_without_nvml_symbols_is_function_not_found(
    nvml_backend: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PLACEMENT_NVML_LIBRARY", "libm.so.6")
    with pytest.raises(NVMLFunctionNotFoundError) as info:
        _snapshot.take(nvml_backend, strict=True)
    assert info.value.function == "nvmlInit_v2"


# --- host facts -------------------------------------------------------------------------


def test_host_facts_are_filled_without_nvml(take: Take) -> None:
    snap = take("no-driver")
    assert snap.hostname
    assert snap.ip
    assert snap.cpus >= 1
    assert snap.numa_nodes >= 1


def test_remote_bus_ids_match_whatever_their_case_or_domain_width(take: Take) -> None:
    machine = topology("old-driver")
    machine.gpus[0].nvlinks = [FakeLink(0, "0000:5e:00.0"), FakeLink(1, "00000000:5E:00.0")]
    snap = take(machine)
    assert snap.accelerators[0].nvlink_peers == ((1, 2),)
    assert snap.accelerators[0].nvswitch_links == 0


def test_fallback_without_nvidia_ml_py_reports_it(
    use_node: UseNode, monkeypatch: pytest.MonkeyPatch
) -> None:
    use_node("dgx-h100")
    monkeypatch.setitem(sys.modules, "pynvml", None)
    # as before the first snapshot: the backend's own copy of the module not yet made
    monkeypatch.delitem(sys.modules, _nvml_pynvml.PRIVATE_NAME, raising=False)
    snap = _snapshot.take("purepython")
    assert snap.accelerators == ()
    assert snap.nvml_error is not None
    assert snap.nvml_error.startswith("import pynvml failed: NVML_ERROR_LIBRARY_NOT_FOUND")


def test_fallback_treats_a_wrapper_missing_from_nvidia_ml_py_as_unsupported(
    use_node: UseNode, monkeypatch: pytest.MonkeyPatch
) -> None:
    pynvml = _nvml_pynvml._private_pynvml()  # the backend's own copy of the module
    use_node("dgx-h100")
    for name in ("nvmlDeviceGetNumaNodeId", "nvmlDeviceGetNvLinkRemoteDeviceType"):
        monkeypatch.delattr(pynvml, name)
    snap = _snapshot.take("purepython")
    assert [a.numa_node for a in snap.accelerators] == [0, 0, 0, 0, 1, 1, 1, 1]  # memory affinity
    assert {a.error for a in snap.accelerators} == {None}
    assert snap.link(0, 7).label == "NV18"  # type: ignore[union-attr]


def test_strict_snapshot_of_a_healthy_node_returns_it(take: Take) -> None:
    assert len(take("dgx-h100", strict=True).accelerators) == 8


def test_a_failing_mig_instance_keeps_its_error_and_the_gpu_stays_clean(take: Take) -> None:
    machine = topology("mig")
    machine.gpus[0].fail["nvmlDeviceGetGpuInstanceId"] = 999
    snap = take(machine)
    gpu0 = snap.accelerators[0]
    assert gpu0.error is None
    first = gpu0.mig_instances[0]
    assert first.gpu_instance_id is None
    assert first.compute_instance_id == 0
    assert first.error == (
        "nvmlDeviceGetGpuInstanceId failed: NVML_ERROR_UNKNOWN [999] (GPU 0 MIG slot 0)"
    )
    with pytest.raises(NVMLError, match="MIG slot 0"):
        take(machine, strict=True)
