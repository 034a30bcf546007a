"""Placement groups on the simulated cluster: checks, pins, timeouts, bundle order."""

from __future__ import annotations

import time

import pytest
import ray
from ray.util.placement_group import placement_group_table
from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

from placement_ray._cluster import Cluster
from placement_ray._placement_groups import OrderedPlacementGroup, create_placement_group
from placement_ray.errors import (
    ArgumentError,
    InfeasiblePlacementGroupError,
    PlacementGroupTimeoutError,
)

from .conftest import GPUS_PER_NODE, NUM_NODES

GPU = {"GPU": 1, "CPU": 1}


@ray.remote(num_cpus=0)
def where_am_i() -> tuple[str, str, int]:
    """What a task in a bundle sees: (node id, node IP, its GPU id)."""
    context = ray.get_runtime_context()
    return (
        context.get_node_id(),
        ray.util.get_node_ip_address(),
        int(context.get_accelerator_ids()["GPU"][0]),
    )


def seen_in_bundles(group: OrderedPlacementGroup) -> dict[int, tuple[str, str, int]]:
    """Ask a tiny task inside each bundle what it sees, by bundle index."""
    seen = {}
    for slot in group.slots:  # one at a time: a warm worker per node serves them all
        ref = where_am_i.options(
            num_gpus=0.01,
            scheduling_strategy=PlacementGroupSchedulingStrategy(
                placement_group=group.pg, placement_group_bundle_index=slot.index
            ),
        ).remote()
        seen[slot.index] = ray.get(ref, timeout=60)
    return seen


def live_groups() -> set[str]:
    return {k for k, v in placement_group_table().items() if v["state"] != "REMOVED"}


def test_whole_nodes_are_ordered_by_node_rank_and_gpu_without_a_probe(
    placement_cluster: Cluster,
) -> None:
    group = create_placement_group(placement_cluster, [GPU] * (NUM_NODES * GPUS_PER_NODE))
    assert group.probed == 0
    assert group.node_ranks == tuple(r for r in range(NUM_NODES) for _ in range(GPUS_PER_NODE))
    assert group.gpu_ids == tuple(range(GPUS_PER_NODE)) * NUM_NODES
    seen = seen_in_bundles(group)
    for slot in group.slots:
        assert seen[slot.index][0] == slot.node_id == placement_cluster.node(slot.node_rank).node_id


def test_probing_whole_nodes_gives_the_same_order(placement_cluster: Cluster) -> None:
    group = create_placement_group(
        placement_cluster, [GPU] * (NUM_NODES * GPUS_PER_NODE), always_probe=True
    )
    assert group.probed == NUM_NODES * GPUS_PER_NODE
    # On idle nodes Ray hands a group's GPUs out in bundle order: the unprobed order is Ray's.
    for rank in range(NUM_NODES):
        on_node = sorted((s.index, s.gpu_id) for s in group.slots if s.node_rank == rank)
        assert [gpu for _, gpu in on_node] == list(range(GPUS_PER_NODE))
    assert group.node_ranks == tuple(r for r in range(NUM_NODES) for _ in range(GPUS_PER_NODE))
    assert group.gpu_ids == tuple(range(GPUS_PER_NODE)) * NUM_NODES


def test_partial_nodes_are_probed_and_match_what_tasks_in_the_bundles_see(
    placement_cluster: Cluster,
) -> None:
    first = create_placement_group(
        placement_cluster, [GPU] * NUM_NODES, pin_to=list(range(NUM_NODES))
    )
    pins = [r for r in range(NUM_NODES) for _ in range(GPUS_PER_NODE - 1)]
    second = create_placement_group(placement_cluster, [GPU] * len(pins), pin_to=pins[::-1])
    assert first.probed == NUM_NODES
    assert second.probed == len(pins)
    assert second.node_ranks == tuple(pins)
    for rank in range(NUM_NODES):
        mine = [s.gpu_id for s in second.slots if s.node_rank == rank]
        other = [s.gpu_id for s in first.slots if s.node_rank == rank]
        assert mine == sorted(mine)
        assert sorted(mine + other) == list(range(GPUS_PER_NODE))
    seen = seen_in_bundles(second)
    for slot in second.slots:
        assert seen[slot.index][0] == slot.node_id
        assert seen[slot.index][2] == slot.gpu_id


def test_pins_put_bundles_on_their_node(placement_cluster: Cluster) -> None:
    group = create_placement_group(placement_cluster, [GPU] * 3, pin_to=[2, 1, 0])
    by_index = {s.index: s.node_rank for s in group.slots}
    assert by_index == {0: 2, 1: 1, 2: 0}
    assert group.bundle_indices == (2, 1, 0)


