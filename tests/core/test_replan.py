"""replan: a lost node's processes move whole to a compatible spare, nothing else moves."""

from __future__ import annotations

import copy
import json
import pickle
from pathlib import Path
from typing import Any

import pytest

from placement_core import (
    Inventory,
    NoSpareError,
    PlacementRuleError,
    PlacementSyntaxError,
    Plan,
    plan,
    replan,
)
from placement_core._sources import inventory_from_snapshots

SWITCHES = Path(__file__).parent / "data" / "snapshot_pcie_two_switches.json"


def planned(spares: str = "3", nodes: int = 4, **rules: Any) -> Plan:
    placement = rules or {"actor": "0-15", "rollout": "16-23:0-3"}
    document = {
        "cluster": {"num_nodes": nodes, "spare_nodes": spares, "component_placement": placement}
    }
    return plan(document, Inventory.uniform(nodes, 8))


def test_a_lost_nodes_processes_move_to_the_spare() -> None:
    result = replan(planned(), [1])
    assert [p.node_rank for p in result.plan.components["actor"]] == [0] * 8 + [3] * 8
    assert result.lines() == ["actor 8-15: node 1 -> node 3"]


def test_the_move_is_data() -> None:
    (move,) = replan(planned(), "1").moves
    assert (move.lost, move.spare, move.lost_node_id, move.spare_node_id) == (
        1,
        3,
        "node-1",
        "node-3",
    )
    assert dict(move.ranks) == {"actor": tuple(range(8, 16))}


def test_a_moved_process_keeps_everything_but_its_node() -> None:
    before = planned()
    after = replan(before, 1).plan
    for old, new in zip(before.components["actor"][8:], after.components["actor"][8:], strict=True):
        assert (new.node_rank, new.node_id) == (3, "node-3")
        assert (new.rank, new.local_rank, new.local_world_size) == (
            old.rank,
            old.local_rank,
            old.local_world_size,
        )
        assert new.hardware_ranks == old.hardware_ranks
        assert new.visible_accelerators == old.visible_accelerators
        assert new.placement_node_rank == old.placement_node_rank


def test_survivors_keep_their_records() -> None:
    before = planned()
    after = replan(before, 1).plan
    assert after.components["rollout"] is before.components["rollout"]
    # Records are built when read (placement_core.Placements): equal, not the same object.
    assert after.components["actor"][:8] == before.components["actor"][:8]


def test_a_moved_process_keeps_its_environment_but_the_master() -> None:
    before = planned()
    after = replan(before, 1).plan
    assert after.env("actor", 9) == before.env("actor", 9)


def test_rank_0_moved_gives_the_new_master_node() -> None:
    result = replan(planned(), 0)
    assert result.master_moves() == {"actor": (0, 3)}
    assert result.plan.env("actor", 5)["MASTER_ADDR"] == "node-3"
    assert result.lines() == ["actor 0-7: node 0 -> node 3 (rank 0: the master node is now node 3)"]


def test_lost_nodes_take_the_lowest_spares_in_order() -> None:
    result = replan(planned(spares="3-5", nodes=6), "1,0")
    assert [(m.lost, m.spare) for m in result.moves] == [(0, 3), (1, 4)]
    assert result.spares_left == (5,)
    assert result.plan.config.spare_nodes == (5,)


def test_a_node_shared_by_components_moves_whole() -> None:
    shared = planned(spares="2", nodes=3, actor="0-15", rollout="0-15:0-3")
    (move,) = replan(shared, 1).moves
    assert dict(move.ranks) == {"actor": tuple(range(8, 16)), "rollout": (2, 3)}


def test_a_lost_spare_is_dropped() -> None:
    result = replan(planned(spares="3-4", nodes=5), 3)
    assert result.moves == ()
    assert result.dropped_spares == (3,)
    assert result.spares_left == (4,)
    assert result.lines() == ["lost spare node 3: dropped"]


def test_a_lost_idle_node_moves_nothing() -> None:
    result = replan(planned(spares="3", nodes=5), 4)
    assert (result.moves, result.idle) == ((), (4,))
    assert result.plan.lost_nodes == (4,)


def test_a_lost_spare_is_not_used_for_another_lost_node() -> None:
    result = replan(planned(spares="3-4", nodes=5), "0,3")
    assert [(m.lost, m.spare) for m in result.moves] == [(0, 4)]


