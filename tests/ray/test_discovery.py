"""Inventory from what nodes reported: snapshot accelerators, else Ray's typed view."""

from __future__ import annotations

from typing import Any

import pytest

from placement_core import InventoryError, plan_from_assignments
from placement_ray._discovery import (
    accelerators_from_ray,
    accelerators_from_snapshot,
    build_inventory,
)
from placement_ray._node_order import NodeFacts

H100 = {
    "index": 1,
    "type": "nvidia",
    "model": "NVIDIA H100 80GB HBM3",
    "uuid": "GPU-1",
    "pci_bus_id": "00000000:19:00.0",
    "memory_bytes": 85520809984,
    "numa_node": 0,
    "cpu_affinity": "0-55",
    "mig": False,
}
SNAPSHOT = {
    "schema": 1,
    "hostname": "gpu-a",
    "ip": "10.0.0.1",
    "cpus": 112,
    "accelerators": [H100, {**H100, "index": 0, "uuid": "GPU-0"}],
    "links": [[0, 1, "NV18"]],
}


def test_snapshot_accelerators_keep_their_facts_sorted_by_index() -> None:
    accelerators = accelerators_from_snapshot(SNAPSHOT, {"GPU": 2})
    assert [a.index for a in accelerators] == [0, 1]
    inventory = build_inventory(
        [NodeFacts("n0", "10.0.0.1", "gpu-a", resources={"GPU": 2, "CPU": 8}, snapshot=SNAPSHOT)]
    )
    node = inventory.node(0)
    assert node.accelerator_ids == (0, 1)
    assert node.accelerators[1].uuid == "GPU-1"
    assert node.accelerators[1].model == "NVIDIA H100 80GB HBM3"
    assert node.accelerators[1].memory_bytes == 85520809984
    assert node.cpus == 112


@pytest.mark.parametrize("given", [2 << 40, None])
def test_the_live_inventory_keeps_the_snapshots_host_memory(given: int | None) -> None:
    snapshot = {**SNAPSHOT, "host_memory_bytes": given}
    facts = NodeFacts("n0", "10.0.0.1", "gpu-a", resources={"GPU": 2, "CPU": 8}, snapshot=snapshot)
    assert build_inventory([facts]).node(0).host_memory_bytes == given


def test_a_malformed_host_memory_names_the_node_and_the_field() -> None:
    snapshot = {**SNAPSHOT, "host_memory_bytes": "2TiB"}
    facts = NodeFacts("n0", "10.0.0.1", "gpu-a", resources={"GPU": 2, "CPU": 8}, snapshot=snapshot)
    with pytest.raises(InventoryError, match=r"host_memory_bytes: the snapshot taken on node 0"):
        build_inventory([facts])


def test_the_live_inventory_keeps_the_snapshots_links_and_busy_processes() -> None:
    busy = {**H100, "index": 0, "uuid": "GPU-0", "processes": [{"pid": 7, "used_memory_bytes": 1}]}
    snapshot = {**SNAPSHOT, "accelerators": [H100, busy]}
    facts = NodeFacts("n0", "10.0.0.1", "gpu-a", resources={"GPU": 2, "CPU": 8}, snapshot=snapshot)
    node = build_inventory([facts]).node(0)
    assert node.links == ((0, 1, "NV18"),)
    assert [p.pid for p in node.accelerators[0].processes] == [7]


def test_without_a_snapshot_ray_gpus_become_nvidia_accelerators_of_unknown_model() -> None:
    accelerators = accelerators_from_snapshot(None, {"GPU": 4})
    assert [(a.index, a.type, a.model) for a in accelerators] == [
        (i, "nvidia", None) for i in range(4)
    ]


def test_a_snapshot_without_nvml_falls_back_to_ray_gpus() -> None:
    snapshot = {"schema": 1, "accelerators": [], "nvml_error": "libnvidia-ml.so.1 not found"}
    assert len(accelerators_from_snapshot(snapshot, {"GPU": 2})) == 2


def test_a_cpu_node_has_no_accelerators() -> None:
    assert accelerators_from_snapshot(None, {"GPU": 0}) == ()


def test_inventory_ranks_follow_the_given_order_and_keep_ray_node_ids() -> None:
    facts = [
        NodeFacts("b", "127.0.0.1", "h", resources={"GPU": 1, "CPU": 2}),
        NodeFacts("a", "127.0.0.1", "h", resources={"CPU": 4}),
    ]
    inventory = build_inventory(facts)
    assert [(n.rank, n.node_id, n.cpus, len(n.accelerators)) for n in inventory.nodes] == [
        (0, "b", 2, 1),
        (1, "a", 4, 0),
    ]


def test_a_malformed_snapshot_names_the_node() -> None:
    from placement_core._errors import InventoryError

    bad = {**SNAPSHOT, "accelerators": [{**H100, "index": "x"}]}
    with pytest.raises(InventoryError, match=r"snapshot taken on node 0 \(n0\) is malformed"):
        build_inventory([NodeFacts("n0", "10.0.0.1", "gpu-a", snapshot=bad)])


