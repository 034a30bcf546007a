"""Live takeover of a lost node: spares reserved, lost ranks re-created, survivors untouched.

On the suite's lossy shape (4 labelled nodes x 2 GPUs, ``LOSSY``): the actor uses nodes
0-2, the rollout (colocated) nodes 1-2 with its rank 0 on node 1; node 3 is the spare.
The tests run in order on one launch: node 1 is lost (a call finds it,
``on_node_loss="recover"`` moves its ranks to node 3), then node 2 is lost (no spare
left: a typed error, nothing changed).
"""

from __future__ import annotations

import json
import pickle
from collections.abc import Iterator
from typing import Any

import pytest
from ray.util.placement_group import placement_group_table

from placement_core import Move
from placement_ray import (
    Cluster,
    Launch,
    NodeLostError,
    NoSpareNodeError,
    RecoveryReport,
    launch,
)
from placement_ray.errors import ArgumentError, PlacementRayError
from placement_ray.testing import SimulatedCluster

from .conftest import LOSSY
from .probes import Probe

pytestmark = pytest.mark.placement_cluster(**LOSSY)

CONFIG = {
    "cluster": {
        "num_nodes": 4,
        "spare_nodes": "3",
        "component_placement": {
            "actor": {"node_group": "main", "placement": "0-5"},
            "rollout": {"node_group": "main", "placement": "2-5"},
        },
        "node_groups": [
            {
                "label": "main",
                "node_ranks": "0-3",
                "env_configs": [{"node_ranks": "0-3", "env_vars": [{"GROUP_VAR": "main"}]}],
            },
        ],
    }
}


@pytest.fixture(scope="module")
def lossy(
    lossy_cluster: tuple[SimulatedCluster, Cluster],
) -> Iterator[tuple[SimulatedCluster, Cluster, Launch, dict[str, list[dict[str, Any]]]]]:
    """The lossy cluster, the module's launch, and every rank's view from inside before a
    loss (``lossy_cluster`` starts the killed nodes again afterwards)."""
    simulated, view = lossy_cluster
    started = launch(
        CONFIG,
        {"actor": Probe, "rollout": Probe},
        view,
        colocate=[["actor", "rollout"]],
        on_node_loss="recover",
        timeout_s=300,
    )
    with started:
        before = {c: started[c].execute("seen", timeout_s=300) for c in ("actor", "rollout")}
        yield simulated, view, started, before


def test_each_spare_is_reserved_whole_in_its_own_pinned_group(lossy: Any) -> None:
    _, _view, job, _ = lossy
    assert sorted(job.spare_groups) == [3]
    for rank, group in job.spare_groups.items():
        assert placement_group_table(group.pg)["state"] == "CREATED"
        assert [s.node_rank for s in group.slots] == [rank, rank]
        assert sorted(s.gpu_id for s in group.slots) == [0, 1]


