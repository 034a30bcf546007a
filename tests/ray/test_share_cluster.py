"""Several jobs on one Ray cluster: leases, plans on what is free, the queue, reclaim.

Every job is a driver process of its own (``Popen``, the way users run jobs), on the
session's 3 x 4 cluster. The drivers print one JSON line once their workers report where
they run (Ray node, visible GPUs) and shut down when told to on stdin.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
import ray

from placement_ray import (
    Cluster,
    leases,
)
from placement_ray._leases import lease_table
from placement_ray._ledger import find_ledger

DRIVER = r"""
import json, os, sys
os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
import ray
from placement_ray import Cluster, launch

class Where:
    def where(self):
        return [ray.get_runtime_context().get_node_id(), os.environ["CUDA_VISIBLE_DEVICES"]]

name, nodes, rule, priority = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
cluster = Cluster(job=name, timeout_s=120)
print(json.dumps({"queued": name, "owner": ray.get_runtime_context().get_job_id()}), flush=True)
config = {"cluster": {"num_nodes": nodes, "component_placement": {"actor": rule}}}
job = launch(config, {"actor": Where}, cluster, share_cluster=True, priority=priority,
             queue_timeout_s=300, timeout_s=300, pg_timeout_s=300)
seen = job["actor"].execute("where", timeout_s=120)
print(json.dumps({"started": name, "workers": seen}), flush=True)
sys.stdin.readline()
job.shutdown()
print(json.dumps({"stopped": name}), flush=True)
"""


class Driver:
    """One job's driver process; its JSON lines arrive on a queue."""

    def __init__(self, address: str, name: str, nodes: int, rule: str, priority: int = 0) -> None:
        env = {
            k: v for k, v in os.environ.items() if not k.startswith(("RAY_ADDRESS", "PLACEMENT_"))
        }
        env.update({"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", "RAY_ADDRESS": address})
        self.name = name
        self.proc = subprocess.Popen(
            [sys.executable, "-c", DRIVER, name, str(nodes), rule, str(priority)],
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.lines: queue.Queue[dict[str, Any]] = queue.Queue()
        self.seen: dict[str, dict[str, Any]] = {}
        self.err: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(
            target=lambda: self.err.extend(self.proc.stderr or ()), daemon=True
        ).start()

    def _read(self) -> None:
        for line in self.proc.stdout or ():
            if line.startswith("{"):
                self.lines.put(json.loads(line))

    def expect(self, key: str, timeout_s: float = 300.0) -> dict[str, Any]:
        deadline = time.monotonic() + timeout_s
        while key not in self.seen:
            try:
                line = self.lines.get(timeout=max(0.0, min(5.0, deadline - time.monotonic())))
            except queue.Empty:
                if self.proc.poll() is not None:
                    raise AssertionError(
                        f"{self.name} exited: {''.join(self.err)[-3000:]}"
                    ) from None
                if time.monotonic() > deadline:
                    raise AssertionError(f"{self.name}: no {key!r} in {timeout_s}s") from None
                continue
            self.seen.update(dict.fromkeys(line, line))
        return self.seen[key]

    def stop(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write("stop\n")
        self.proc.stdin.flush()
        self.expect("stopped")
        self.proc.wait(timeout=60)

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=30)


def seats(started: dict[str, Any]) -> set[tuple[str, str]]:
    return {(node, gpu) for node, visible in started["workers"] for gpu in visible.split(",")}


def wait_for(condition: Any, timeout_s: float) -> float:
    """Block on the ledger's change signal until ``condition()``; the time it held."""
    ledger = find_ledger()
    deadline = time.monotonic() + timeout_s
    change = -1
    while not condition():
        left = deadline - time.monotonic()
        assert left > 0, "condition not met in time"
        change = ray.get(ledger.wait_change.remote(change, min(left, 0.05)))
    return time.monotonic()


def jobs_holding() -> set[str]:
    return {r.job for r in lease_table()["leases"]}


def queued() -> list[str]:
    return [w.job for w in lease_table()["queue"]]


def dead(owner: str) -> bool:
    from ray._private import state

    return any(j["JobID"] == owner and j.get("IsDead") for j in state.jobs())


@pytest.fixture
def drivers(placement_cluster: Cluster) -> Iterator[list[Driver]]:
    started: list[Driver] = []
    yield started
    for driver in started:
        driver.kill()


def test_jobs_never_share_a_gpu_wait_in_priority_order_and_a_dead_driver_is_reclaimed(
    placement_cluster: Cluster, drivers: list[Driver]
) -> None:
    address = placement_cluster.address
    # Three jobs at once: 4 + 2 + 2 GPUs of the 12; one node stays whole.
    a, b, c = (
        Driver(address, "job-a", 1, "0-3:0-1"),
        Driver(address, "job-b", 1, "0-1:0"),
        Driver(address, "job-c", 1, "0-1:0"),
    )
    drivers += [a, b, c]
    up = {d.name: d.expect("started") for d in (a, b, c)}
    taken = [seats(s) for s in up.values()]
    assert sum(len(t) for t in taken) == 8
    assert len(set().union(*taken)) == 8  # no (node, GPU) in two jobs
    assert len(leases(placement_cluster)) == 8
    # A job of two whole nodes waits, then starts when job-a shuts down.
    d = Driver(address, "job-d", 2, "0-7:0-1")
    drivers.append(d)
    d.expect("queued")
    wait_for(lambda: queued() == ["job-d"], 120)
    a.stop()
    up["job-d"] = d.expect("started")
    del up["job-a"]
    taken = [seats(s) for s in up.values()]
    assert len(set().union(*taken)) == sum(len(t) for t in taken) == 12
    # Two waiters; killing job-b's driver frees 2 GPUs: the higher priority one starts.
    e = Driver(address, "job-e", 1, "0-1:0", priority=0)
    drivers.append(e)
    e.expect("queued")
    wait_for(lambda: queued() == ["job-e"], 120)
    f = Driver(address, "job-f", 1, "0-1:0", priority=5)
    drivers.append(f)
    f.expect("queued")
    wait_for(lambda: queued() == ["job-f", "job-e"], 120)
    b.kill()
    t_dead = wait_for(lambda: dead(b.expect("queued")["owner"]), 60)
    t_freed = wait_for(lambda: "job-b" not in jobs_holding(), 60)
    assert t_freed - t_dead <= 1.0
    up["job-f"] = f.expect("started")
    assert queued() == ["job-e"]
    del up["job-b"]
    taken = [seats(s) for s in up.values()]
    assert len(set().union(*taken)) == sum(len(t) for t in taken)
