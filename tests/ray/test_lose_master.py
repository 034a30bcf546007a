"""Live loss of node 0, where every component's rank 0 (its master) runs.

On the suite's lossy shape (4 labelled nodes x 2 GPUs and a separate Ray head with no
CPUs, ``LOSSY``): the actor uses nodes 0-2 with its rank 0 on node 0, node 3 is the
spare. The tests run in order on one launch: node 0 is lost (a call finds it,
``on_node_loss="recover"`` moves ranks 0-1 to node 3 and announces the new master), then
the job's view and cluster id are checked to have outlived node 0.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from placement_ray import ArgumentError, Cluster, Launch, NodeLostError, PlacementRayWarning, launch
from placement_ray._rayapi import head_node_id
from placement_ray.testing import SimulatedCluster

from .conftest import LOSSY
from .probes import Probe

pytestmark = pytest.mark.placement_cluster(**LOSSY)

CONFIG = {
    "cluster": {
        "num_nodes": 4,
        "spare_nodes": "3",
        "component_placement": {"actor": "0-5"},
    }
}


@pytest.fixture(scope="module")
def job(
    lossy_cluster: tuple[SimulatedCluster, Cluster],
) -> Iterator[tuple[SimulatedCluster, Cluster, Launch, list[dict[str, Any]]]]:
    """The lossy cluster, the module's launch, and what each rank saw before the loss
    (``lossy_cluster`` starts node 0 again afterwards)."""
    simulated, view = lossy_cluster
    started = launch(CONFIG, {"actor": Probe}, view, on_node_loss="recover", timeout_s=300)
    with started:
        yield simulated, view, started, started["actor"].execute("seen", timeout_s=300)


def test_the_separate_head_is_no_node_of_the_job(job: Any) -> None:
    simulated, view, _, before = job
    assert view.num_nodes == 4
    assert view.left_out == (view.cluster_id,)
    assert view.cluster_id not in {n.node_id for n in view.nodes}
    assert [seen["node_id"] for seen in before[:2]] == [simulated.node_id(0)] * 2


def test_the_separate_head_has_no_rank_and_cannot_be_killed(job: Any) -> None:
    simulated, _, _, _ = job
    with pytest.raises(ArgumentError, match=r"live node \[0, 1, 2, 3\] \(the separate head has no"):
        simulated.kill_node(4)
    with pytest.raises(ArgumentError, match=r"rank: expected a killed node of 0\.\.3, got 0"):
        simulated.restore_node(0)


def test_losing_node_0_moves_the_master_to_the_spare(job: Any) -> None:
    simulated, view, started, before = job
    simulated.kill_node(0)
    with (
        pytest.raises(NodeLostError) as caught,
        pytest.warns(PlacementRayWarning, match="actor 0-1: node 0 -> node 3"),
    ):
        started["actor"].execute("seen", timeout_s=300)
    report = caught.value.recovery
    assert report is not None
    assert report.lost == (0,)
    assert (
        report.lines()[0] == "actor 0-1: node 0 -> node 3 (rank 0: the master node is now node 3)"
    )
    addr, port = report.master["actor"]
    assert (started["actor"].master_addr, started["actor"].master_port) == (addr, port)
    after = started["actor"].execute("seen", timeout_s=300)
    for rank, (old, new) in enumerate(zip(before, after, strict=True)):
        assert new["env"] == {**old["env"], "MASTER_ADDR": addr, "MASTER_PORT": str(port)}
        if rank < 2:
            assert new["node_id"] == view.node(3).node_id
            assert new["pid"] != old["pid"]
        else:
            assert (new["node_id"], new["pid"]) == (old["node_id"], old["pid"])


def test_survivors_are_told_the_new_master(job: Any) -> None:
    _, _, started, _ = job
    addr, port = started.recoveries[0].master["actor"]
    new = {"MASTER_ADDR": addr, "MASTER_PORT": str(port)}
    assert started["actor"].execute("announcements", timeout_s=300) == [[], [], *[[new]] * 4]


def test_the_jobs_view_and_cluster_id_outlive_node_0(job: Any) -> None:
    _, view, started, _ = job
    assert head_node_id() == view.cluster_id
    again = Cluster(None, job=view.job, timeout_s=60, export_env=False)
    assert (again.cluster_id, again.num_nodes) == (view.cluster_id, 4)
    assert started.manifest()["lost_nodes"] == [0]
    assert started.check_health(grace_s=0.5).dead_nodes == ()
