"""Fixtures for placement-ray: the suite runs on the package's own testing kit.

Tests take ``placement_cluster`` (the ``pytest11`` plugin of placement-ray): one simulated
loopback cluster per session, 3 labelled nodes of 4 logical GPUs and 4 CPUs each (the
shared-IP case that must stay correct; ``SHAPE``, given to every test here that names no
shape of its own), cleaned up after every test. Module-scoped fixtures use ``cluster``,
the same view without per-test cleanup. Tests that kill nodes share the ``LOSSY`` shape,
whose Ray head is a separate node that offers nothing, so node 0 can be lost too.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from placement_native.testing import Topology, topology

if TYPE_CHECKING:
    from _placement_ray_pytest import PlacementClusterFactory

    from placement_ray import Cluster
    from placement_ray.testing import SimulatedCluster

NUM_NODES = 3
GPUS_PER_NODE = 4
SHAPE = {"nodes": NUM_NODES, "gpus_per_node": GPUS_PER_NODE, "cpus_per_node": 4}
LOSSY = {
    "nodes": 4,
    "gpus_per_node": 2,
    "cpus_per_node": 2,
    "timeout_s": 240,
    "separate_head": True,
}
"""The shape of the tests that kill nodes (``SimulatedCluster.kill_node``): marked with it,
they run one after another on one cluster, each starting its killed nodes again after.
Ray's head is an extra node with no CPUs, no GPUs and no rank (as KubeRay's), which the
job's view leaves out: nodes 0-3 are all workers, and any of them can be killed."""
DGX_PAIR = {"nodes": 2, "cpus_per_node": 8, "topology": ["dgx-h100", None], "timeout_s": 240}
"""Node 0 a DGX H100 of the fake NVML kit (8 x 80 GB), node 1 without NVML (4 logical GPUs):
the testing kit's own tests and the live memory check."""


def _tray(clique_id: int) -> Topology:
    """An NVL72 tray whose GPUs are registered with clique ``clique_id`` of the fabric."""
    gpus = [
        dataclasses.replace(g, fabric=dataclasses.replace(g.fabric, clique_id=clique_id))
        for g in TRAY.gpus
    ]
    return dataclasses.replace(TRAY, gpus=gpus)


TRAY = topology("gb200-nvl72-tray")
RACKS = {
    "nodes": 4,
    "gpus_per_node": 4,
    "cpus_per_node": 2,
    "topology": (_tray(1), _tray(2), _tray(2), _tray(1)),
    "timeout_s": 300,
}
"""Four GB200 NVL72 trays of 4 GPUs whose fake NVML puts ranks 0-3 in racks A, B, B, A
(cliques 1, 2, 2, 1): the live NVLink tests and slime's recovery (which kills nodes)."""
HERE = Path(__file__).parent


@pytest.hookimpl(tryfirst=True)  # before the plugin groups the tests by shape
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.path.is_relative_to(HERE) and item.get_closest_marker("placement_cluster") is None:
            item.add_marker(pytest.mark.placement_cluster(**SHAPE))


@pytest.fixture(scope="module")
def simulated(placement_cluster_factory: PlacementClusterFactory) -> SimulatedCluster:
    """The session's ``SimulatedCluster``: ``baseline()`` / ``cleanup()`` for module-scoped
    fixtures that create groups or actors."""
    return placement_cluster_factory.simulated(**SHAPE)


@pytest.fixture(scope="module")
def cluster(placement_cluster_factory: PlacementClusterFactory) -> Cluster:
    """The session cluster's ``Cluster``, for module-scoped fixtures (no per-test cleanup)."""
    return placement_cluster_factory(**SHAPE)


@pytest.fixture(scope="module")
def lossy_cluster(
    placement_cluster_factory: PlacementClusterFactory,
) -> Iterator[tuple[SimulatedCluster, Cluster]]:
    """The ``LOSSY`` shape's cluster and its view, for the module fixtures of tests that
    kill nodes; every node they killed is started again after the module."""
    simulated = placement_cluster_factory.simulated(**LOSSY)
    try:
        yield simulated, simulated.view()
    finally:
        restore_nodes(simulated, range(LOSSY["nodes"]))


def restore_nodes(simulated: SimulatedCluster, ranks: Iterable[int]) -> None:
    """Start again those of ``ranks`` that a test killed (its job view is rebuilt)."""
    view = simulated.view()
    alive = view.alive_node_ids()
    for rank in ranks:
        if view.node(rank).node_id not in alive:
            simulated.restore_node(rank)


def run_python(code: str, env: dict[str, str], timeout_s: float = 120.0) -> str:
    """Run ``code`` in a fresh interpreter (another process of the job); return its stdout."""
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
