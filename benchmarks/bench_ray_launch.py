"""Benchmark: ``launch`` of 16 workers against the same actors created bare with Ray.

On a simulated Ray cluster of 2 nodes x 8 logical GPUs (all on 127.0.0.1, labelled
``node-rank``), time from asking to every worker answering, two ways, side by side in one
run (interleaved, so both see the same cluster state):

* placement-ray: ``launch(config, {"actor": Worker}, cluster)`` for ``actor: 0-15`` (plan
  on the live inventory, one placement group per node with one bundle per GPU, every
  worker's request built and started in its bundle with its environment, rank 0 holding
  ``MASTER_PORT``, every ``__init__`` run and reported back);
* bare Ray: the same placement groups (one per node, 8 one-GPU bundles pinned to the node
  by its ``ray.io/node-id`` label), the same 16 actors (``num_gpus=1`` in bundle r, the
  same environment in their runtime_env), each answering one call.

The job's one-time node discovery is done before the timings. Before each timed run the
cluster is idle (every GPU free) and each node has an idle Ray worker, as right after
discovery. Target: ``launch`` within 1.5x of bare Ray (median over the runs).

    python benchmarks/bench_ray_launch.py [--runs 5] [--nodes 2] [--gpus 8]
"""

from __future__ import annotations

import os

os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")  # before `import ray`

import argparse
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

import ray
from _ray_cluster import simulated_cluster, wait_idle, warm_pool
from _targets import target_line
from ray.util.placement_group import placement_group, remove_placement_group
from ray.util.scheduling_strategies import (
    PlacementGroupSchedulingStrategy,
)

from placement_core import plan
from placement_ray import Cluster, launch
from placement_ray._placement_groups import NODE_ID_LABEL

TARGET = 1.5


class Worker:
    """A worker that only records its environment."""

    def __init__(self) -> None:
        self.rank = int(os.environ.get("RANK", "-1"))

    def ping(self) -> int:
        return self.rank


BareWorker = ray.remote(Worker)


def config(nodes: int, gpus: int) -> dict[str, Any]:
    return {
        "cluster": {
            "num_nodes": nodes,
            "component_placement": {"actor": f"0-{nodes * gpus - 1}"},
        }
    }


def with_launch(cluster: Cluster, nodes: int, gpus: int) -> Callable[[], None]:
    """Launch; returns the teardown (untimed)."""
    job = launch(config(nodes, gpus), {"actor": Worker}, cluster, timeout_s=600)
    assert job["actor"].execute("ping", timeout_s=120) == list(range(nodes * gpus))
    return job.shutdown


def bare(cluster: Cluster, nodes: int, gpus: int) -> Callable[[], None]:
    """The same groups and actors with plain Ray; returns the teardown (untimed)."""
    the_plan = plan(config(nodes, gpus), cluster.inventory)  # the same environment
    groups = [
        placement_group(
            [{"GPU": 1.0}] * gpus,
            strategy="PACK",
            bundle_label_selector=[{NODE_ID_LABEL: cluster.node(n).node_id}] * gpus,
        )
        for n in range(nodes)
    ]
    ray.get([g.ready() for g in groups], timeout=600)
    actors = []
    for p in the_plan.placements("actor"):
        env = the_plan.env("actor", p.rank)
        actors.append(
            BareWorker.options(  # type: ignore[attr-defined]
                num_gpus=1,
                num_cpus=0,
                max_restarts=0,
                runtime_env={"env_vars": env},
                scheduling_strategy=PlacementGroupSchedulingStrategy(
                    placement_group=groups[p.node_rank],
                    placement_group_bundle_index=p.hardware_ranks[0],
                ),
            ).remote()
        )
    assert ray.get([a.ping.remote() for a in actors], timeout=600) == list(range(nodes * gpus))

    def teardown() -> None:
        for actor in actors:
            ray.kill(actor)
        for group in groups:
            remove_placement_group(group)

    return teardown


def timed(method: Callable[..., Callable[[], None]], *args: Any) -> float:
    wait_idle()
    warm_pool(args[0])
    started = time.perf_counter()
    teardown = method(*args)
    elapsed = time.perf_counter() - started
    teardown()
    return elapsed


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="runs per method")
    parser.add_argument("--nodes", type=int, default=2)
    parser.add_argument("--gpus", type=int, default=8, help="logical GPUs per node")
    args = parser.parse_args(argv)

    workers = args.nodes * args.gpus
    with simulated_cluster(args.nodes, args.gpus):
        cluster = Cluster(args.nodes, timeout_s=300, export_env=False)
        runs: dict[str, list[float]] = {"placement-ray launch": [], "bare Ray": []}
        for _ in range(args.runs):
            runs["placement-ray launch"].append(timed(with_launch, cluster, args.nodes, args.gpus))
            runs["bare Ray"].append(timed(bare, cluster, args.nodes, args.gpus))
        medians = {k: statistics.median(v) for k, v in runs.items()}
        ratio = medians["placement-ray launch"] / medians["bare Ray"]
        print(
            f"{workers} workers (1 GPU each, one placement group per node), median of "
            f"{args.runs} runs, interleaved"
        )
        print(f"{'method':22s}  {'median s':>8s}  runs s")
        for method, times in runs.items():
            shown = " ".join(f"{t:.2f}" for t in times)
            print(f"{method:22s}  {medians[method]:8.3f}  {shown}")
        met = ratio <= TARGET
        print(
            f"launch / bare Ray: {ratio:.2f}x (target <= {TARGET:g}x): "
            + ("met" if met else "MISSED")
        )
        print(
            target_line(
                f"launch of {workers} workers",
                f"{medians['placement-ray launch']:.3f} s",
                f"bare Ray {medians['bare Ray']:.3f} s",
                ratio,
                f"<= {TARGET:g}x",
                met,
            )
        )
        return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
