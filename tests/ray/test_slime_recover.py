"""slime's layout with spare nodes: a lost node's train ranks and rollout engines on a spare.

On a shape of its own (4 labelled nodes x 4 GPUs, started again after; node 0 is Ray's head,
which cannot be removed, so it is a spare): the layout uses nodes 1-2 (trainer: node 1
and GPUs 0-1 of node 2; rollout: GPUs 2-3 of node 2), nodes 0 and 3 are spares. The
tests run in order on one layout:

1. node 2 is lost with train ranks 4-5 and one engine of 2 GPUs: they move to spare 0;
2. engines of 1 GPU are made on the recovered layout; node 1 is lost with train ranks
   0-3 (rank 0: the master moves): they move to spare 3, the engines stay;
3. node 3 is lost with no spare left: a typed error, nothing changed.
"""

from __future__ import annotations

from argparse import Namespace
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from ray.util.placement_group import placement_group_table

from placement_core import Move
from placement_ray import (
    ArgumentError,
    Cluster,
    NoSpareNodeError,
    OversubscribedGPUError,
    PlacementRayError,
    RecoveryReport,
    RolloutEngine,
    RolloutEngines,
    SlimeLayout,
    TrainGroup,
    Worker,
    WorkerGroup,
    create_placement_groups,
    create_rollout_engines,
    create_train_group,
)
from placement_ray._slime.recover import _again
from placement_ray.compat.slime import create_placement_groups as slime_create

from .conftest import RACKS, restore_nodes
from .probes import Probe

pytestmark = pytest.mark.placement_cluster(**RACKS)  # 4 x 4; the module kills nodes 2, 1, 3


@dataclass
class Job:
    sim: Any
    view: Cluster
    layout: SlimeLayout
    train: TrainGroup
    engines: RolloutEngines
    before: dict[str, list[dict[str, Any]]]


def _seen(job: Job) -> dict[str, list[dict[str, Any]]]:
    return {
        "actor": job.train.execute("seen", timeout_s=300),
        "rollout": job.engines.group.execute("seen", timeout_s=300),
    }


@pytest.fixture(scope="module")
def job(placement_cluster_factory: Any) -> Iterator[Job]:
    """The module's cluster, layout, train group and engines of 2 GPUs, seen from inside;
    the killed nodes are started again afterwards."""
    simulated = placement_cluster_factory.simulated(**RACKS)
    view = simulated.view()
    layout = create_placement_groups(
        1,
        6,
        2,
        rollout_num_gpus_per_engine=2,
        cluster=view,
        cpus_per_bundle=0,
        spare_nodes="0,3",
        timeout_s=240,
    )
    train = create_train_group(layout, Probe, timeout_s=300)
    engines = create_rollout_engines(layout, Probe, num_gpus_per_engine=2, timeout_s=300)
    state = Job(simulated, view, layout, train, engines, {})
    state.before = _seen(state)
    try:
        yield state
    finally:
        state.train.kill()
        state.engines.kill()
        layout.remove()
        restore_nodes(simulated, (1, 2, 3))


def _kill(job: Job, rank: int) -> None:
    job.sim.kill_node(rank)


# ------------------------------------------------------------------ before any loss
@pytest.mark.parametrize(
    ("spare_nodes", "match"),
    [
        ("9", r"spare_nodes: rank 9 in .9. is out of range: valid ranks are 0-3"),
        ("x", r"spare_nodes: expected INT, INT-INT or 'all'"),
        ([1.5], r"spare_nodes\[0\]: expected an int or a range string"),
        (True, r"spare_nodes: expected a rank list"),
    ],
)
def test_spare_nodes_must_be_node_ranks(job: Job, spare_nodes: Any, match: str) -> None:
    with pytest.raises(ArgumentError, match=match):
        create_placement_groups(1, 4, 0, cluster=job.view, spare_nodes=spare_nodes)


def test_a_layout_with_spares_pins_each_node_in_a_group_of_its_own(job: Job) -> None:
    with pytest.raises(
        ArgumentError, match=r"strategy: a layout with spare_nodes .* 'STRICT_PACK'"
    ):
        create_placement_groups(1, 4, 0, cluster=job.view, spare_nodes="3", strategy="STRICT_PACK")


def test_slimes_drop_in_keeps_no_spares() -> None:
    args = Namespace(spare_nodes="3")
    with pytest.raises(ArgumentError, match=r"args\.spare_nodes: '3'.*create_placement_groups"):
        slime_create(args)


