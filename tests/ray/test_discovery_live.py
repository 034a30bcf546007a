"""Discovery types a live node's accelerators from Ray's view where NVML finds none.

A small extra node declaring Ascend NPUs joins the session cluster for this module only.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from placement_ray._discovery import build_inventory, discover_nodes


@pytest.fixture(scope="module")
def npu_node(simulated: Any) -> Iterator[str]:
    """The Ray node id of an extra node with 2 NPUs (Ascend 910B) and no GPU."""
    sim_cluster = simulated.ray_cluster
    node = sim_cluster.add_node(
        num_cpus=1,
        num_gpus=0,
        resources={"NPU": 2, "accelerator_type:Ascend910B": 1},
        node_ip_address="127.0.0.1",
        object_store_memory=80 * 1024 * 1024,
    )
    sim_cluster.wait_for_nodes(timeout=60)
    try:
        yield str(node.node_id)
    finally:
        sim_cluster.remove_node(node)
        simulated.wait_gone(str(node.node_id), "the extra NPU node")


def test_a_live_npu_node_has_ascend_accelerators(npu_node: str) -> None:
    facts = discover_nodes([npu_node], timeout_s=60)
    inventory = build_inventory(facts)
    node = inventory.node(0)
    assert [(a.index, a.type, a.model) for a in node.accelerators] == [
        (0, "ascend", "Ascend910B"),
        (1, "ascend", "Ascend910B"),
    ]
    assert node.accelerator_type == "ascend"
