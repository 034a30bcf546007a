"""Each GPU's NVLink fabric (rack-scale NVLink domains), read by both backends."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from placement_native import Fabric, _backend, _snapshot
from placement_native.errors import NVML_CODE_NAMES
from placement_native.testing import FakeFabric, Topology, load_topology, topology
from placement_native.testing._machines import NVL72_CLUSTER

from .conftest import Take, UseNode

STATES = ["not_supported", "not_started", "in_progress", "completed"]


def _tray(**fabric: object) -> Topology:
    machine = topology("gb200-nvl72-tray")
    for gpu in machine.gpus:
        gpu.fabric = dataclasses.replace(gpu.fabric, **fabric)  # type: ignore[arg-type]
    return machine


def test_the_nvl72_tray_reports_every_gpu_registered(take: Take) -> None:
    snap = take("gb200-nvl72-tray")
    assert len(snap.accelerators) == 4
    for accelerator in snap.accelerators:
        assert accelerator.fabric == Fabric(NVL72_CLUSTER, 1, "completed", "success", 0)
        assert accelerator.fabric.registered


def test_fabric_is_written_to_the_json_snapshot(take: Take) -> None:
    data = json.loads(take("gb200-nvl72-tray").to_json())
    assert data["accelerators"][0]["fabric"] == {
        "cluster_uuid": NVL72_CLUSTER,
        "clique_id": 1,
        "state": "completed",
        "status": "success",
        "health_mask": 0,
    }


def test_a_gpu_without_fabric_reports_null(take: Take) -> None:
    snap = take("dgx-h100")
    assert {a.fabric for a in snap.accelerators} == {None}
    assert json.loads(snap.to_json())["accelerators"][0]["fabric"] is None


@pytest.mark.parametrize("state", STATES[1:])
def test_every_fabric_state_is_named(take: Take, state: str) -> None:
    fabric = take(_tray(state=state)).accelerators[0].fabric
    assert fabric is not None
    assert fabric.state == state
    assert fabric.registered == (state == "completed")


def test_state_not_supported_is_no_fabric_whatever_else_the_answer_holds(take: Take) -> None:
    snap = take(_tray(state="not_supported"))
    assert {a.fabric for a in snap.accelerators} == {None}
    assert {a.error for a in snap.accelerators} == {None}


# What driver 580.159.04 answered for an H200 outside any NVLink rack: NVML_SUCCESS from
# struct v3, v2 and the legacy call alike, state NOT_SUPPORTED, a zero cluster UUID.
@pytest.mark.parametrize("version", [3, 2, 1])
def test_a_gpu_outside_an_nvlink_rack_reports_null(take: Take, version: int) -> None:
    machine = topology("h200")
    machine.fabric_version = version
    snap = take(machine)
    assert len(snap.accelerators) == 1
    assert (snap.accelerators[0].fabric, snap.accelerators[0].error) == (None, None)
    assert json.loads(snap.to_json())["accelerators"][0]["fabric"] is None


def test_core_sees_no_domain_and_no_warning_for_a_gpu_outside_an_nvlink_rack(
    take: Take, tmp_path: Path
) -> None:
    from placement_core import inventory_for, load_config, plan

    path = tmp_path / "h200.json"
    path.write_text(take("h200").to_json(), encoding="utf-8")
    config = load_config("cluster:\n  num_nodes: 1\n  component_placement:\n    actor: all\n")
    inventory = inventory_for(config, snapshots=[path])
    assert [node.nvlink_domain for node in inventory.nodes] == [None]
    result = plan(config, inventory)
    assert not [w for w in result.warnings if "NVLink" in w]


@pytest.mark.parametrize("code", sorted(NVML_CODE_NAMES))
def test_every_fabric_status_is_named_as_nvml_names_it(take: Take, code: int) -> None:
    fabric = take(_tray(status=code)).accelerators[0].fabric
    assert fabric is not None
    name = NVML_CODE_NAMES[code].removeprefix("NVML_ERROR_").removeprefix("NVML_").lower()
    assert fabric.status == name
    assert fabric.registered == (code == 0)


def test_a_status_newer_than_the_package_is_named_by_its_code(take: Take) -> None:
    fabric = take(_tray(status=77)).accelerators[0].fabric
    assert fabric is not None
    assert fabric.status == "error_77"


def test_the_health_mask_and_clique_come_through(take: Take) -> None:
    fabric = take(_tray(health_mask=0b1001, clique_id=2**32 - 1)).accelerators[0].fabric
    assert fabric is not None
    assert (fabric.health_mask, fabric.clique_id) == (0b1001, 2**32 - 1)


def test_a_driver_that_knows_struct_v2_only_is_asked_again_with_v2(take: Take) -> None:
    machine = _tray(health_mask=5)
    machine.fabric_version = 2
    fabric = take(machine).accelerators[0].fabric
    assert fabric == Fabric(NVL72_CLUSTER, 1, "completed", "success", 5)


def test_a_driver_that_knows_no_struct_version_falls_back_to_the_legacy_call(take: Take) -> None:
    machine = _tray(health_mask=5)
    machine.fabric_version = 1
    snap = take(machine)
    # The legacy struct has no health mask; nothing else is lost, and no error is recorded.
    assert snap.accelerators[0].fabric == Fabric(NVL72_CLUSTER, 1, "completed", "success", 0)
    assert {a.error for a in snap.accelerators} == {None}


def test_a_driver_without_the_fabric_symbols_loads_and_reports_null(take: Take) -> None:
    machine = topology("gb200-nvl72-tray")
    machine.old_driver = True
    snap = take(machine)
    assert snap.nvml_error is None
    assert len(snap.accelerators) == 4
    assert {a.fabric for a in snap.accelerators} == {None}
    assert {a.error for a in snap.accelerators} == {None}


def test_a_failing_fabric_query_is_the_gpus_error(take: Take) -> None:
    machine = topology("gb200-nvl72-tray")
    machine.gpus[2].fail["nvmlDeviceGetGpuFabricInfoV"] = 4  # NO_PERMISSION
    snap = take(machine)
    assert snap.accelerators[2].fabric is None
    assert snap.accelerators[2].error is not None
    assert snap.accelerators[2].error.startswith("nvmlDeviceGetGpuFabricInfoV failed")
    assert snap.accelerators[1].fabric is not None


def test_fabric_not_supported_by_the_versioned_call_is_no_fabric(take: Take) -> None:
    machine = topology("gb200-nvl72-tray")
    machine.gpus[0].fail["nvmlDeviceGetGpuFabricInfoV"] = 3  # NOT_SUPPORTED
    snap = take(machine)
    assert (snap.accelerators[0].fabric, snap.accelerators[0].error) == (None, None)


def test_a_fabric_that_changes_between_snapshots_is_read_again(take: Take) -> None:
    machine = _tray(state="in_progress")
    assert take(machine).accelerators[0].fabric.state == "in_progress"  # type: ignore[union-attr]
    machine = _tray(state="completed")
    assert take(machine).accelerators[0].fabric.state == "completed"  # type: ignore[union-attr]


@pytest.mark.skipif(_backend.native_module is None, reason="the compiled backend is not active")
@pytest.mark.parametrize("version", [1, 2, 3])
@pytest.mark.parametrize("state", STATES)
def test_both_backends_agree_on_fabric(use_node: UseNode, version: int, state: str) -> None:
    machine = _tray(state=state, status=27, health_mask=3)
    machine.fabric_version = version
    use_node(machine)
    compiled = _snapshot.take("cffi")
    fallback = _snapshot.take("purepython")
    assert dataclasses.replace(fallback, source="nvml-cffi") == compiled


def test_a_json_topology_takes_a_fabric_per_gpu(tmp_path: object) -> None:
    from pathlib import Path

    path = Path(str(tmp_path)) / "tray.json"
    fabric = {"cluster_uuid": NVL72_CLUSTER, "clique_id": 3, "status": "NVML_ERROR_NOT_READY"}
    path.write_text(json.dumps({"gpus": [{"fabric": fabric}, {}], "fabric_version": 2}))
    machine = load_topology(path)
    assert machine.gpus[0].fabric == FakeFabric(NVL72_CLUSTER, 3, "completed", 27, 0)
    assert machine.gpus[1].fabric is None
    assert machine.fabric_version == 2


@pytest.mark.parametrize(
    ("fabric", "field"),
    [
        ({"cluster_uuid": "rack-1"}, "gpus[0].fabric.cluster_uuid"),
        ({"cluster_uuid": NVL72_CLUSTER, "state": "done"}, "gpus[0].fabric.state"),
        ({"cluster_uuid": NVL72_CLUSTER, "clique_id": -1}, "gpus[0].fabric.clique_id"),
        ({"clique_id": 1}, "gpus[0].fabric.cluster_uuid"),
    ],
)
def test_a_bad_fabric_in_a_json_topology_is_named(
    fabric: dict[str, object], field: str, tmp_path: object
) -> None:
    from pathlib import Path

    from placement_native.errors import FakeTopologyError

    path = Path(str(tmp_path)) / "bad.json"
    path.write_text(json.dumps({"gpus": [{"fabric": fabric}]}))
    with pytest.raises(FakeTopologyError) as info:
        load_topology(path)
    assert info.value.field == field