def test_slime_style_sort_interleaves_nodes_that_share_an_ip(placement_cluster: Cluster) -> None:
    group = create_placement_group(placement_cluster, [GPU] * (NUM_NODES * GPUS_PER_NODE))
    seen = seen_in_bundles(group)

    def slime_key(index: int) -> tuple[list[int], int]:
        _, ip, gpu = seen[index]
        return [int(p) for p in ip.split(".")], gpu

    slime_nodes = [placement_cluster.rank_of(seen[i][0]) for i in sorted(seen, key=slime_key)]
    assert slime_nodes[:NUM_NODES] == sorted(set(slime_nodes[:NUM_NODES])), "interleaved"
    assert slime_nodes != sorted(slime_nodes)
    assert list(group.node_ranks) == sorted(group.node_ranks)


@pytest.mark.parametrize(
    ("bundles", "kwargs", "match"),
    [
        ([GPU] * 13, {}, "asks for GPU 13 in total, the cluster has 12"),
        ([{"GPU": 5}], {}, r"bundle 0 \{GPU: 5\} fits on no node"),
        ([GPU] * 5, {"strategy": "STRICT_PACK"}, "STRICT_PACK needs one node"),
        ([GPU] * 4, {"strategy": "STRICT_SPREAD"}, "4 bundles on its own node, the cluster has 3"),
        ([GPU] * 5, {"pin_to": [0] * 5}, "5 bundles pinned to node 0 need"),
    ],
)
def test_infeasible_groups_fail_at_once_and_create_nothing(
    placement_cluster: Cluster, bundles: list[dict[str, int]], kwargs: dict[str, object], match: str
) -> None:
    before = live_groups()
    started = time.monotonic()
    with pytest.raises(InfeasiblePlacementGroupError, match=match):
        create_placement_group(placement_cluster, bundles, timeout_s=30, **kwargs)  # type: ignore[arg-type]
    assert time.monotonic() - started < 2
    assert live_groups() == before


def test_timeout_removes_the_group_and_lists_bundles_and_nodes(placement_cluster: Cluster) -> None:
    create_placement_group(placement_cluster, [GPU] * GPUS_PER_NODE, pin_to=[0] * GPUS_PER_NODE)
    before = live_groups()
    with pytest.raises(PlacementGroupTimeoutError) as info:
        create_placement_group(placement_cluster, [GPU] * 2, pin_to=[0, 1], timeout_s=1)
    error = info.value
    text = str(error)
    assert "placement group of 2 bundles (strategy PACK) was not placed within 1s" in text
    assert "bundle 0: {GPU: 1, CPU: 1}" in text
    assert "bundle 1: {GPU: 1, CPU: 1}" in text
    assert "labels {'node-rank': '0'}: available {GPU: 0, CPU: 0} of {GPU: 4, CPU: 4}" in text
    assert [i for i, _ in error.unplaced] == [0, 1]
    assert sorted(v["rank"] for v in error.nodes.values()) == list(range(NUM_NODES))
    assert live_groups() == before


@pytest.mark.parametrize("timeout_s", [0, -1.0, float("nan"), "60", True])
def test_a_bad_timeout_is_an_error_before_anything_is_created(
    placement_cluster: Cluster, timeout_s: object
) -> None:
    before = live_groups()
    with pytest.raises(ArgumentError, match=r"timeout_s: expected seconds > 0 or None, got "):
        create_placement_group(placement_cluster, [GPU], timeout_s=timeout_s)  # type: ignore[arg-type]
    assert live_groups() == before


def test_a_bundle_off_its_pinned_node_is_refused(placement_cluster: Cluster) -> None:
    from ray.util.placement_group import placement_group

    from placement_ray._placement_groups import NODE_ID_LABEL, _check_pins
    from placement_ray.errors import ClusterError

    pg = placement_group(
        [GPU], bundle_label_selector=[{NODE_ID_LABEL: placement_cluster.node(0).node_id}]
    )
    ray.get(pg.ready(), timeout=30)
    with pytest.raises(ClusterError, match="bundle 0 pinned to node 1 landed on node 0"):
        _check_pins(pg, placement_cluster, [1])


def test_pins_use_the_node_id_label(placement_cluster: Cluster) -> None:
    from placement_ray._placement_groups import pin_selectors

    assert pin_selectors(placement_cluster, [None, 2]) == [
        {},
        {"ray.io/node-id": placement_cluster.node(2).node_id},
    ]


@ray.remote(num_gpus=1, num_cpus=0)
class Holder:
    def ready(self) -> bool:
        return True


def test_a_probe_that_cannot_run_times_out_with_a_clear_error(placement_cluster: Cluster) -> None:
    from placement_ray._placement_groups import probe_bundle_gpus
    from placement_ray.errors import ProbeError

    group = create_placement_group(placement_cluster, [GPU], pin_to=[1])
    holder = Holder.options(  # type: ignore[attr-defined]
        scheduling_strategy=PlacementGroupSchedulingStrategy(
            placement_group=group.pg, placement_group_bundle_index=0
        )
    ).remote()
    ray.get(holder.ready.remote(), timeout=60)
    with pytest.raises(ProbeError, match=r"bundles \[0\] did not finish within 0.5s"):
        probe_bundle_gpus(group.pg, {group.slots[0].node_id: [0]}, placement_cluster, timeout_s=0.5)
