"""Node loss under a running job, on the plugin's unlabelled shape (its own).

The nodes carry no rank labels, so this module also checks the fallback order live: the
driver's node first, then (all IPs being 127.0.0.1) by node id.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import pytest
from ray.util.placement_group import placement_group_table

from placement_ray._cluster import Cluster
from placement_ray._failure import check_health, occupants
from placement_ray._slime.layout import SlimeLayout, create_placement_groups
from placement_ray.errors import ArgumentError, NodeLostError, NoSpareNodeError
from placement_ray.testing import SimulatedCluster

UNLABELLED = {"nodes": 3, "labelled": False, "gpus_per_node": 2, "cpus_per_node": 2}
pytestmark = pytest.mark.placement_cluster(**UNLABELLED)


@pytest.fixture(scope="module")
def lossy(
    placement_cluster_factory: Any,
) -> Iterator[tuple[SimulatedCluster, Cluster, SlimeLayout]]:
    """3 unlabelled nodes x 2 GPUs, fully reserved by a disaggregated slime layout; the
    node a test kills is started again after the module."""
    simulated = placement_cluster_factory.simulated(**UNLABELLED)
    view = simulated.view()
    layout = create_placement_groups(1, 4, 2, cluster=view, timeout_s=30)
    try:
        yield simulated, view, layout
    finally:
        layout.remove()
        for rank in (1, 2):
            with contextlib.suppress(ArgumentError):  # alive: nothing to start again
                simulated.restore_node(rank)


def test_without_labels_the_driver_node_comes_first(lossy: Any) -> None:
    simulated, view, _ = lossy
    assert view.node(0).node_id == simulated.node_id(0)
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
    simulated, view, layout = lossy
    victim = view.node(2)
    simulated.kill_node(next(r for r in (1, 2) if simulated.node_id(r) == victim.node_id))
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
