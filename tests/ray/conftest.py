"""Fixtures for placement-ray: ONE simulated Ray cluster per session, on loopback only.

Three labelled nodes of four logical GPUs each, all on 127.0.0.1 (the shared-IP case that
must stay correct). Each test that uses Ray gets ``ray_env``: afterwards every placement
group is removed, every actor the test registered is killed, and the fixture waits until
every node's available resources equal its totals again.
"""

from __future__ import annotations

import os

os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"  # before `import ray`: stay on loopback

import time
from collections.abc import Iterator
from typing import Any

import pytest
import ray
from ray.cluster_utils import Cluster as SimulatedCluster
from ray.util.placement_group import (
    PlacementGroup,
    placement_group_table,
    remove_placement_group,
)

NUM_NODES = 3
GPUS_PER_NODE = 4
NAMESPACE = "placement-tests"
NODE_ARGS: dict[str, Any] = {
    "num_cpus": 4,
    "num_gpus": GPUS_PER_NODE,
    "node_ip_address": "127.0.0.1",
    "object_store_memory": 80 * 1024 * 1024,
}

_session: dict[str, Any] = {}


def start_simulated_cluster(
    num_nodes: int, *, labelled: bool = True, **overrides: Any
) -> SimulatedCluster:
    """A loopback-only simulated cluster.

    If labelled, node i carries the label ``{"node-rank": "i"}`` and its raylet (hence its
    workers) runs with ``PLACEMENT_NODE_RANK=i``.
    """
    args = {**NODE_ARGS, **overrides}

    def labels(i: int) -> dict[str, dict[str, str]]:
        # Both a label and the raylet's environment name the rank; they must agree.
        rank = {"labels": {"node-rank": str(i)}, "env_vars": {"PLACEMENT_NODE_RANK": str(i)}}
        return rank if labelled else {}

    cluster = SimulatedCluster(
        initialize_head=True,
        head_node_args={**args, "include_dashboard": False, **labels(0)},
    )
    for i in range(1, num_nodes):
        cluster.add_node(**args, **labels(i))
    cluster.wait_for_nodes(timeout=60)
    return cluster


def connect(address: str) -> None:
    """Connect this process's driver to a simulated cluster, in the tests' namespace."""
    if ray.is_initialized():
        ray.shutdown()
    ray.init(address=address, namespace=NAMESPACE, log_to_driver=False)


def reconnect_session() -> None:
    """Point the driver back at the session cluster (after a module used its own)."""
    if "cluster" in _session:
        connect(_session["cluster"].address)


@pytest.fixture(scope="session")
def sim_cluster() -> Iterator[SimulatedCluster]:
    """The session's simulated cluster (3 nodes x 4 logical GPUs, labelled)."""
    cluster = start_simulated_cluster(NUM_NODES)
    _session["cluster"] = cluster
    try:
        connect(cluster.address)
        yield cluster
    finally:
        _session.pop("cluster", None)
        ray.shutdown()
        cluster.shutdown()


@pytest.fixture(scope="session")
def cluster(sim_cluster: SimulatedCluster) -> Any:
    """placement-ray's view of the session cluster."""
    from placement_ray._cluster import Cluster

    if not ray.is_initialized():
        reconnect_session()
    return Cluster(NUM_NODES, timeout_s=60, export_env=False)


def wait_until_idle(timeout_s: float = 30.0) -> None:
    """Remove every placement group and wait until available == total on every node."""
    for info in placement_group_table().values():
        if info["state"] != "REMOVED":
            pg = PlacementGroup(ray.PlacementGroupID.from_hex(info["placement_group_id"]))
            remove_placement_group(pg)
    from ray._private import state

    deadline = time.monotonic() + timeout_s
    while True:
        total = state.total_resources_per_node()
        available = state.available_resources_per_node()
        busy = {
            node: {
                k: (available.get(node, {}).get(k, 0.0), v)
                for k, v in res.items()
                if k in ("CPU", "GPU") and available.get(node, {}).get(k, 0.0) != v
            }
            for node, res in total.items()
        }
        busy = {k: v for k, v in busy.items() if v}
        if not busy:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"cluster not idle after {timeout_s}s: {busy}")
        time.sleep(0.1)


@pytest.fixture
def actors() -> Iterator[list[Any]]:
    """Actors a test starts; all are killed after the test."""
    started: list[Any] = []
    yield started
    for handle in started:
        ray.kill(handle, no_restart=True)


@pytest.fixture
def ray_env(cluster: Any, actors: list[Any]) -> Iterator[Any]:
    """The session's ``Cluster``, cleaned up after the test (PGs, actors, resources)."""
    if not ray.is_initialized():
        reconnect_session()
    yield cluster
    for handle in actors:
        ray.kill(handle, no_restart=True)
    actors.clear()
    wait_until_idle()


def run_python(code: str, env: dict[str, str], timeout_s: float = 120.0) -> str:
    """Run ``code`` in a fresh interpreter (another process of the job); return its stdout."""
    import subprocess
    import sys

    full_env = {
        k: v for k, v in os.environ.items() if not k.startswith(("RAY_ADDRESS", "PLACEMENT_"))
    }
    full_env.update({"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", **env})
    done = subprocess.run(
        [sys.executable, "-c", code],
        env=full_env,
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
    )
    if done.returncode != 0:
        raise AssertionError(f"subprocess failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return done.stdout
