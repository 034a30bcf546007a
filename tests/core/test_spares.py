"""Spare nodes in the config: declared, checked, matched to the nodes they can replace."""

from __future__ import annotations

from typing import Any

import pytest

from placement_core import (
    ConfigError,
    Inventory,
    PlacementRuleError,
    load_config,
    plan,
    plan_from_assignments,
)


def config(**cluster: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "num_nodes": 4,
        "spare_nodes": "3",
        "component_placement": {"actor": "0-15", "rollout": "16-23:0-3"},
    }
    return {"cluster": base | cluster}


def test_spare_nodes_is_a_rank_list() -> None:
    assert load_config(config(spare_nodes="2-3")).spare_nodes == (2, 3)


def test_spare_nodes_defaults_to_none() -> None:
    cluster = config()["cluster"]
    del cluster["spare_nodes"]
    assert load_config({"cluster": cluster}).spare_nodes == ()


def test_a_spare_out_of_range_is_located() -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(config(spare_nodes="3-5"))
    (problem,) = caught.value.problems
    assert problem.path == "cluster.spare_nodes"
    assert "nodes 4-5 are out of range: num_nodes is 4" in problem.message


def test_a_spare_out_of_range_is_reported_next_to_other_problems() -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(config(spare_nodes="9", node_groups=[{"label": "cluster", "node_ranks": 0}]))
    paths = {p.path for p in caught.value.problems}
    assert paths == {"cluster.spare_nodes", "cluster.node_groups[0].label"}


def test_a_spare_that_does_not_parse_is_located() -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(config(spare_nodes="3-x"))
    assert caught.value.problems[0].path == "cluster.spare_nodes"


def test_a_rule_on_a_spare_is_an_error_at_the_rule() -> None:
    with pytest.raises(PlacementRuleError) as caught:
        plan(config(component_placement={"actor": "0-31"}), Inventory.uniform(4, 8))
    error = caught.value
    assert error.path == "cluster.component_placement.actor.placement"
    assert "spare node 3" in error.reason
    assert "24-31 on spare nodes; place on 0-23 instead" in error.reason


def test_all_on_a_group_with_a_spare_leaves_the_spare_out() -> None:
    result = plan(config(component_placement={"actor": "all"}), Inventory.uniform(4, 8))
    placements = result.components["actor"]
    assert len(placements) == 24
    assert {p.node_rank for p in placements} == {0, 1, 2}
    assert [p.hardware_ranks for p in placements[-2:]] == [(6,), (7,)]


def test_all_with_processes_per_resource_leaves_the_spare_out_too() -> None:
    result = plan(config(component_placement={"actor": "all:0-47"}), Inventory.uniform(4, 8))
    assert {p.node_rank for p in result.components["actor"]} == {0, 1, 2}


def test_all_on_a_group_with_a_spare_between_used_nodes_numbers_on_past_it() -> None:
    result = plan(
        config(spare_nodes="1", component_placement={"actor": "all"}), Inventory.uniform(4, 8)
    )
    nodes = [p.node_rank for p in result.components["actor"]]
    assert nodes == [0] * 8 + [2] * 8 + [3] * 8
    assert [p.rank for p in result.components["actor"]] == list(range(24))


def test_a_node_rule_on_a_spare_is_an_error() -> None:
    rules = {"env": {"node_group": "node", "placement": "0-3"}}
    with pytest.raises(PlacementRuleError) as caught:
        plan(config(component_placement=rules), Inventory.uniform(4, 8))
    assert caught.value.path == "cluster.component_placement.env.placement"


def test_an_assignment_on_a_spare_is_an_error() -> None:
    loaded = load_config(config())
    with pytest.raises(PlacementRuleError) as caught:
        plan_from_assignments(
            {"actor": [(0, (0,)), (3, (0,))]}, Inventory.uniform(4, 8), config=loaded
        )
    assert caught.value.path == "assignments.actor[1]"


def test_each_spare_lists_the_used_nodes_it_can_replace() -> None:
    result = plan(
        config(spare_nodes="2-3", component_placement={"a": "0-15"}), Inventory.uniform(4, 8)
    )
    assert dict(result.spares().replaces) == {2: (0, 1), 3: (0, 1)}
    assert result.spares().uncovered == ()


def test_a_spare_with_other_accelerators_replaces_nothing() -> None:
    document = config(
        inventory=[
            {"node_ranks": "0-2", "accelerators": {"model": "A800", "count": 8}},
            {"node_ranks": "3", "accelerators": {"model": "H100", "count": 8}},
        ]
    )
    spares = plan(document).spares()
    assert dict(spares.replaces) == {3: ()}
    assert spares.uncovered == (0, 1, 2)
    assert spares.lines() == [
        "spare node 3: can replace no used node",
        "note: no spare can replace nodes 0-2 (a spare would need 8x nvidia A800; no node group)",
    ]


def test_a_spare_outside_the_node_groups_replaces_nothing() -> None:
    document = config(node_groups=[{"label": "a800", "node_ranks": "0-2"}])
    document["cluster"]["component_placement"] = {
        "actor": {"node_group": "a800", "placement": "0-23"}
    }
    spares = plan(document, Inventory.uniform(4, 8)).spares()
    assert spares.uncovered == (0, 1, 2)
    assert "node groups a800" in spares.needs[0]


def test_a_spare_with_another_group_environment_replaces_nothing() -> None:
    groups = [
        {
            "label": "a800",
            "node_ranks": "0-3",
            "env_configs": [
                {"node_ranks": "0-2", "env_vars": [{"NCCL_IB_HCA": "mlx5"}]},
                {"node_ranks": "3", "env_vars": [{"NCCL_IB_HCA": "mlx4"}]},
            ],
        }
    ]
    document = config(node_groups=groups)
    document["cluster"]["component_placement"] = {
        "actor": {"node_group": "a800", "placement": "0-23"}
    }
    spares = plan(document, Inventory.uniform(4, 8)).spares()
    assert spares.uncovered == (0, 1, 2)
    assert "NCCL_IB_HCA=mlx5" in spares.needs[0]


def test_a_robot_node_needs_a_spare_with_the_same_robots() -> None:
    robots = {
        "type": "Franka",
        "configs": [
            {"robot_ip": "10.0.0.1", "node_rank": 0},
            {"robot_ip": "10.0.0.2", "node_rank": 1},
        ],
    }
    document = {
        "cluster": {
            "num_nodes": 3,
            "spare_nodes": "1",
            "node_groups": [{"label": "franka", "node_ranks": "0-1", "hardware": robots}],
            "component_placement": {"ctl": {"node_group": "franka", "placement": "0"}},
        }
    }
    assert dict(plan(document, Inventory.uniform(3, 0)).spares().replaces) == {1: (0,)}


def test_a_plan_without_spares_has_an_empty_spares_view() -> None:
    result = plan(
        {"cluster": {"num_nodes": 1, "component_placement": {"a": "0-7"}}}, Inventory.uniform(1, 8)
    )
    assert dict(result.spares().replaces) == {}
    assert result.spares().lines() == []


def test_spares_that_replace_the_same_nodes_share_a_line() -> None:
    result = plan(
        config(spare_nodes="2-3", component_placement={"a": "0-15"}), Inventory.uniform(4, 8)
    )
    assert result.spares().lines() == ["spare nodes 2-3: each can replace nodes 0-1"]
