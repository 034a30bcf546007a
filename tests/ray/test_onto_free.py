"""Recovery onto free capacity, decided without Ray: which free node, the moved plan, the
ledger's move of a lease, and the plan views' held GPUs in the plan's ids."""

from __future__ import annotations

import pytest

from placement_core import Inventory, Node, Plan, plan, replan
from placement_ray._held_view import in_plan_ids
from placement_ray._lease_state import LeaseBook, NodeCapacity, Request, Slot
from placement_ray._onto_free import choose_free, extended_plan
from placement_ray.errors import LeaseError

CLUSTER = Inventory.uniform(4, 2)  # the whole cluster: nodes n0-n3 (node-<rank> ids)


def job_plan() -> Plan:
    """A job of 2 nodes x 2 GPUs on cluster nodes 0 and 1, no spare."""
    config = {"cluster": {"num_nodes": 2, "component_placement": {"actor": "0-3"}}}
    return plan(config, Inventory(CLUSTER.nodes[:2]))


def free_of(*held: tuple[str, int]) -> dict[str, list[int]]:
    return {
        n.node_id: [a.index for a in n.accelerators if (n.node_id, a.index) not in held]
        for n in CLUSTER.nodes
    }


def lost_node(rank: int) -> dict[int, Node]:
    return {rank: CLUSTER.nodes[rank]}


def test_a_lost_node_takes_the_lowest_ranked_node_with_its_accelerators_free() -> None:
    chosen = choose_free(lost_node(1), CLUSTER.nodes[2:], free_of())
    assert chosen[1].node_id == CLUSTER.nodes[2].node_id


def test_a_node_another_job_holds_any_needed_accelerator_of_is_never_chosen() -> None:
    node2 = CLUSTER.nodes[2].node_id
    chosen = choose_free(lost_node(1), CLUSTER.nodes[2:], free_of((node2, 1)))
    assert chosen[1].node_id == CLUSTER.nodes[3].node_id


def test_no_free_node_leaves_the_lost_node_out() -> None:
    held = [(n.node_id, i) for n in CLUSTER.nodes[2:] for i in (0, 1)]
    assert choose_free(lost_node(1), CLUSTER.nodes[2:], free_of(*held)) == {}


def test_two_lost_nodes_never_take_the_same_free_node() -> None:
    lost = {0: CLUSTER.nodes[0], 1: CLUSTER.nodes[1]}
    chosen = choose_free(lost, CLUSTER.nodes[2:], free_of())
    assert {r: n.rank for r, n in chosen.items()} == {0: 2, 1: 3}


def test_the_free_node_joins_the_plan_as_a_spare_and_replan_moves_the_ranks_onto_it() -> None:
    before = job_plan()
    chosen = choose_free(lost_node(1), CLUSTER.nodes[2:], free_of())
    extended = extended_plan(before, chosen)
    assert extended.config.num_nodes == 3
    assert extended.config.spare_nodes == (2,)
    assert extended.inventory.node(2).node_id == CLUSTER.nodes[2].node_id
    result = replan(extended, [1])
    assert result.lines() == ["actor 2-3: node 1 -> node 2"]
    moved = result.plan.components["actor"][2:]
    assert {p.node_id for p in moved} == {CLUSTER.nodes[2].node_id}
    assert [p.hardware_ranks for p in moved] == [(0,), (1,)]
    assert result.spares_left == ()


def test_the_added_node_offers_only_the_accelerators_the_lost_node_held() -> None:
    config = {"cluster": {"num_nodes": 2, "component_placement": {"actor": "0-2"}}}
    before = plan(config, Inventory(CLUSTER.nodes[:2]))  # node 1 uses GPU 0 only
    extended = extended_plan(before, choose_free(lost_node(1), CLUSTER.nodes[2:], free_of()))
    assert [a.index for a in extended.inventory.node(2).accelerators] == [0]
    assert [a.index for a in extended.inventory.node(1).accelerators] == [0]


def ledger() -> LeaseBook:
    book = LeaseBook(
        NodeCapacity(n.node_id, n.rank, tuple((a.index, None) for a in n.accelerators))
        for n in CLUSTER.nodes
    )
    slots = (Slot("node-0", 0), Slot("node-0", 1), Slot("node-1", 0), Slot("node-1", 1))
    assert book.acquire(Request("job", "o1", 0, slots, (2, 2)), 1.0)
    assert book.acquire(Request("other", "o2", 0, (Slot("node-2", 0),), (1,)), 2.0)
    return book


def test_a_lease_moves_off_the_lost_node_onto_free_accelerators_all_at_once() -> None:
    book = ledger()
    assert book.move("job", ["node-1"], [Slot("node-3", 0), Slot("node-3", 1)])
    assert {(s.node_id, s.accelerator) for s in book.leases["job"].slots} == {
        ("node-0", 0),
        ("node-0", 1),
        ("node-3", 0),
        ("node-3", 1),
    }


def test_a_move_onto_an_accelerator_another_job_holds_changes_nothing() -> None:
    book = ledger()
    before = book.leases["job"]
    assert not book.move("job", ["node-1"], [Slot("node-2", 0), Slot("node-2", 1)])
    assert book.leases["job"] == before


def test_a_retried_move_is_granted_again() -> None:
    book = ledger()
    add = [Slot("node-3", 0), Slot("node-3", 1)]
    assert book.move("job", ["node-1"], add)
    assert book.move("job", ["node-1"], add)
    assert len(book.leases["job"].slots) == 4


def test_a_move_of_a_job_without_lease_or_onto_an_unknown_gpu_is_refused() -> None:
    book = ledger()
    with pytest.raises(LeaseError, match="holds no lease"):
        book.move("nobody", [], [])
    with pytest.raises(LeaseError, match="has no accelerator 7"):
        book.move("job", ["node-1"], [Slot("node-3", 7)])


def test_held_gpus_colliding_with_the_plans_ids_take_the_physical_gpus_place() -> None:
    # The plan's ids 0, 1 on node 0 sit on physical GPUs 2, 3; another job holds 0.
    gpu_map = {(0, 0): 2, (0, 1): 3}
    assert in_plan_ids({(0, 0): "b"}, gpu_map) == {(0, 2): "b"}
    assert in_plan_ids({(1, 0): "b"}, gpu_map) == {(1, 0): "b"}
