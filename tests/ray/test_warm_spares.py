"""Warm spares: standbys started ahead on the spare, adopted by a recovery.

On the suite's lossy shape (4 labelled nodes x 2 GPUs): the actor uses nodes 0-2, node 3
is the spare. The tests run in order on one launch with ``warm_spares=True``: the standbys
wait on the spare without running ``__init__``; node 1 is lost; ``recover()`` makes two
standbys the lost ranks (their processes, the ranks' environment, ``__init__`` run once
with the launch's arguments) and the survivors keep theirs.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest
import ray

from placement_ray import Cluster, Launch, launch
from placement_ray.errors import ArgumentError
from placement_ray.testing import SimulatedCluster

from .conftest import LOSSY

pytestmark = pytest.mark.placement_cluster(**LOSSY)

CONFIG = {"cluster": {"num_nodes": 4, "spare_nodes": "3", "component_placement": {"actor": "0-5"}}}
WATCHED = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "CUDA_VISIBLE_DEVICES", "MASTER_ADDR")


class Counted:
    """Counts how often its ``__init__`` ran in this process; reports what it sees."""

    inits = 0

    def __init__(self, tag: str) -> None:
        type(self).inits += 1
        self.tag = tag

    def seen(self) -> dict[str, Any]:
        return {
            "pid": os.getpid(),
            "node_id": ray.get_runtime_context().get_node_id(),
            "tag": self.tag,
            "inits": type(self).inits,
            "env": {k: os.environ.get(k) for k in WATCHED},
        }


@pytest.fixture(scope="module")
def warm(
    lossy_cluster: tuple[SimulatedCluster, Cluster],
) -> Iterator[tuple[SimulatedCluster, Cluster, Launch, list[dict[str, Any]]]]:
    simulated, view = lossy_cluster
    started = launch(
        CONFIG, {"actor": Counted}, view, args={"actor": ["x"]}, warm_spares=True, timeout_s=300
    )
    with started:
        before = started["actor"].execute("seen", timeout_s=300)
        yield simulated, view, started, before


def _pid(worker: Any) -> int:
    return int(ray.get(worker.handle._placement_report.remote(), timeout=120)["pid"])


def test_the_spare_holds_a_started_standby_per_worker_of_a_node_it_can_replace(
    warm: Any,
) -> None:
    _, view, job, _ = warm
    standbys = job.standbys.workers()
    assert sorted((w.node_rank, w.gpu_ids) for w in standbys) == [(3, (0,)), (3, (1,))]
    assert all(w.node_id == view.node(3).node_id for w in standbys)
    assert all(w.gpu_share == 1.0 and w.bundle_index is not None for w in standbys)


def test_a_recovery_adopts_the_standbys_instead_of_starting_processes(warm: Any) -> None:
    simulated, view, job, before = warm
    standby_pids = sorted(_pid(w) for w in job.standbys.workers())
    simulated.kill_node(1)
    report = job.recover(timeout_s=300)
    assert report.lines()[0] == "actor 2-3: node 1 -> node 3"
    after = job["actor"].execute("seen", timeout_s=300)
    assert sorted(seen["pid"] for seen in after[2:4]) == standby_pids
    for rank, (old, new) in enumerate(zip(before, after, strict=True)):
        assert (new["tag"], new["inits"]) == ("x", 1)
        expected = dict(old["env"])
        if rank in (2, 3):
            assert new["node_id"] == view.node(3).node_id
        else:
            assert (new["node_id"], new["pid"]) == (old["node_id"], old["pid"])
        assert new["env"] == expected, rank
    assert len(job.standbys) == 0


def test_warm_spares_takes_a_bool(warm: Any) -> None:
    _, view, _, _ = warm
    with pytest.raises(ArgumentError, match="warm_spares: expected True or False, got 'yes'"):
        launch(CONFIG, {"actor": Counted}, view, warm_spares="yes")  # type: ignore[arg-type]
