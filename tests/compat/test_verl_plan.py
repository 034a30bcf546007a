"""The plan under verl's pools: ranks in node order, shortfalls refused up front, named."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from placement_ray._verl.plan import NodeRoom, check_colocate_count, check_counts, plan_pools
from placement_ray.errors import ArgumentError, InfeasiblePlacementGroupError


def rooms(*gpus: int, cpus: float = 32.0) -> list[NodeRoom]:
    return [NodeRoom(rank=r, gpus=g, cpus=cpus) for r, g in enumerate(gpus)]


def test_ranks_fill_nodes_in_node_order() -> None:
    plans = plan_pools({"global": [2, 2]}, rooms(2, 2), cpus_per_bundle=1)
    assert plans["global"].nodes == (0, 0, 1, 1)


def test_groups_hold_store0_consecutive_ranks() -> None:
    plan = plan_pools({"global": [2, 2]}, rooms(2, 2), cpus_per_bundle=1)["global"]
    assert plan.groups() == [(0, 0), (1, 1)]


def test_unequal_nodes_take_the_larger_count_first() -> None:
    plan = plan_pools({"global": [1, 2]}, rooms(2, 1), cpus_per_bundle=1)["global"]
    assert plan.nodes == (0, 0, 1)
    assert plan.chunk == 1


def test_pools_planned_together_share_nodes_in_order() -> None:
    plans = plan_pools({"actor": [2], "reward": [2]}, rooms(4), cpus_per_bundle=1)
    assert plans["actor"].nodes == (0, 0)
    assert plans["reward"].nodes == (0, 0)


def test_pool_bigger_than_cluster_is_refused_in_totals() -> None:
    with pytest.raises(
        InfeasiblePlacementGroupError,
        match=r"bigger than the cluster.*6 GPU asked, the nodes have 4",
    ):
        plan_pools({"global": [2, 2, 2]}, rooms(2, 2), cpus_per_bundle=1)


def test_cpu_shortfall_names_the_node_and_the_missing_cpus() -> None:
    nodes = [NodeRoom(rank=0, gpus=2, cpus=8), NodeRoom(rank=1, gpus=2, cpus=5)]
    with pytest.raises(InfeasiblePlacementGroupError) as info:
        plan_pools({"global": [2, 2]}, nodes, cpus_per_bundle=3)
    message = str(info.value)
    assert "2 processes on one node need 2 GPU and 6 CPUs" in message
    assert "node 1: 2 of 2 GPU and 5 of 5 CPUs left, short 1 CPUs" in message


def test_gpu_shortfall_on_every_node_is_named() -> None:
    with pytest.raises(InfeasiblePlacementGroupError, match=r"node 0: 2 of 2 GPU .* short 1 GPU"):
        plan_pools({"global": [3]}, rooms(2, 2), cpus_per_bundle=1)


def test_a_pool_without_gpus_needs_cpus_only() -> None:
    plan = plan_pools({"cpu": [2]}, rooms(0, 0, cpus=2), cpus_per_bundle=1, gpus_per_bundle=0)
    assert plan["cpu"].nodes == (0, 0)


@pytest.mark.parametrize("value", [0, -1, True, 1.0, None])
def test_colocate_count_must_be_a_positive_int(value: object) -> None:
    with pytest.raises(
        ArgumentError, match=rf"max_colocate_count: expected an int >= 1.*got {value!r}"
    ):
        check_colocate_count(value)


@pytest.mark.parametrize("value", [[], [0], [2, -1], "8", [1.5], None])
def test_counts_must_be_ints_of_at_least_one(value: object) -> None:
    with pytest.raises(ArgumentError, match=r"process_on_nodes: expected"):
        check_counts("process_on_nodes", value)


@given(
    gpus=st.lists(st.integers(0, 8), min_size=1, max_size=6),
    counts=st.lists(st.integers(1, 8), min_size=1, max_size=6),
)
def test_any_plan_keeps_node_order_and_capacity(gpus: list[int], counts: list[int]) -> None:
    try:
        plan = plan_pools({"p": counts}, rooms(*gpus), cpus_per_bundle=1)["p"]
    except InfeasiblePlacementGroupError:
        return
    assert list(plan.nodes) == sorted(plan.nodes)
    assert plan.world_size == sum(counts)
    for rank, have in enumerate(gpus):
        assert plan.nodes.count(rank) <= have
    assert [n for g in plan.groups() for n in g] == list(plan.nodes)
