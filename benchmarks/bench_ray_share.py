"""Benchmark: a job on a shared cluster (``launch(..., share_cluster=True)``) against a job
that owns it, and the lease ledger's acquisition of 64 GPUs.

On a simulated cluster of the testing kit (2 nodes x 8 logical GPUs, all on 127.0.0.1,
labelled ``node-rank``; every GPU free and each node with an idle worker before a timed
run, as ``_ray_cluster.py`` does for the other Ray benchmarks), side by side in one run
(interleaved, so both see the same cluster state):

* ``launch`` of 16 workers (``actor: 0-15``) as usual;
* the same ``launch`` with ``share_cluster=True``: the ledger's book read, the free view
  planned, the lease acquired, and confirmed after Ray reserved the groups; released at
  shutdown. Target: at most 1.10x the plain launch (median over the runs).

Then one lease of 64 GPUs (8 nodes x 8 GPUs registered in the ledger) acquired and
released through the ledger actor, and the same in the state machine alone (no Ray).

    python benchmarks/bench_ray_share.py [--runs 5] [--leases 50]
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
from _ray_cluster import wait_idle, warm_pool
from _targets import target_line

from placement_ray import Cluster, launch
from placement_ray._lease_state import LeaseBook, NodeCapacity, Request, Slot
from placement_ray._ledger import ledger_actor
from placement_ray.testing import SimulatedCluster

TARGET = 1.10
NODES, GPUS = 2, 8


class Worker:
    """A worker that only knows its rank."""

    def __init__(self) -> None:
        self.rank = int(os.environ.get("RANK", "-1"))

    def ping(self) -> int:
        return self.rank


CONFIG = {
    "cluster": {"num_nodes": NODES, "component_placement": {"actor": f"0-{NODES * GPUS - 1}"}}
}


def one_launch(cluster: Cluster, shared: bool) -> float:
    wait_idle()
    warm_pool(cluster)
    started = time.perf_counter()
    job = launch(CONFIG, {"actor": Worker}, cluster, timeout_s=600, share_cluster=shared)
    assert job["actor"].execute("ping", timeout_s=120) == list(range(NODES * GPUS))
    elapsed = time.perf_counter() - started
    job.shutdown()
    return elapsed


def big_lease() -> tuple[list[NodeCapacity], Request]:
    nodes = [
        NodeCapacity(f"bench-node-{r}", 100 + r, tuple((i, f"GPU-bench-{r}-{i}") for i in range(8)))
        for r in range(8)
    ]
    slots = tuple(Slot(n.node_id, i) for n in nodes for i in range(8))
    return nodes, Request("bench-64", "bench-owner", 0, slots, (8,) * 8)


def timed_leases(count: int, acquire: Callable[[], Any], release: Callable[[], Any]) -> list[float]:
    times = []
    for _ in range(count):
        started = time.perf_counter()
        acquire()
        times.append(time.perf_counter() - started)
        release()
    return times


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="launches per method")
    parser.add_argument("--leases", type=int, default=50, help="64-GPU acquisitions timed")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    # The testing kit's start (it retries Ray's node start on a loaded machine).
    with SimulatedCluster(nodes=NODES, gpus_per_node=GPUS, cpus_per_node=GPUS, job="bench") as sim:
        cluster = sim.view()
        print(
            f"simulated cluster: {NODES} nodes x {GPUS} GPUs, all on 127.0.0.1, "
            f"up in {time.perf_counter() - started:.1f}s"
        )
        one_launch(cluster, True)  # untimed: starts the ledger, warms a worker per node
        runs: dict[str, list[float]] = {"launch": [], "launch share_cluster": []}
        for _ in range(args.runs):
            runs["launch"].append(one_launch(cluster, False))
            runs["launch share_cluster"].append(one_launch(cluster, True))
        medians = {k: statistics.median(v) for k, v in runs.items()}
        ratio = medians["launch share_cluster"] / medians["launch"]
        print(f"{NODES * GPUS} workers (1 GPU each), median of {args.runs} runs, interleaved")
        print(f"{'method':22s}  {'median s':>8s}  runs s")
        for method, times in runs.items():
            print(f"{method:22s}  {medians[method]:8.3f}  " + " ".join(f"{t:.2f}" for t in times))
        nodes, request = big_lease()
        ledger = ledger_actor()
        ray.get(ledger.register.remote(nodes))
        actor_times = timed_leases(
            args.leases,
            lambda: ray.get(ledger.acquire.remote(request, {}, time.time())),
            lambda: ray.get(ledger.release.remote(request.job)),
        )
        book = LeaseBook(nodes)
        pure_times = timed_leases(
            args.leases, lambda: book.acquire(request, 0.0), lambda: book.release(request.job)
        )
        print(f"one 64-GPU lease (8 nodes x 8 GPUs), median of {args.leases}")
        print(f"  through the ledger actor: {statistics.median(actor_times) * 1e3:.2f} ms")
        print(f"  state machine alone:      {statistics.median(pure_times) * 1e3:.3f} ms")
        met = ratio <= TARGET
        print(
            f"share_cluster / plain launch: {ratio:.2f}x (target <= {TARGET:.2f}x): "
            + ("met" if met else "MISSED")
        )
        print(
            target_line(
                f"launch of {NODES * GPUS} workers, share_cluster=True",
                f"{medians['launch share_cluster']:.3f} s",
                f"plain launch {medians['launch']:.3f} s",
                ratio,
                f"<= {TARGET:.2f}x",
                met,
            )
        )
        return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
