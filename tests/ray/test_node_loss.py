"""Node loss under a running job, on a module-scoped cluster of its own.

The nodes carry no rank labels, so this module also checks the fallback order live: the
driver's node first, then (all IPs being 127.0.0.1) by node id.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from ray.util.placement_group import placement_group_table

from placement_ray._cluster import Cluster
from placement_ray._failure import check_health, occupants
from placement_ray._slime.layout import SlimeLayout, create_placement_groups
from placement_ray.errors import NodeLostError, NoSpareNodeError
from placement_ray.testing import SimulatedCluster


@pytest.fixture(scope="module")
def lossy() -> Iterator[tuple[Any, Cluster, SlimeLayout]]:
    """3 unlabelled nodes x 2 GPUs, fully reserved by a disaggregated slime layout."""
    with SimulatedCluster(nodes=3, labelled=False, gpus_per_node=2, cpus_per_node=2) as simulated:
        view = simulated.view()
        layout = create_placement_groups(1, 4, 2, cluster=view, timeout_s=30)
        yield simulated.ray_cluster, view, layout


def test_without_labels_the_driver_node_comes_first(lossy: Any) -> None:
    sim, view, _ = lossy
    assert view.node(0).node_id == sim.head_node.node_id
    rest = [n.node_id for n in view.nodes[1:]]
    assert rest == sorted(rest)


def test_a_healthy_job_reports_ok(lossy: Any) -> None:
    _, view, layout = lossy
    workers = occupants("actor", layout.actor) + occupants("rollout", layout.rollout)
    report = check_health(view, workers, [layout.group], grace_s=0.5)
    assert report.ok
    assert report.describe() == "all nodes alive"


def test_a_lost_node_names_the_affected_ranks_and_the_stuck_group_is_removed(
    lossy: Any,
) -> None:
    sim, view, layout = lossy
    victim = view.node(2)
    node = next(n for n in sim.worker_nodes if n.node_id == victim.node_id)
    sim.remove_node(node)
    deadline = time.monotonic() + 60
    while victim.node_id in view.alive_node_ids():
        assert time.monotonic() < deadline, "node removal not noticed in 60s"
        time.sleep(0.2)
    workers = occupants("actor", layout.actor) + occupants("rollout", layout.rollout)
    lost = [w for w in workers if w.node_rank == 2]
    with pytest.raises(NodeLostError) as info:
        check_health(view, workers, [layout.group], grace_s=3)
    error = info.value
    assert error.dead_nodes == ((2, victim.node_id),)
    assert [(a["role"], a["rank"], a["node_rank"]) for a in error.affected] == [
        (w.role, w.rank, 2) for w in lost
    ]
    assert {a["gpu_ids"] for a in error.affected} == {(0,), (1,)}
    text = str(error)
    assert f"lost node 2 ({victim.node_id})" in text
    for w in lost:
        assert w.describe() in text
    assert f"removed placement group {layout.group.pg.id.hex()}" in text
    assert placement_group_table(layout.group.pg)["state"] == "REMOVED"


def test_a_layout_without_spares_cannot_recover_and_says_how_to_keep_some(lossy: Any) -> None:
    _, _, layout = lossy
    roles = (layout.actor, layout.rollout)
    with pytest.raises(NoSpareNodeError, match=r"lost node 2.*made without spare_nodes") as info:
        layout.recover()
    assert info.value.lost == (2,)
    assert (layout.actor, layout.rollout) == roles
