"""``plan_from_assignments``: any strategy's per-process output becomes a ``Plan``."""

from __future__ import annotations

import pickle

import pytest

from placement_core import (
    Accelerator,
    Inventory,
    Node,
    PlacementError,
    PlacementRuleError,
    load_config,
    plan,
    plan_from_assignments,
    shared_ranks,
)


def test_ranks_follow_the_order_of_the_assignments() -> None:
    p = plan_from_assignments({"actor": [(1, (2,)), (0, (0,))]}, Inventory.uniform(2, 4))
    assert [(x.rank, x.node_rank, x.hardware_ranks) for x in p.components["actor"]] == [
        (0, 1, (2,)),
        (1, 0, (0,)),
    ]


def test_local_ranks_count_the_component_per_node() -> None:
    p = plan_from_assignments({"actor": [(0, (0,)), (1, (0,)), (0, (1,))]}, Inventory.uniform(2, 2))
    assert [(x.local_rank, x.local_world_size) for x in p.components["actor"]] == [
        (0, 2),
        (0, 1),
        (1, 2),
    ]


def test_placement_node_rank_numbers_nodes_by_first_use() -> None:
    p = plan_from_assignments({"actor": [(1, (0,)), (0, (0,))]}, Inventory.uniform(2, 2))
    assert [x.placement_node_rank for x in p.components["actor"]] == [0, 1]


def test_the_same_placements_as_a_config_plan_for_the_same_layout() -> None:
    inventory = Inventory.uniform(2, 4)
    config = load_config({"cluster": {"num_nodes": 2, "component_placement": {"actor": "2-5"}}})
    planned = plan(config, inventory).components["actor"]
    given = plan_from_assignments(
        {"actor": [(x.node_rank, x.hardware_ranks) for x in planned]}, inventory
    ).components["actor"]
    assert given == planned


def test_worker_env_isolates_each_process_to_its_ids() -> None:
    p = plan_from_assignments({"engine": [(0, (1, 3))]}, Inventory.uniform(1, 4))
    env = p.env("engine", 0)
    assert (env["CUDA_VISIBLE_DEVICES"], env["LOCAL_RANK"], env["WORLD_SIZE"]) == ("1,3", "0", "1")


def test_accelerator_type_comes_from_the_inventory() -> None:
    node = Node(rank=0, node_id="n0", accelerators=(Accelerator(index=0, type="amd"),))
    p = plan_from_assignments({"a": [(0, (0,))]}, Inventory((node,)))
    assert "HIP_VISIBLE_DEVICES" in p.env("a", 0)


def test_a_process_without_ids_sees_no_accelerator() -> None:
    p = plan_from_assignments({"driver": [(0, ())]}, Inventory.uniform(1, 2))
    assert p.components["driver"][0].accelerator_type is None


def test_the_plan_pickles() -> None:
    p = plan_from_assignments({"actor": [(0, (0,))]}, Inventory.uniform(1, 2))
    assert pickle.loads(pickle.dumps(p)).components == p.components


def test_an_unknown_node_is_named() -> None:
    with pytest.raises(PlacementRuleError, match=r"node 2 is not in the inventory") as info:
        plan_from_assignments({"actor": [(2, (0,))]}, Inventory.uniform(2, 2))
    assert info.value.path == "assignments.actor[0]"


def test_an_accelerator_id_out_of_range_is_named() -> None:
    with pytest.raises(PlacementRuleError, match=r"node 0 has no accelerator 4 \(its ids"):
        plan_from_assignments({"actor": [(0, (4,))]}, Inventory.uniform(1, 4))


def test_an_empty_component_is_an_error() -> None:
    with pytest.raises(PlacementRuleError, match="non-empty list") as info:
        plan_from_assignments({"actor": []}, Inventory.uniform(1, 4))
    assert info.value.path == "assignments.actor"


def test_no_components_is_an_error() -> None:
    with pytest.raises(PlacementError, match="non-empty mapping"):
        plan_from_assignments({}, Inventory.uniform(1, 4))


def test_a_malformed_assignment_is_named() -> None:
    with pytest.raises(PlacementRuleError, match=r"\(node rank, accelerator ids\) pair"):
        plan_from_assignments({"actor": [0]}, Inventory.uniform(1, 4))  # type: ignore[list-item]


def test_repeated_ids_in_one_process_are_an_error() -> None:
    with pytest.raises(PlacementRuleError, match="repeat"):
        plan_from_assignments({"actor": [(0, (1, 1))]}, Inventory.uniform(1, 4))


def test_a_node_outside_the_node_group_is_an_error() -> None:
    config = load_config(
        {
            "cluster": {
                "num_nodes": 2,
                "component_placement": {"actor": "all"},
                "node_groups": [{"label": "a100", "node_ranks": "0"}],
            }
        }
    )
    with pytest.raises(PlacementRuleError, match="not in node group 'a100'"):
        plan_from_assignments(
            {"actor": [(1, (0,))]}, Inventory.uniform(2, 2), config=config, node_group="a100"
        )


def test_shared_ranks_matches_devices_by_uuid() -> None:
    nodes = (
        Node(rank=0, node_id="n0", accelerators=(Accelerator(index=0, type="nvidia", uuid="G"),)),
        Node(rank=1, node_id="n1", accelerators=(Accelerator(index=0, type="nvidia", uuid="G"),)),
    )
    p = plan_from_assignments({"a": [(0, (0,))], "b": [(1, (0,))]}, Inventory(nodes))
    assert shared_ranks(p.components["a"], p.components["b"], p.inventory) == ((0,),)


def test_shared_ranks_by_node_and_index() -> None:
    trainer = [(0, (g,)) for g in range(4)] + [(1, (g,)) for g in range(4)]
    rollout = [(0, (0, 2)), (0, (1, 3)), (1, (0, 2))]
    p = plan_from_assignments({"a": trainer, "r": rollout}, Inventory.uniform(2, 4))
    assert shared_ranks(p.components["a"], p.components["r"]) == ((0, 2), (1, 3), (4, 6))


def test_shared_ranks_without_uuids_match_by_node_and_index() -> None:
    p = plan_from_assignments({"a": [(0, (0,))], "b": [(1, (0,))]}, Inventory.uniform(2, 1))
    assert shared_ranks(p.components["a"], p.components["b"], p.inventory) == ((),)
