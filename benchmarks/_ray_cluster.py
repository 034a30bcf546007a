"""The simulated cluster the Ray benchmarks share: start, warm, wait idle, shut down.

``bench_ray_launch.py`` and ``bench_ray_probe.py`` run on the same kind of cluster: N
labelled nodes of G logical GPUs on 127.0.0.1, a driver connected, every node given one
idle Ray worker before a timed run (as right after the job's node discovery) and every GPU
free again between runs.
"""

from __future__ import annotations

import os

os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")  # before `import ray`

import time
from collections.abc import Iterator
from contextlib import contextmanager

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from placement_ray import Cluster
from placement_ray.testing import SimulatedCluster

__all__ = ["simulated_cluster", "wait_idle", "warm_pool"]


@contextmanager
def simulated_cluster(
    nodes: int, gpus: int, timeout_s: float = 300.0
) -> Iterator[SimulatedCluster]:
    """``nodes`` labelled nodes (``node-rank``) of ``gpus`` GPUs and CPUs, the driver
    connected; prints how long it took to come up; shut down on leaving.

    The testing kit's cluster, so its start waits longer (and tries again) on a loaded
    machine, as the test suite's do.
    """
    started = time.perf_counter()
    with SimulatedCluster(
        nodes=nodes, gpus_per_node=gpus, cpus_per_node=gpus, job="bench", timeout_s=timeout_s
    ) as sim:
        sim.connect()
        print(
            f"simulated cluster: {nodes} nodes x {gpus} GPUs, all on 127.0.0.1, "
            f"up in {time.perf_counter() - started:.1f}s"
        )
        yield sim


@ray.remote(num_cpus=0)
def _noop() -> None:
    return None


def warm_pool(cluster: Cluster, timeout_s: float = 600.0) -> None:
    """One idle worker per node, as right after the job's node discovery (untimed)."""
    ray.get(
        [
            _noop.options(
                scheduling_strategy=NodeAffinitySchedulingStrategy(node_id=n.node_id, soft=False)
            ).remote()
            for n in cluster.nodes
        ],
        timeout=timeout_s,
    )


def wait_idle(timeout_s: float = 300.0) -> None:
    """Wait until every node's GPUs are all free again (untimed).

    Raises:
        TimeoutError: GPUs are still held after ``timeout_s``.
    """
    from ray._private import state

    deadline = time.monotonic() + timeout_s
    while True:
        total = state.total_resources_per_node()
        free = state.available_resources_per_node()
        if all(free.get(n, {}).get("GPU", 0.0) == r.get("GPU", 0.0) for n, r in total.items()):
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"the cluster did not become idle within {timeout_s:g}s")
        time.sleep(0.1)
