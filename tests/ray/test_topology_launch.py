"""launch with node-snapshot topology: workers bound to their planned CPUs; busy GPUs refused.

The simulated nodes have no GPUs to snapshot, so the plan's inventory is the live one
with node 0's accelerators given this machine's CPUs as their affinity and one of them
running a foreign process, as a snapshot taken there would show.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any

import pytest

from placement_core import AcceleratorProcess, Inventory, Plan, format_rank_list, plan
from placement_ray import BusyAcceleratorError, Cluster, launch
from placement_ray.demo.workers import DemoWorker

CPUS = format_rank_list(sorted(os.sched_getaffinity(0)))
CONFIG: dict[str, Any] = {"cluster": {"num_nodes": 3, "component_placement": {"actor": "0-1"}}}


def snapshot_plan(cluster: Cluster) -> Plan:
    live = cluster.inventory
    first = live.nodes[0]
    accelerators = tuple(
        dataclasses.replace(
            a,
            numa_node=0,
            cpu_affinity=CPUS,
            memory_used_bytes=1 << 30 if a.index == 1 else 0,
            processes=(AcceleratorProcess(4242, 1 << 30),) if a.index == 1 else (),
        )
        for a in first.accelerators
    )
    node = dataclasses.replace(first, accelerators=accelerators)
    return plan(CONFIG, Inventory((node, *live.nodes[1:])))


def test_busy_gpus_are_refused_before_anything_is_reserved(placement_cluster: Cluster) -> None:
    with pytest.raises(BusyAcceleratorError) as caught:
        launch(snapshot_plan(placement_cluster), {"actor": DemoWorker}, placement_cluster)
    assert "node 0 (" in str(caught.value)
    assert "accelerator 1 already runs 1 process: pid 4242 (1.0 GiB)" in str(caught.value)
    assert caught.value.busy == ((0, 1, (4242,)),)


def test_allowed_busy_gpus_start_and_workers_are_bound_to_their_cpus(
    placement_cluster: Cluster,
) -> None:
    the_plan = snapshot_plan(placement_cluster)
    planned = [p.cpus for p in the_plan.placements("actor")]
    assert all(planned)
    with launch(
        the_plan,
        {"actor": DemoWorker},
        placement_cluster,
        allow_busy=True,
        bind_cpus=True,
        timeout_s=120,
    ) as launched:
        reports = launched["actor"].reports
        assert [r["env"]["PLACEMENT_CPU_AFFINITY"] for r in reports] == planned
        assert [r["cpus"] for r in reports] == planned


def test_without_bind_cpus_workers_keep_every_cpu(placement_cluster: Cluster) -> None:
    with launch(
        snapshot_plan(placement_cluster),
        {"actor": DemoWorker},
        placement_cluster,
        allow_busy=True,
        timeout_s=120,
    ) as launched:
        assert {r["cpus"] for r in launched["actor"].reports} == {CPUS}
