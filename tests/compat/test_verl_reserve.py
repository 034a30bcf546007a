"""The reserved groups' check: each node's ranks hold rising GPU ids on their planned node."""

from __future__ import annotations

from typing import Any

import pytest

from placement_ray._placement_groups import BundleSlot, OrderedPlacementGroup
from placement_ray._verl.plan import PoolPlan
from placement_ray._verl.reserve import check_gpu_order
from placement_ray.errors import ClusterError


def group(*slots: tuple[int, int, int]) -> OrderedPlacementGroup:
    """A group of bundles ``(index, node rank, GPU)``."""
    pg: Any = object()
    return OrderedPlacementGroup(
        pg=pg,
        slots=tuple(
            BundleSlot(index=i, node_rank=n, node_id=f"n{n}", gpu_ids=(g,)) for i, n, g in slots
        ),
    )


PLAN = PoolPlan(name="global", nodes=(0, 0, 1), chunk=2)


def test_rising_gpus_on_each_node_pass() -> None:
    check_gpu_order(PLAN, [group((0, 0, 0), (1, 0, 1)), group((0, 1, 0), (1, 0, 2))])


def test_gpus_out_of_rank_order_are_refused() -> None:
    with pytest.raises(ClusterError, match=r"rank 1 GPU 0 of node 0 but rank 0 GPU 1"):
        check_gpu_order(PLAN, [group((0, 0, 1), (1, 0, 0)), group((0, 1, 0), (1, 0, 2))])


def test_a_bundle_off_its_planned_node_is_refused() -> None:
    with pytest.raises(
        ClusterError, match=r"rank 2 of pool 'global' was pinned to node 1 but landed on node 0"
    ):
        check_gpu_order(PLAN, [group((0, 0, 0), (1, 0, 1)), group((0, 0, 2), (1, 0, 3))])