def test_the_layout_leaves_the_spares_out_and_reserves_each_whole(job: Job) -> None:
    layout = job.layout
    assert layout.actor.node_ranks == (1, 1, 1, 1, 2, 2)
    assert layout.actor.gpu_ids == (0, 1, 2, 3, 0, 1)
    assert (layout.rollout.node_ranks, layout.rollout.gpu_ids) == ((2, 2), (2, 3))
    assert sorted(layout.node_groups) == [1, 2]
    assert layout.spare_nodes == (0, 3)
    for rank, group in layout.spare_groups.items():
        assert placement_group_table(group.pg)["state"] == "CREATED"
        assert [(s.node_rank, s.gpu_id) for s in group.slots] == [(rank, g) for g in range(4)]
    node_2 = layout.node_groups[2].pg
    assert layout.rollout.groups == (node_2, node_2)
    assert layout.actor.groups[4:] == (node_2, node_2)
    assert layout.group is layout.node_groups[1]
    assert len(layout.placement_groups) == 4


def test_no_node_lost_recovers_nothing(job: Job) -> None:
    assert job.layout.recover(job.train, job.engines) == RecoveryReport()


def test_recover_takes_the_layouts_groups_only(job: Job) -> None:
    with pytest.raises(ArgumentError, match="groups: expected the TrainGroup and RolloutEngines"):
        job.layout.recover(job.train, "rollout")  # type: ignore[arg-type]
    with pytest.raises(ArgumentError, match="groups: two groups of 'actor'"):
        job.layout.recover(job.train, job.train)


# ------------------------------------------------------------------ node 2 lost
def test_a_lost_node_moves_its_train_ranks_and_engine_to_a_spare(job: Job) -> None:
    _kill(job, 2)
    report = job.layout.recover(job.train, job.engines, timeout_s=300)
    assert report.lost == (2,)
    assert report.lines() == [
        "actor 4-5: node 2 -> node 0",
        "rollout 0: node 2 -> node 0",
        "must form their process groups again: actor, rollout",
    ]
    assert report.master == {}
    assert job.layout.recoveries == [report]


def test_moved_ranks_keep_their_environment_and_survivors_their_processes(job: Job) -> None:
    after = _seen(job)
    spare = job.view.node(0).node_id
    for rank, (old, new) in enumerate(zip(job.before["actor"], after["actor"], strict=True)):
        assert new["env"] == old["env"], rank
        if rank >= 4:
            assert (new["node_id"], new["pid"] != old["pid"]) == (spare, True)
        else:
            assert (new["node_id"], new["pid"]) == (old["node_id"], old["pid"])
    [old], [new] = job.before["rollout"], after["rollout"]
    assert new["node_id"] == spare
    assert new["pid"] != old["pid"]
    assert new["env"]["CUDA_VISIBLE_DEVICES"] == old["env"]["CUDA_VISIBLE_DEVICES"] == "2,3"


def test_a_moved_engine_keeps_its_size_and_gets_a_dist_init_addr_on_the_spare(job: Job) -> None:
    [engine] = job.engines
    assert (engine.index, engine.node_ranks, engine.gpus) == (0, (0,), ((2, 3),))
    port = engine.ports[0]["dist_init"][0]
    assert engine.dist_init_addr == f"127.0.0.1:{port}"
    [seen] = job.engines.group.execute("seen", timeout_s=300)
    assert seen["env"]["PLACEMENT_DIST_INIT_ADDR"] == engine.dist_init_addr
    assert engine.workers[0].node_id == job.view.node(0).node_id  # held by the new head


def test_the_layout_follows_the_moves(job: Job) -> None:
    layout = job.layout
    assert layout.actor.node_ranks == (1, 1, 1, 1, 0, 0)
    assert layout.actor.gpu_ids == (0, 1, 2, 3, 0, 1)
    assert (layout.rollout.node_ranks, layout.rollout.gpu_ids) == ((0, 0), (2, 3))
    assert layout.rollout.node_ids == (job.view.node(0).node_id,) * 2
    assert sorted(layout.node_groups) == [0, 1]
    assert layout.spare_nodes == (3,)
    taken = layout.node_groups[0]
    assert layout.rollout.groups == (taken.pg, taken.pg)
    indices = {s.gpu_id: s.index for s in taken.slots}
    assert layout.rollout.bundle_indices == (indices[2], indices[3])
    assert [w.bundle_index for w in job.train.workers[4:]] == [indices[0], indices[1]]


