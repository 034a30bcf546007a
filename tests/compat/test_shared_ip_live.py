"""Nodes sharing one IP: ranks follow the node-rank labels, read from inside the workers."""

from __future__ import annotations

import pytest
import ray
from compat_workers import OpenRLHFProbe, VerlProbe
from shapes import SHARED
from verl.single_controller.ray import RayClassWithInitArgs, RayWorkerGroup

from placement_ray import Cluster
from placement_ray.compat.openrlhf import RayActorGroup
from placement_ray.compat.verl import RayResourcePool

pytestmark = [pytest.mark.slow, pytest.mark.placement_cluster(**SHARED)]


def test_verl_ranks_follow_node_rank_labels(placement_cluster: Cluster) -> None:
    pool = RayResourcePool([2, 2], max_colocate_count=1, cluster=placement_cluster, timeout_s=120)
    group = RayWorkerGroup(
        resource_pool=pool, ray_cls_with_init=RayClassWithInitArgs(cls=ray.remote(VerlProbe))
    )
    reports = sorted(group.seen(), key=lambda s: s["rank"])
    assert {s["ip"] for s in reports} == {"127.0.0.1"}
    assert [(s["node_rank_label"], s["visible"]) for s in reports] == [
        ("0", "0"),
        ("0", "1"),
        ("1", "0"),
        ("1", "1"),
    ]


def test_openrlhf_ranks_follow_node_rank_labels(placement_cluster: Cluster) -> None:
    group = RayActorGroup(2, 2, ray.remote(OpenRLHFProbe), cluster=placement_cluster, timeout_s=120)
    reports = ray.get([a.seen.remote() for a in group._actor_handlers])
    assert [(s["worker_rank"], s["node_rank_label"], s["visible"]) for s in reports] == [
        (0, "0", "0"),
        (1, "0", "1"),
        (2, "1", "0"),
        (3, "1", "1"),
    ]