# Ray-shaped node entries (``ray.nodes()``): resources and labels as Ray reports them.
NPU_NODE = {"Resources": {"CPU": 32.0, "NPU": 8.0, "accelerator_type:Ascend910B": 1.0}}
HPU_NODE = {"Resources": {"CPU": 32.0, "HPU": 8.0, "accelerator_type:Intel-GAUDI": 1.0}}
MI300X_NODE = {"Resources": {"CPU": 32.0, "GPU": 8.0, "accelerator_type:MI300X": 1.0}}
AMD_LABEL_NODE = {
    "Resources": {"CPU": 32.0, "GPU": 8.0},
    "Labels": {"ray.io/accelerator-type": "AMD-Instinct-MI300X-OAM"},
}
INTEL_NODE = {"Resources": {"CPU": 32.0, "GPU": 4.0, "accelerator_type:Intel-GPU-Max-1550": 1.0}}
H100_NODE = {"Resources": {"CPU": 32.0, "GPU": 8.0, "accelerator_type:H100": 1.0}}


def typed(node: dict[str, dict[str, Any]]) -> tuple[set[tuple[str, str | None]], int]:
    accelerators = accelerators_from_ray(node["Resources"], node.get("Labels"))
    return {(a.type, a.model) for a in accelerators}, len(accelerators)


@pytest.mark.parametrize(
    ("node", "expected"),
    [
        (NPU_NODE, ({("ascend", "Ascend910B")}, 8)),
        (HPU_NODE, ({("gaudi", "Intel-GAUDI")}, 8)),
        (MI300X_NODE, ({("amd", "MI300X")}, 8)),
        (AMD_LABEL_NODE, ({("amd", "AMD-Instinct-MI300X-OAM")}, 8)),
        (INTEL_NODE, ({("intel", "Intel-GPU-Max-1550")}, 4)),
        (H100_NODE, ({("nvidia", "H100")}, 8)),
    ],
    ids=["npu", "hpu", "mi300x-resource", "amd-label", "intel-gpu", "h100"],
)
def test_ray_resources_and_labels_type_a_nodes_accelerators(
    node: dict[str, dict[str, Any]], expected: tuple[set[tuple[str, str | None]], int]
) -> None:
    assert typed(node) == expected


def test_a_snapshot_without_accelerators_falls_back_to_rays_typed_view() -> None:
    snapshot = {"schema": 1, "accelerators": [], "nvml_error": "libnvidia-ml.so.1 not found"}
    accelerators = accelerators_from_snapshot(snapshot, NPU_NODE["Resources"])
    assert [(a.index, a.type) for a in accelerators] == [(i, "ascend") for i in range(8)]


@pytest.mark.parametrize(
    ("node", "variable", "noset"),
    [
        (NPU_NODE, "ASCEND_RT_VISIBLE_DEVICES", "RAY_EXPERIMENTAL_NOSET_ASCEND_RT_VISIBLE_DEVICES"),
        (HPU_NODE, "HABANA_VISIBLE_MODULES", "RAY_EXPERIMENTAL_NOSET_HABANA_VISIBLE_MODULES"),
        (MI300X_NODE, "HIP_VISIBLE_DEVICES", "RAY_EXPERIMENTAL_NOSET_HIP_VISIBLE_DEVICES"),
    ],
    ids=["npu", "hpu", "amd"],
)
def test_workers_on_a_typed_node_get_its_visibility_variable(
    node: dict[str, Any], variable: str, noset: str
) -> None:
    facts = NodeFacts(
        "n0",
        "10.0.0.1",
        "box",
        labels=node.get("Labels", {}),
        resources=node["Resources"],
        snapshot={"schema": 1, "accelerators": []},
    )
    the_plan = plan_from_assignments({"actor": [(0, (2, 3))]}, build_inventory([facts]))
    env = the_plan.env("actor", 0)
    assert (env[variable], env[noset]) == ("2,3", "1")
    assert "CUDA_VISIBLE_DEVICES" not in env


def fabric(clique_id: int, state: str = "completed") -> dict[str, Any]:
    """A snapshot accelerator's fabric entry of the NVL72 cluster ``c0ffee``."""
    return {
        "cluster_uuid": "c0ffee",
        "clique_id": clique_id,
        "state": state,
        "status": "success",
        "health_mask": 0,
    }


def test_the_live_inventory_keeps_each_nodes_nvlink_domain_and_fabric() -> None:
    accelerators = [{**H100, "index": i, "uuid": f"GPU-{i}", "fabric": fabric(2)} for i in (0, 1)]
    snapshot = {**SNAPSHOT, "accelerators": accelerators}
    facts = NodeFacts("n0", "10.0.0.1", "gpu-a", resources={"GPU": 2, "CPU": 8}, snapshot=snapshot)
    node = build_inventory([facts]).node(0)
    assert node.nvlink_domain == "c0ffee/2"
    assert [a.fabric.clique_id if a.fabric else None for a in node.accelerators] == [2, 2]


def test_a_live_node_whose_gpus_are_not_all_registered_has_no_nvlink_domain() -> None:
    accelerators = [
        {**H100, "index": 0, "uuid": "GPU-0", "fabric": fabric(2)},
        {**H100, "index": 1, "uuid": "GPU-1", "fabric": fabric(2, state="in_progress")},
    ]
    snapshot = {**SNAPSHOT, "accelerators": accelerators}
    facts = NodeFacts("n0", "10.0.0.1", "gpu-a", resources={"GPU": 2, "CPU": 8}, snapshot=snapshot)
    assert build_inventory([facts]).node(0).nvlink_domain is None