def test_the_spares_shares_are_booked(job: Job) -> None:
    # The trainer holds 1 and the engine 0.2 of the taken spare's GPUs: more is refused.
    with pytest.raises(OversubscribedGPUError, match="node 0 GPU 2"):
        create_rollout_engines(job.layout, Probe, num_gpus_per_engine=1, gpu_share=0.9)
    with pytest.raises(OversubscribedGPUError, match="node 0 GPU 0"):
        create_train_group(job.layout, Probe)


# ------------------------------------------------------------------ node 1 lost
def test_engines_of_one_gpu_on_the_recovered_layout(job: Job) -> None:
    job.engines.kill()
    job.engines = create_rollout_engines(job.layout, Probe, num_gpus_per_engine=1, timeout_s=300)
    assert [(e.node_ranks, e.gpus) for e in job.engines] == [((0,), ((2,),)), ((0,), ((3,),))]
    job.before = _seen(job)


def test_a_moved_rank_0_is_announced_to_the_survivors(job: Job) -> None:
    _kill(job, 1)
    report = job.layout.recover(job.train, job.engines, timeout_s=300)
    assert (
        report.lines()[0] == "actor 0-3: node 1 -> node 3 (rank 0: the master node is now node 3)"
    )
    addr, port = report.master["actor"]
    after = _seen(job)
    for rank, (old, new) in enumerate(zip(job.before["actor"], after["actor"], strict=True)):
        expected = {**old["env"], "MASTER_PORT": str(port)}
        assert new["env"] == expected, rank  # MASTER_ADDR: the same loopback address
        assert (new["pid"] == old["pid"]) == (rank >= 4), rank
    told = job.train.execute("announcements", timeout_s=300)
    new_master = {"MASTER_ADDR": addr, "MASTER_PORT": str(port)}
    assert told == [[]] * 4 + [[new_master]] * 2
    assert (job.train.master_addr, job.train.master_port) == (addr, port)
    assert [s["pid"] for s in after["rollout"]] == [s["pid"] for s in job.before["rollout"]]
    assert job.layout.actor.node_ranks == (3, 3, 3, 3, 0, 0)
    assert job.layout.group is job.layout.node_groups[3]


# ------------------------------------------------------------------ no spare left
def test_no_spare_left_is_a_typed_error_and_changes_nothing(job: Job) -> None:
    layout = job.layout
    before = (layout.actor, layout.rollout, dict(layout.node_groups), job.train.workers)
    _kill(job, 3)
    with pytest.raises(NoSpareNodeError) as caught:
        layout.recover(job.train, job.engines, timeout_s=300)
    assert isinstance(caught.value, PlacementRayError)
    assert caught.value.lost == (3,)
    assert "no compatible spare for lost node 3" in str(caught.value)
    assert "nothing was changed" in str(caught.value)
    assert (layout.actor, layout.rollout, dict(layout.node_groups), job.train.workers) == before


# ------------------------------------------------------------------ without Ray
def _engines(*nodes: tuple[int, ...]) -> RolloutEngines:
    """Engines by their actors' nodes (one actor per node), ranks in engine order."""
    workers: list[Worker] = []
    engines: list[RolloutEngine] = []
    for index, engine_nodes in enumerate(nodes):
        mine = [
            Worker("rollout", len(workers) + j, f"w{len(workers) + j}", n, f"n{n}", (0, 1), None)
            for j, n in enumerate(engine_nodes)
        ]
        workers += mine
        engines.append(RolloutEngine(index, tuple(mine), ((0, 1),) * len(mine), "", ()))
    group = WorkerGroup("rollout", workers, cluster=None)  # type: ignore[arg-type]
    return RolloutEngines(engines, group)


def test_an_engine_lives_or_dies_whole() -> None:
    engines = _engines((1,), (2, 3), (4, 5))
    move = Move(3, 6, "n3", "n6", {"rollout": (2,)})
    again, stay = _again({"rollout": engines.group}, {"rollout": engines}, [move])
    assert again == {"rollout": [1, 2]}
    assert stay == {"rollout": (1,)}


def test_a_report_names_the_engine_actors_restarted_in_place() -> None:
    report = RecoveryReport(
        lost=(3,),
        moves=(Move(3, 6, "n3", "n6", {"rollout": (0, 2)}),),
        restarted={"rollout": (1,)},
        rendezvous=("rollout",),
    )
    assert report.lines() == [
        "rollout 0,2: node 3 -> node 6",
        "rollout 1: re-created on their own node with their engine (an engine lives or dies whole)",
        "must form their process groups again: rollout",
    ]
    assert report.moved
