"""WorkerGroup: in-worker master-port hand-over, and node loss reported by rank, node and
GPUs (on the suite's lossy shape, since a node is killed; it is started again after)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from ray.util.placement_group import placement_group_table

from placement_ray._cluster import Cluster
from placement_ray._launch import Launch, launch
from placement_ray.demo.workers import DemoWorker
from placement_ray.errors import ArgumentError, NodeLostError, PortNotHeldError
from placement_ray.testing import SimulatedCluster

from .conftest import LOSSY

pytestmark = pytest.mark.placement_cluster(**LOSSY)

CONFIG = {"cluster": {"num_nodes": 4, "component_placement": {"actor": "0-3"}}}


@pytest.fixture(scope="module")
def two_nodes(
    lossy_cluster: tuple[SimulatedCluster, Cluster],
) -> Iterator[tuple[SimulatedCluster, Cluster, Launch]]:
    """Nodes 0-1 of the lossy shape (2 GPUs each); one actor per GPU (ranks 2, 3 on node 1)."""
    simulated, view = lossy_cluster
    launched = launch(CONFIG, {"actor": DemoWorker}, view, timeout_s=120)
    with launched:
        yield simulated, view, launched


def test_workers_hand_the_master_port_over_themselves(two_nodes: Any) -> None:
    _, _, launched = two_nodes
    group = launched["actor"]
    results = group.execute("bind_master", timeout_s=60)
    assert results == [(0, group.master_port, True)] + [
        (r, group.master_port, False) for r in range(1, 4)
    ]
    with pytest.raises(PortNotHeldError, match="holds no port block"):
        group.hand_over_master_port()


def test_group_basics(two_nodes: Any) -> None:
    _, _, launched = two_nodes
    group = launched["actor"]
    assert len(group) == group.world_size == 4
    assert [w.rank for w in group] == [0, 1, 2, 3]
    assert [w.node_rank for w in group] == [0, 0, 1, 1]
    assert len(group.handles) == 4
    assert [o.describe() for o in group.occupants()][
        2
    ] == "actor rank 2 on node 1 (GPUs [0], bundle 0)"


def test_a_lost_node_is_reported_by_rank_node_and_gpus(two_nodes: Any) -> None:
    sim, view, launched = two_nodes
    group = launched["actor"]
    victim = view.node(1)
    sim.kill_node(1)
    with pytest.raises(NodeLostError) as caught:
        group.execute("ping", timeout_s=60)
    error = caught.value
    assert error.dead_nodes == ((1, victim.node_id),)
    assert [(a["rank"], a["node_rank"], a["gpu_ids"]) for a in error.affected] == [
        (2, 1, (0,)),
        (3, 1, (1,)),
    ]
    assert "actor rank 3 on node 1 (GPUs [1]" in str(error)
    assert placement_group_table(launched.placement_group(1).pg)["state"] == "REMOVED"
    group.kill()
    with pytest.raises(ArgumentError, match="was killed"):
        group.execute("ping")
