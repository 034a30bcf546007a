"""verl's own RayWorkerGroup on the drop-in pools, and the same cases without it.

Ranks, nodes and visible GPUs are read from inside verl's workers.
"""

from __future__ import annotations

from typing import Any

import pytest
import ray
from compat_workers import VerlProbe
from shapes import IPS, NODE_IPS
from verl.single_controller.ray import RayClassWithInitArgs, RayWorkerGroup
from verl.single_controller.ray import base as verl_base

from placement_ray import Cluster
from placement_ray._placement_groups import create_placement_group
from placement_ray.compat.verl import RayResourcePool, ResourcePoolManager, split_resource_pool
from placement_ray.errors import ArgumentError, InfeasiblePlacementGroupError

pytestmark = [pytest.mark.slow, pytest.mark.placement_cluster(**IPS)]

PROBE = ray.remote(VerlProbe)
WAIT = 120.0  # placement groups that cannot be placed fail the test instead of hanging


def seen(pool: Any) -> list[dict[str, Any]]:
    group = RayWorkerGroup(resource_pool=pool, ray_cls_with_init=RayClassWithInitArgs(cls=PROBE))
    return sorted(group.seen(), key=lambda s: s["rank"])


def where(cluster: Cluster, reports: list[dict[str, Any]]) -> list[tuple[int, str]]:
    return [(cluster.rank_of(s["node_id"]), s["visible"]) for s in reports]


def test_ranks_follow_numeric_ip_order_on_unequal_nodes(placement_cluster: Cluster) -> None:
    pool = RayResourcePool(
        [2, 2, 1], max_colocate_count=1, cluster=placement_cluster, timeout_s=WAIT
    )
    reports = seen(pool)
    assert [s["rank"] for s in reports] == [0, 1, 2, 3, 4]
    # Node 1 (127.0.0.9) has one GPU: the count of 1 goes there, a count of 2 to node 2.
    assert where(placement_cluster, reports) == [(0, "0"), (0, "1"), (1, "0"), (2, "0"), (2, "1")]
    assert [s["ip"] for s in reports] == [NODE_IPS[0]] * 2 + [NODE_IPS[1]] + [NODE_IPS[2]] * 2


def test_get_placement_groups_returns_the_same_ordered_list(placement_cluster: Cluster) -> None:
    pool = RayResourcePool([2, 2], max_colocate_count=1, cluster=placement_cluster, timeout_s=WAIT)
    first = pool.get_placement_groups()
    assert first == pool.get_placement_groups() == pool.pgs
    assert pool.node_ranks == (0, 0, 2, 2)


def test_split_pools_agree_with_the_whole_pool(placement_cluster: Cluster) -> None:
    pool = RayResourcePool(
        [2, 2, 1], max_colocate_count=2, cluster=placement_cluster, timeout_s=WAIT
    )
    whole = where(placement_cluster, seen(pool))
    parts = [where(placement_cluster, seen(p)) for p in split_resource_pool(pool, [3, 2])]
    assert parts == [whole[:3], whole[3:]]


def test_cpu_shortfall_is_refused_before_reserving(placement_cluster: Cluster) -> None:
    manager = ResourcePoolManager(
        {"global_pool": [2, 1]},
        {"actor": "global_pool"},
        max_colocate_count=3,
        cluster=placement_cluster,
        timeout_s=WAIT,
    )
    before = len(ray.util.placement_group_table())
    with pytest.raises(
        InfeasiblePlacementGroupError,
        match=r"node 0: 2 of 2 GPU and 4 of 4 CPUs left, short 2 CPUs",
    ):
        manager.create_resource_pool()
    assert len(ray.util.placement_group_table()) == before


def test_pool_bigger_than_cluster_is_refused_before_reserving(placement_cluster: Cluster) -> None:
    pool = RayResourcePool(
        [2, 2, 2], max_colocate_count=1, cluster=placement_cluster, timeout_s=WAIT
    )
    before = len(ray.util.placement_group_table())
    with pytest.raises(InfeasiblePlacementGroupError, match=r"6 GPU asked, the nodes have 5"):
        pool.get_placement_groups()
    assert len(ray.util.placement_group_table()) == before


