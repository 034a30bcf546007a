"""Live: a shared job without a spare recovers onto free capacity of the cluster (opt in).

On the suite's lossy shape (4 labelled nodes x 2 GPUs, ``LOSSY``). Another job
("holder") leases node 2; a shared job of 2 nodes (no spare) plans on nodes 0 and 1.
Node 1 is lost: with ``recover_onto_free=True`` its ranks move onto node 3 (free), never
onto node 2 (leased). Then, without the opt-in, a loss with a free node left raises
``NoSpareNodeError`` naming the opt-in. The tests run in order.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
import ray

from placement_ray import Cluster, NoSpareNodeError, launch
from placement_ray._free_view import capacities
from placement_ray._lease_state import Request, Slot
from placement_ray._leases import lease_table
from placement_ray._ledger import ledger_actor, ledger_call
from placement_ray.testing import SimulatedCluster

from .conftest import LOSSY
from .probes import Probe

pytestmark = pytest.mark.placement_cluster(**LOSSY)

CONFIG = {"cluster": {"num_nodes": 2, "component_placement": {"actor": "0-3"}}}


def held(job: str) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for r in lease_table()["leases"]:
        if r.job == job:
            out.setdefault(r.node_id, []).append(r.accelerator)
    return {node: sorted(gpus) for node, gpus in out.items()}


@pytest.fixture(scope="module")
def shared(lossy_cluster: tuple[SimulatedCluster, Cluster]) -> Iterator[tuple[Any, Cluster]]:
    """The lossy cluster with job "holder" leasing node 2 whole."""
    simulated, view = lossy_cluster
    ledger = ledger_actor()
    ledger_call(ledger, "register", capacities(view))
    node2 = view.node(2).node_id
    owner = ray.get_runtime_context().get_job_id()
    request = Request("holder", owner, 0, (Slot(node2, 0), Slot(node2, 1)), (2,))
    assert ledger_call(ledger, "acquire", request, {}, time.time())[0]
    try:
        yield simulated, view
    finally:
        ledger_call(ledger, "release", "holder")


def test_a_lost_node_without_spare_moves_onto_a_free_node_never_a_leased_one(
    shared: Any,
) -> None:
    simulated, view = shared
    node1, node3 = view.node(1).node_id, view.node(3).node_id
    with launch(
        CONFIG,
        {"actor": Probe},
        view,
        share_cluster=True,
        recover_onto_free=True,
        timeout_s=300,
    ) as job:
        assert [n.node_id for n in job.cluster.nodes] == [view.node(0).node_id, node1]
        simulated.kill_node(1)
        report = job.recover(timeout_s=300)
        assert report.onto_free == {2: node3}
        assert [(m.lost, m.spare) for m in report.moves] == [(1, 2)]
        assert any("free capacity of the shared cluster" in line for line in report.lines())
        seen = job["actor"].execute("seen", timeout_s=300)
        assert [s["node_id"] for s in seen[2:]] == [node3, node3]
        mine = held(view.job)
        assert node1 not in mine
        assert mine[node3] == [0, 1]
        assert held("holder") == {view.node(2).node_id: [0, 1]}
    assert held(view.job) == {}


def test_without_the_opt_in_the_error_says_free_capacity_could_take_the_node(
    shared: Any,
) -> None:
    simulated, view = shared
    ledger_call(ledger_actor(), "release", "holder")  # node 2 free: it could take the loss
    with launch(CONFIG, {"actor": Probe}, view, share_cluster=True, timeout_s=300) as job:
        assert [n.rank for n in job.cluster.nodes] == [0, 1]
        lost = job.cluster.node(1).node_id
        simulated.kill_node(view.rank_of(lost))
        with pytest.raises(NoSpareNodeError, match="recover_onto_free=True") as caught:
            job.recover(timeout_s=300)
        assert caught.value.lost == (1,)
        assert held(view.job)  # nothing changed: the lease is as it was
