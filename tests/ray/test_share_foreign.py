"""Live: Ray work that is not ours counts as taken, and other jobs' leases show in the views.

On the session's 3 x 4 cluster. A placement group and an actor made with plain Ray each
hold a GPU of node 1; a shared job needing 4 GPUs on one node and 1 on another plans
around them (node 1's two left free), its workers never see a foreign GPU. Another job's
lease on node 1 then shows, greyed out and named, in the job's plan views.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from typing import Any

import pytest
import ray
from ray.util.placement_group import placement_group, remove_placement_group
from ray.util.scheduling_strategies import (
    NodeAffinitySchedulingStrategy,
    PlacementGroupSchedulingStrategy,
)

from placement_ray import Cluster, launch
from placement_ray._lease_state import Request, Slot
from placement_ray._leases import lease_table
from placement_ray._ledger import ledger_actor, ledger_call

CONFIG = {"cluster": {"num_nodes": 2, "component_placement": {"actor": "0-4"}}}


class Where:
    def where(self) -> list[str]:
        return [ray.get_runtime_context().get_node_id(), os.environ["CUDA_VISIBLE_DEVICES"]]


@ray.remote(num_cpus=0)
class Foreign:
    def gpus(self) -> list[str]:
        return [ray.get_runtime_context().get_node_id(), *map(str, ray.get_gpu_ids())]


@ray.remote(num_cpus=0, num_gpus=1)
def gpus_in_bundle() -> list[str]:
    return [ray.get_runtime_context().get_node_id(), *map(str, ray.get_gpu_ids())]


@pytest.fixture
def foreign(placement_cluster: Cluster) -> Iterator[set[tuple[str, str]]]:
    """A plain placement group and a plain actor, one GPU each on node 1."""
    node1 = placement_cluster.node(1).node_id
    pg = placement_group(
        [{"GPU": 1, "CPU": 0.01}], bundle_label_selector=[{"ray.io/node-id": node1}]
    )
    ray.get(pg.ready(), timeout=120)
    actor = Foreign.options(  # type: ignore[attr-defined]
        num_gpus=1, scheduling_strategy=NodeAffinitySchedulingStrategy(node1, soft=False)
    ).remote()
    in_bundle = gpus_in_bundle.options(  # type: ignore[attr-defined]
        scheduling_strategy=PlacementGroupSchedulingStrategy(pg, 0)
    ).remote()
    held = [ray.get(actor.gpus.remote(), timeout=120), ray.get(in_bundle, timeout=120)]
    assert {h[0] for h in held} == {node1}
    try:
        yield {(node, gpu) for node, *gpus in held for gpu in gpus}
    finally:
        ray.kill(actor)
        remove_placement_group(pg)


def test_a_shared_job_plans_around_foreign_placement_groups_and_actors(
    placement_cluster: Cluster, foreign: set[tuple[str, str]]
) -> None:
    node0, node1 = placement_cluster.node(0).node_id, placement_cluster.node(1).node_id
    with launch(
        CONFIG,
        {"actor": Where},
        placement_cluster,
        share_cluster=True,
        queue_timeout_s=60,
        timeout_s=300,
    ) as job:
        assert [n.node_id for n in job.cluster.nodes] == [node0, node1]
        assert len(job.plan.inventory.node(1).accelerators) == 2  # the foreign two are taken
        seen = job["actor"].execute("where", timeout_s=120)
        seats = {(node, gpu) for node, visible in seen for gpu in visible.split(",")}
        assert len(seats) == 5
        assert not seats & foreign
        _other_jobs_leases_are_greyed_out_in_the_plan_views(job)


def _other_jobs_leases_are_greyed_out_in_the_plan_views(job: Any) -> None:
    node1 = job.cluster.node(1).node_id
    mine = {r.accelerator for r in lease_table()["leases"] if r.node_id == node1}
    spare = next(i for i in range(4) if i not in mine)
    owner = ray.get_runtime_context().get_job_id()
    ledger = ledger_actor()
    request = Request("holder", owner, 0, (Slot(node1, spare),), (1,))
    assert ledger_call(ledger, "acquire", request, {}, time.time())[0]
    try:
        row = next(line for line in job.plan_view("map").splitlines() if line.startswith("1 "))
        assert "#holder" in row
        assert "held by another job (holder)" in job.plan_view("svg")
        assert "held by another job (holder)</li>" in job.plan_view("html")
    finally:
        ledger_call(ledger, "release", "holder")
    assert "#holder" not in job.plan_view("map")