def test_colocate_count_zero_is_refused() -> None:
    with pytest.raises(ArgumentError, match=r"max_colocate_count: expected an int >= 1.*got 0"):
        RayResourcePool([2], max_colocate_count=0)


def test_manager_maps_roles_by_text_and_reserves_every_pool(placement_cluster: Cluster) -> None:
    manager = ResourcePoolManager(
        {"actor_pool": [2, 2], "reward_pool": [1]},
        {"actor": "actor_pool", "rm": "reward_pool"},
        max_colocate_count=1,
        cluster=placement_cluster,
        timeout_s=WAIT,
    )
    manager.create_resource_pool()
    assert manager.get_resource_pool("actor").node_ranks == (0, 0, 2, 2)
    assert manager.get_resource_pool("rm").node_ranks == (1,)


def spare_topology(spare_node: int) -> dict[str, Any]:
    """verl's topology of 3 nodes x 2 GPUs: a train pool of 2 nodes, a standby pool on
    ``spare_node``, the actor model on the train pool."""
    return {
        "clusters": [{"name": "default", "nnodes": 3, "n_gpus_per_node": 2}],
        "device_pools": [
            {"name": "train_pool", "nnodes": 2, "n_gpus_per_node": 2},
            {
                "name": "spare",
                "nnodes": 1,
                "n_gpus_per_node": 1,
                "nodes": [spare_node],
                "attributes": {"standby": True},
            },
        ],
        "models": [{"name": "actor", "worker": "actor", "resource_pool": "train_pool"}],
    }


def test_topology_spare_pool_is_reserved_whole(placement_cluster: Cluster) -> None:
    topology = spare_topology(1)
    manager = ResourcePoolManager.from_topology(
        topology, max_colocate_count=1, cluster=placement_cluster
    )
    manager.create_resource_pool()
    assert manager.spare_nodes == (1,)
    assert sorted(manager.spare_groups) == [1]
    assert manager.get_resource_pool("actor").node_ranks == (0, 0, 2, 2)


def test_topology_naming_unknown_nodes_is_refused(placement_cluster: Cluster) -> None:
    topology = spare_topology(5)
    with pytest.raises(ArgumentError, match=r"nodes: unknown nodes \[5\]"):
        ResourcePoolManager.from_topology(topology, cluster=placement_cluster, timeout_s=WAIT)


# verl's own pieces, without the drop-in: each test asserts the bug is still there, so a
# release that fixes it fails here and is noticed.


def test_bug_verl_sorts_node_ips_as_text(placement_cluster: Cluster) -> None:
    bundle = {"GPU": 1.0, "CPU": 1.0}
    groups = [
        create_placement_group(placement_cluster, [bundle], pin_to=[rank]).pg for rank in range(3)
    ]
    order = verl_base.sort_placement_group_by_node_ip(groups)
    ips = [NODE_IPS[groups.index(pg)] for pg in order]
    assert ips == ["127.0.0.1", "127.0.0.10", "127.0.0.9"]


def test_bug_verl_first_call_returns_the_unsorted_list(placement_cluster: Cluster) -> None:
    pool = verl_base.RayResourcePool([1, 1], max_colocate_count=1)
    first = pool.get_placement_groups()
    assert first is not pool.pgs


def test_bug_verl_unequal_nodes_break_its_worker_group(placement_cluster: Cluster) -> None:
    pool = verl_base.RayResourcePool([2, 1], max_colocate_count=1)
    with pytest.raises(AssertionError, match="when generating for"):  # verl's own assert
        RayWorkerGroup(resource_pool=pool, ray_cls_with_init=RayClassWithInitArgs(cls=PROBE))


def test_bug_verl_checks_gpus_only(placement_cluster: Cluster) -> None:
    manager = verl_base.ResourcePoolManager({"global_pool": [2, 2, 1]}, {}, max_colocate_count=3)
    manager.create_resource_pool()  # passes: 5 GPUs asked, 5 there; 15 CPUs asked, 12 there
    assert manager.get_n_gpus() == 5
