"""One request per worker: ``worker_request`` builds it from a core ``Placement``.

No Ray cluster is needed: a request is data (the placement group is only carried).
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from ray._raylet import PlacementGroupID
from ray.util.placement_group import PlacementGroup

from placement_core import Inventory, plan, plan_from_assignments
from placement_ray._request import (
    Seat,
    WorkerOptions,
    placement_kind,
    seat_for,
    worker_request,
)
from placement_ray._worker import COMPONENT_ENV, MASTER_PORT_BLOCK
from placement_ray.demo.workers import DemoWorker
from placement_ray.errors import ArgumentError

PG = PlacementGroup(PlacementGroupID.from_random())
OTHER_PG = PlacementGroup(PlacementGroupID.from_random())
TP2 = {"cluster": {"num_nodes": 2, "component_placement": {"actor": "0-7:0-3"}}}


def identity(nodes: int, gpus: int) -> dict[tuple[int, int], tuple[int, int]]:
    """Every GPU held as itself, bundle index = position in (node, GPU) order."""
    return {(n, g): (g, n * gpus + g) for n in range(nodes) for g in range(gpus)}


def test_a_gpu_worker_sits_in_its_first_gpus_bundle_and_books_the_others() -> None:
    the_plan = plan(TP2, Inventory.uniform(2, 4))
    p = the_plan.placement("actor", 3)
    seat = seat_for(p, PG, identity(2, 4))
    assert seat == Seat(1, gpu_ids=(2, 3), bundle=(PG, 6), more_bundles=(7,))


def test_the_seat_sees_the_physical_gpus_ray_holds_for_the_plans_ids() -> None:
    the_plan = plan(TP2, Inventory.uniform(2, 4))
    p = the_plan.placement("actor", 0)
    seat = seat_for(p, PG, {(0, 0): (2, 5), (0, 1): (3, 4)})
    request = worker_request(the_plan, "actor", p, WorkerOptions(DemoWorker), seat)
    assert (seat.gpu_ids, seat.bundle, seat.more_bundles) == ((2, 3), (PG, 5), (4,))
    assert request.env["CUDA_VISIBLE_DEVICES"] == "2,3"


def test_a_node_placement_sits_on_its_node_without_a_bundle() -> None:
    rule = {"node_group": "node", "placement": "0-1"}
    config = {"cluster": {"num_nodes": 2, "component_placement": {"agent": rule}}}
    the_plan = plan(config, Inventory.uniform(2, 4))
    p = the_plan.placement("agent", 1)
    assert placement_kind(p) == "node"
    assert seat_for(p) == Seat(1)


def test_a_gpu_placement_without_held_bundles_is_an_error_naming_the_gpus() -> None:
    the_plan = plan(TP2, Inventory.uniform(2, 4))
    p = the_plan.placement("actor", 1)
    with pytest.raises(ArgumentError, match=r"rank 1 uses GPUs \[2, 3\] on node 0.*missing \[3\]"):
        seat_for(p, PG, {(0, 2): (2, 2)})


def test_the_environment_is_the_plans_plus_the_component() -> None:
    the_plan = plan(TP2, Inventory.uniform(2, 4))
    p = the_plan.placement("actor", 2)
    request = worker_request(
        the_plan, "actor", p, WorkerOptions(DemoWorker), seat_for(p, PG, identity(2, 4))
    )
    assert request.env == {**the_plan.env("actor", 2), COMPONENT_ENV: "actor"}
    assert (request.name, request.rank, request.node_rank) == ("actor rank 2", 2, 1)


def test_extra_env_vars_sit_under_the_variables_placement_ray_sets() -> None:
    the_plan = plan(TP2, Inventory.uniform(2, 4))
    p = the_plan.placement("actor", 0)
    options = WorkerOptions(DemoWorker, env_vars={"MINE": "1", "RANK": "99"})
    request = worker_request(the_plan, "actor", p, options, seat_for(p, PG, identity(2, 4)))
    assert (request.env["MINE"], request.env["RANK"]) == ("1", "0")


def test_without_rank_env_a_worker_gets_only_its_visibility_and_component() -> None:
    the_plan = plan_from_assignments({"rollout": [(1, (2, 3))]}, Inventory.uniform(2, 4))
    p = the_plan.placement("rollout", 0)
    options = WorkerOptions(DemoWorker, rank_env=False, env_vars={"MINE": "1"})
    request = worker_request(the_plan, "rollout", p, options, seat_for(p, PG, identity(2, 4)))
    assert request.env == {
        "MINE": "1",
        "CUDA_VISIBLE_DEVICES": "2,3",
        "RAY_EXPERIMENTAL_NOSET_CUDA_VISIBLE_DEVICES": "1",
        COMPONENT_ENV: "rollout",
    }


def test_only_rank_0_holds_the_master_port_block() -> None:
    the_plan = plan(TP2, Inventory.uniform(2, 4))
    options = WorkerOptions(DemoWorker, master_port=True, port_blocks={"nccl": (2, True)})
    requests = [
        worker_request(the_plan, "actor", p, options, seat_for(p, PG, identity(2, 4)))
        for p in the_plan.placements("actor")
    ]
    assert [r.holds_master_port for r in requests] == [True, False, False, False]
    assert requests[0].port_blocks == {"nccl": (2, True), MASTER_PORT_BLOCK: (1, False)}
    assert requests[1].port_blocks == {"nccl": (2, True)}


def test_a_seat_on_another_node_than_the_placement_is_an_error() -> None:
    the_plan = plan(TP2, Inventory.uniform(2, 4))
    p = the_plan.placement("actor", 0)
    with pytest.raises(ArgumentError, match="placed on node 0, seated on node 1"):
        worker_request(the_plan, "actor", p, WorkerOptions(DemoWorker), Seat(1))


def test_the_share_applies_only_where_the_worker_sits_in_a_bundle() -> None:
    the_plan = plan(TP2, Inventory.uniform(2, 4))
    p = the_plan.placement("actor", 0)
    options = WorkerOptions(DemoWorker, gpu_share=0.5)
    seated = worker_request(the_plan, "actor", p, options, seat_for(p, PG, identity(2, 4)))
    assert seated.gpu_share == 0.5
    assert replace(seated, seat=Seat(0)).gpu_share is None


def test_a_request_reissued_on_a_spare_node_keeps_everything_but_the_node() -> None:
    inventory = Inventory.uniform(3, 4)
    before = plan_from_assignments({"actor": [(0, (0, 1)), (1, (0, 1))]}, inventory)
    after = plan_from_assignments({"actor": [(0, (0, 1)), (2, (0, 1))]}, inventory)
    options = WorkerOptions(DemoWorker, args=(7,), master_port=True, gpu_share=0.4)
    old = worker_request(
        before,
        "actor",
        before.placement("actor", 1),
        options,
        seat_for(before.placement("actor", 1), PG, identity(3, 4)),
    )
    moved = after.placement("actor", 1)
    new = old.reissue(after, moved, seat_for(moved, OTHER_PG, identity(3, 4)))
    assert (new.name, new.rank, new.options, new.port_blocks) == (
        old.name,
        old.rank,
        old.options,
        old.port_blocks,
    )
    assert new.seat == Seat(2, gpu_ids=(0, 1), bundle=(OTHER_PG, 8), more_bundles=(9,))
    assert new.env == old.env


def test_reissuing_at_another_rank_is_an_error() -> None:
    the_plan = plan(TP2, Inventory.uniform(2, 4))
    p0, p1 = the_plan.placement("actor", 0), the_plan.placement("actor", 1)
    request = worker_request(
        the_plan, "actor", p0, WorkerOptions(DemoWorker), seat_for(p0, PG, identity(2, 4))
    )
    with pytest.raises(ArgumentError, match="actor rank 0 is rank 0, got a placement of rank 1"):
        request.reissue(the_plan, p1, seat_for(p1, PG, identity(2, 4)))


@settings(max_examples=40, deadline=None)
@given(
    nodes=st.integers(1, 4),
    gpus=st.sampled_from([1, 2, 4, 8]),
    per_process=st.sampled_from([1, 2, 4]),
    data=st.data(),
)
def test_every_request_of_a_plan_sees_exactly_its_held_gpus_in_its_own_bundles(
    nodes: int, gpus: int, per_process: int, data: st.DataObject
) -> None:
    if gpus % per_process:
        per_process = 1
    total = nodes * gpus
    config = {
        "cluster": {
            "num_nodes": nodes,
            "component_placement": {"actor": f"0-{total - 1}:0-{total // per_process - 1}"},
        }
    }
    the_plan = plan(config, Inventory.uniform(nodes, gpus))
    # Ray holds any bijection of each node's GPUs: shuffle which physical GPU each id gets.
    held = {}
    for n in range(nodes):
        physical = data.draw(st.permutations(range(gpus)))
        for g in range(gpus):
            held[(n, g)] = (physical[g], n * gpus + g)
    bundles: list[int] = []
    for p in the_plan.placements("actor"):
        request = worker_request(
            the_plan, "actor", p, WorkerOptions(DemoWorker), seat_for(p, PG, held)
        )
        seat = request.seat
        assert seat.gpu_ids == tuple(held[(p.node_rank, g)][0] for g in p.hardware_ranks)
        assert request.env["CUDA_VISIBLE_DEVICES"] == ",".join(map(str, seat.gpu_ids))
        assert request.env["RANK"] == str(p.rank)
        assert seat.bundle is not None
        bundles += [seat.bundle[1], *seat.more_bundles]
    assert sorted(bundles) == list(range(total))
