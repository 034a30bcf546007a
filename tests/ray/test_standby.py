"""Warm spares as data: which standbys a spare keeps, and that a recovery finds them.

No Ray cluster is needed: requests and placement groups are only carried. The live path
(standbys started, a node killed, standbys adopted) is in test_warm_spares.py.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from ray._raylet import PlacementGroupID
from ray.util.placement_group import PlacementGroup

from placement_core import Inventory, Plan, plan, replan
from placement_ray._placement_groups import BundleSlot, OrderedPlacementGroup
from placement_ray._request import WorkerOptions, WorkerRequest, seat_for, worker_request
from placement_ray._standby import _wanted, spare_requests, standby_key


class Trainer:
    pass


class Engine:
    pass


def group(node: int, gpus: int, cpus: float = 0.0) -> OrderedPlacementGroup:
    """A node's placement group: one bundle per GPU, bundle i holding GPU i."""
    bundle = {"GPU": 1.0, "CPU": cpus} if cpus else {"GPU": 1.0}
    pg = PlacementGroup(PlacementGroupID.from_random(), bundle_cache=[bundle] * gpus)
    slots = tuple(BundleSlot(i, node, f"node-{node}", (i,)) for i in range(gpus))
    return OrderedPlacementGroup(pg, slots)


def held(g: OrderedPlacementGroup) -> dict[tuple[int, int], tuple[int, int]]:
    return {(s.node_rank, s.gpu_id): (s.gpu_id, s.index) for s in g.slots}


class Worker:
    """What ``spare_requests`` reads of a started worker: its node and request."""

    def __init__(self, request: WorkerRequest) -> None:
        self.request = request
        self.node_rank = request.node_rank


def launched(
    the_plan: Plan, options: dict[str, WorkerOptions], gpus: int
) -> tuple[list[Any], dict[int, OrderedPlacementGroup]]:
    groups = {n: group(n, gpus) for n in range(the_plan.inventory.num_nodes)}
    workers = []
    for component, placements in the_plan.components.items():
        for p in placements:
            g = groups[p.node_rank]
            seat = seat_for(p, g.pg, held(g))
            workers.append(Worker(worker_request(the_plan, component, p, options[component], seat)))
    return workers, groups


def config(spares: str, actor: str, rollout: str | None = None) -> dict[str, Any]:
    rules: dict[str, Any] = {"actor": actor}
    if rollout is not None:
        rules["rollout"] = rollout
    return {"cluster": {"num_nodes": 4, "spare_nodes": spares, "component_placement": rules}}


@settings(max_examples=25, deadline=None)
@given(lost=st.sampled_from([0, 1, 2]), share=st.sampled_from([None, 0.5, 1.0]))
def test_the_request_a_recovery_reissues_has_the_key_of_the_standby_planned_for_it(
    lost: int, share: float | None
) -> None:
    the_plan = plan(config("3", "0-5", "6-11:0-2"), Inventory.uniform(4, 4))
    options = {
        "actor": WorkerOptions(Trainer, args=(1,), gpu_share=share),
        "rollout": WorkerOptions(Engine, gpu_share=share),
    }
    workers, groups = launched(the_plan, options, 4)
    spare = groups[3]
    planned = spare_requests(the_plan.spares().replaces, workers, {3: spare})[3][lost]
    moved = replan(the_plan, [lost])
    lost_workers = [w for w in workers if w.node_rank == lost]
    assert len(planned) == len(lost_workers)
    for w, standby in zip(lost_workers, planned, strict=True):
        placement = moved.plan.components[w.request.component][w.request.rank]
        again = w.request.reissue(moved.plan, placement, seat_for(placement, spare.pg, held(spare)))
        assert standby_key(again) == standby_key(standby)


def test_a_spare_keeps_per_key_the_most_any_node_it_replaces_needs() -> None:
    # Nodes 0-1 run 4 trainers each; node 2 runs 2 engines of 2 GPUs: the spare keeps the
    # trainers' 4 standbys (first in node order), and the engines' do not fit beside them.
    the_plan = plan(config("3", "0-7", "8-11:0-1"), Inventory.uniform(4, 4))
    options = {"actor": WorkerOptions(Trainer), "rollout": WorkerOptions(Engine)}
    workers, groups = launched(the_plan, options, 4)
    planned = spare_requests(the_plan.spares().replaces, workers, {3: groups[3]})
    assert sorted(planned[3]) == [0, 1, 2]
    kept = _wanted(planned[3], 3, groups[3])
    assert [(r.component, r.seat.gpu_ids) for r in kept] == [
        ("actor", (0,)),
        ("actor", (1,)),
        ("actor", (2,)),
        ("actor", (3,)),
    ]


def test_half_shares_let_two_workloads_keep_standbys_on_one_spare() -> None:
    the_plan = plan(config("3", "0-7", "8-11:0-1"), Inventory.uniform(4, 4))
    options = {
        "actor": WorkerOptions(Trainer, gpu_share=0.5),
        "rollout": WorkerOptions(Engine, gpu_share=0.5),
    }
    workers, groups = launched(the_plan, options, 4)
    planned = spare_requests(the_plan.spares().replaces, workers, {3: groups[3]})
    kept = _wanted(planned[3], 3, groups[3])
    assert sorted((r.component, r.seat.gpu_ids) for r in kept) == [
        ("actor", (0,)),
        ("actor", (1,)),
        ("actor", (2,)),
        ("actor", (3,)),
        ("rollout", (0, 1)),
        ("rollout", (2, 3)),
    ]


def test_standbys_need_the_cpus_their_bundle_holds() -> None:
    the_plan = plan(config("3", "0-11"), Inventory.uniform(4, 4))
    options = {"actor": WorkerOptions(Trainer, num_cpus=1)}
    workers, _ = launched(the_plan, options, 4)
    no_cpus, two_cpus = group(3, 4), group(3, 4, cpus=2.0)
    for spare, expected in ((no_cpus, 0), (two_cpus, 4)):
        planned = spare_requests(the_plan.spares().replaces, workers, {3: spare})
        assert len(_wanted(planned[3], 3, spare)) == expected


def test_the_key_ignores_what_each_worker_gets_of_its_own() -> None:
    the_plan = plan(config("3", "0-5"), Inventory.uniform(4, 4))
    workers, _ = launched(the_plan, {"actor": WorkerOptions(Trainer)}, 4)
    a, b = workers[0].request, workers[4].request  # node 0 GPU 0, node 1 GPU 0
    assert a.env["RANK"] != b.env["RANK"]
    moved_b = replace(b, seat=replace(b.seat, node_rank=0, bundle=a.seat.bundle))
    assert standby_key(moved_b) == standby_key(a)
    other_class = replace(a, options=replace(a.options, cls=Engine))
    assert standby_key(other_class) != standby_key(a)


def test_the_repr_of_standbys_is_short() -> None:
    from types import SimpleNamespace

    from placement_ray._standby import Standbys

    # Each worker carries a handle and a request: its repr alone is long.
    bulky = [SimpleNamespace(node_rank=r, handle="h" * 500, request="r" * 500) for r in (3, 4, 4)]
    standbys = Standbys(idle={"a": bulky[:2], "b": bulky[2:]})  # type: ignore[dict-item]
    assert repr(standbys) == "Standbys(3 idle on nodes 3-4)"
    assert repr(Standbys()) == "Standbys(0 idle on nodes -)"