def test_the_manifest_maps_every_rank_to_its_node_gpus_and_ports(lossy: Any) -> None:
    _, view, job, _ = lossy
    manifest = json.loads(json.dumps(job.manifest()))
    actor = manifest["components"]["actor"]
    assert [(e["rank"], e["node_rank"], e["gpu_ids"]) for e in actor] == [
        (r, r // 2, [r % 2]) for r in range(6)
    ]
    assert actor[0]["node_id"] == view.node(0).node_id
    assert actor[0]["ports"]["master"] == [job["actor"].master_port]
    assert manifest["spares"] == [3]
    assert manifest["lost_nodes"] == []


def test_a_lost_node_moves_its_ranks_to_the_spare_keeping_their_environment(
    lossy: Any,
) -> None:
    sim, view, job, before = lossy
    sim.kill_node(1)
    with pytest.raises(NodeLostError) as caught:
        job["actor"].execute("seen", timeout_s=300)
    report = caught.value.recovery
    assert report is not None
    assert report.lines()[:2] == [
        "actor 2-3: node 1 -> node 3",
        "rollout 0-1: node 1 -> node 3 (rank 0: the master node is now node 3)",
    ]
    assert report.rendezvous == ("actor", "rollout")
    assert job.recoveries == [report]
    after = {c: job[c].execute("seen", timeout_s=300) for c in ("actor", "rollout")}
    moved = {("actor", 2), ("actor", 3), ("rollout", 0), ("rollout", 1)}
    new_port = str(report.master["rollout"][1])
    for component, seen in after.items():
        for rank, (old, new) in enumerate(zip(before[component], seen, strict=True)):
            expected = dict(old["env"])
            if component == "rollout":
                expected["MASTER_PORT"] = new_port
            assert new["env"] == expected, (component, rank)
            if (component, rank) in moved:
                assert new["node_id"] == view.node(3).node_id
                assert new["pid"] != old["pid"]
            else:
                assert (new["node_id"], new["pid"]) == (old["node_id"], old["pid"])


def test_survivors_of_a_moved_rank_0_are_told_the_new_master(lossy: Any) -> None:
    _, _, job, _ = lossy
    report = job.recoveries[0]
    addr, port = report.master["rollout"]
    told = job["rollout"].execute("announcements", timeout_s=300)
    new = {"MASTER_ADDR": addr, "MASTER_PORT": str(port)}
    assert told == [[], [], [new], [new]]  # ranks 0-1 moved and started with it
    assert (job["rollout"].master_addr, job["rollout"].master_port) == (addr, port)


def test_calls_after_recovery_reach_every_rank_in_rank_order(lossy: Any) -> None:
    _, _view, job, _ = lossy
    ranks = [int(seen["env"]["RANK"]) for seen in job["actor"].execute("seen", timeout_s=300)]
    assert ranks == list(range(6))
    assert job.check_health(grace_s=0.5).dead_nodes == ()
    assert 1 not in job.placement_groups
    assert 3 in job.placement_groups
    assert job.spare_groups == {}


def test_the_manifest_follows_the_recovery(lossy: Any) -> None:
    _, _view, job, _ = lossy
    manifest = job.manifest()
    nodes = [e["node_rank"] for e in manifest["components"]["actor"]]
    assert nodes == [0, 0, 3, 3, 2, 2]
    assert manifest["lost_nodes"] == [1]
    assert manifest["spares"] == []
    assert "actor 2-3: node 1 -> node 3" in manifest["moves"]


def test_no_compatible_spare_is_a_typed_error_and_changes_nothing(lossy: Any) -> None:
    sim, _view, job, _ = lossy
    workers = {c: g.workers for c, g in job.worker_groups.items()}
    groups, spares, the_plan = dict(job.placement_groups), dict(job.spare_groups), job.plan
    sim.kill_node(2)
    with pytest.raises(NoSpareNodeError) as caught:
        job.recover(timeout_s=300)
    assert isinstance(caught.value, PlacementRayError)
    assert caught.value.lost == (2,)
    assert "no compatible spare for lost node 2: node 2 needs a spare with 2x nvidia" in str(
        caught.value
    )
    assert {c: g.workers for c, g in job.worker_groups.items()} == workers
    assert (job.placement_groups, job.spare_groups, job.plan) == (groups, spares, the_plan)


def test_on_node_loss_takes_raise_or_recover(lossy: Any) -> None:
    _, view, _, _ = lossy
    with pytest.raises(ArgumentError, match="on_node_loss"):
        launch(CONFIG, {"actor": Probe, "rollout": Probe}, view, on_node_loss="retry")


def test_a_report_reads_like_the_offline_moves() -> None:
    move = Move(1, 3, "n1", "n3", {"actor": (2, 3), "rollout": (0, 1)})
    report = RecoveryReport(
        lost=(1,),
        moves=(move,),
        master={"rollout": ("10.0.0.3", 29500)},
        rendezvous=("actor", "rollout"),
        seconds=0.5,
    )
    assert report.describe().splitlines() == [
        "recovered in 0.50s:",
        "actor 2-3: node 1 -> node 3",
        "rollout 0-1: node 1 -> node 3 (rank 0: the master node is now node 3)",
        "rollout: MASTER_ADDR=10.0.0.3 MASTER_PORT=29500 re-announced",
        "must form their process groups again: actor, rollout",
    ]
    assert RecoveryReport().describe() == "no node lost; nothing to recover"
    assert pickle.loads(pickle.dumps(report)) == report