def test_no_spare_left_names_the_lost_node_and_what_it_needs() -> None:
    with pytest.raises(NoSpareError) as caught:
        replan(planned(), "1,2")
    error = caught.value
    assert error.lost == (2,)
    assert error.needs == {2: "8x nvidia; no node group"}
    assert "no spare is left (spare 3 takes over node 1)" in error.reason
    assert isinstance(error, PlacementRuleError)


def test_a_spare_of_another_kind_is_not_used() -> None:
    document = {
        "cluster": {
            "num_nodes": 3,
            "spare_nodes": "2",
            "inventory": [
                {"node_ranks": "0-1", "accelerators": {"model": "A800", "count": 8}},
                {"node_ranks": "2", "accelerators": {"model": "H100", "count": 8}},
            ],
            "component_placement": {"actor": "0-15"},
        }
    }
    with pytest.raises(NoSpareError, match="node 0 needs a spare with 8x nvidia A800"):
        replan(plan(document), 0)


def test_replan_is_deterministic() -> None:
    before = planned(spares="3-5", nodes=6)
    assert replan(before, [1, 0]).plan.components == replan(before, "0-1").plan.components


def test_replan_changes_nothing_in_the_plan_it_is_given() -> None:
    before = planned()
    snapshot = dict(before.components)
    replan(before, 1)
    assert dict(before.components) == snapshot
    assert before.config.spare_nodes == (3,)


def test_a_replanned_plan_can_lose_more_nodes() -> None:
    first = replan(planned(spares="3-4", nodes=5), 1)
    second = replan(first.plan, 3)
    assert [(m.lost, m.spare) for m in second.moves] == [(3, 4)]
    assert second.plan.lost_nodes == (1, 3)
    assert [(m.lost, m.spare) for m in second.plan.moves] == [(1, 3), (3, 4)]
    assert {p.node_rank for p in second.plan.components["actor"]} == {0, 4}


def test_a_replanned_plan_pickles() -> None:
    after = replan(planned(), 1).plan
    again = pickle.loads(pickle.dumps(after))
    assert again.moves == after.moves
    assert again.lost_nodes == (1,)


@pytest.mark.parametrize("lost", [[], "", [9], "9", True, [True], ["1"], [1.5], 2.0, None])
def test_bad_lost_sets_are_errors_at_lost(lost: Any) -> None:
    with pytest.raises((PlacementRuleError, PlacementSyntaxError)) as caught:
        replan(planned(), lost)
    assert caught.value.path == "lost"


def test_a_lost_rank_list_that_does_not_parse_shows_a_caret() -> None:
    with pytest.raises(PlacementSyntaxError) as caught:
        replan(planned(), "1-x")
    assert "^" in str(caught.value)


def test_a_moved_process_gets_the_spares_cpus() -> None:
    document = json.loads(SWITCHES.read_text())
    spare = copy.deepcopy(document)
    for accelerator in spare["accelerators"]:
        accelerator["cpu_affinity"] = "100-101"
        accelerator["uuid"] += "-spare"  # another machine
    inventory = inventory_from_snapshots([document, spare])
    before = plan(
        {"cluster": {"num_nodes": 2, "spare_nodes": "1", "component_placement": {"a": "0-1"}}},
        inventory,
    )
    after = replan(before, 0).plan
    assert before.components["a"][0].cpus != after.components["a"][0].cpus
    assert {p.cpus for p in after.components["a"]} == {"100", "101"}


def test_a_robot_controller_moves_to_the_spares_robot() -> None:
    robots = {
        "type": "Franka",
        "configs": [
            {"robot_ip": "10.0.0.1", "node_rank": 0},
            {"robot_ip": "10.0.0.2", "node_rank": 1},
        ],
    }
    document = {
        "cluster": {
            "num_nodes": 2,
            "spare_nodes": "1",
            "node_groups": [{"label": "franka", "node_ranks": "0-1", "hardware": robots}],
            "component_placement": {"ctl": {"node_group": "franka", "placement": "0"}},
        }
    }
    before = plan(document, Inventory.uniform(2, 0))
    after = replan(before, 0).plan
    assert after.components["ctl"][0].hardware_ranks == before.components["ctl"][0].hardware_ranks
    assert after.hardware_configs("ctl", 0)[0]["robot_ip"] == "10.0.0.2"


@pytest.mark.parametrize("lost", [b"1", bytearray(b"1"), {1: "x"}])
def test_bytes_or_a_mapping_as_lost_nodes_is_a_type_error_not_node_49(lost: Any) -> None:
    with pytest.raises(PlacementRuleError, match="expected node ranks") as caught:
        replan(planned(), lost)
    assert "is not a node" not in str(caught.value)
    assert caught.value.path == "lost"
