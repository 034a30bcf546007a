"""A planned pool made real: placement groups whose bundle order is the rank order.

verl's ``RayWorkerGroup`` gives rank ``r`` bundle ``r % chunk`` of group ``r // chunk``.
So each group holds ``chunk`` consecutive ranks, every bundle pinned to its planned node
(``ray.io/node-id`` label: it holds where nodes share an IP). A last group with fewer
ranks is padded with bundles of one byte of ``memory`` on the same node (no CPU: the
plan may use every CPU of a node), because verl checks that every group holds ``chunk``
bundles. The GPU Ray gives each bundle is read back (a
probe task per bundle) and must rise with the rank on each node; else the groups are
removed and the reservation is refused.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from placement_ray._placement_groups import OrderedPlacementGroup
from placement_ray._reservation import GroupAsk, Reservation
from placement_ray.errors import ClusterError

from .plan import PoolPlan

if TYPE_CHECKING:
    from placement_ray._cluster import Cluster

__all__ = ["PAD_BUNDLE", "check_gpu_order", "reserve_pool"]

PAD_BUNDLE = {"memory": 1.0}
"""A padding bundle: one byte of Ray's ``memory`` resource, which no worker asks for."""


def reserve_pool(
    cluster: Cluster,
    plan: PoolPlan,
    bundle: Mapping[str, float],
    *,
    name: str = "",
    lifetime: str | None = None,
    timeout_s: float | None = None,
    probe: bool = True,
) -> Reservation:
    """Reserve a pool's groups, in rank order (the reservation's ``ordered``).

    Args:
        cluster: The job's cluster view.
        plan: The pool's plan.
        bundle: Each rank's bundle (verl's ``{"CPU": max_colocate_count, "GPU": 1}``).
        name: Group ``i`` is named ``f"{name}{i}"`` (empty: anonymous).
        lifetime: None or ``"detached"``.
        timeout_s: Limit for each group (None: wait, as verl does).
        probe: Read each bundle's GPU back and check it rises with the rank.

    Returns:
        The reservation: its group ``ordered[i]`` holds ranks ``i*chunk ..`` at bundles
        ``0 ..``.

    Raises:
        PlacementGroupTimeoutError: a group was not placed in time (the others are
            removed too).
        ClusterError: Ray gave a node's bundles GPUs out of rank order.
    """
    asks = []
    for i, nodes in enumerate(plan.groups()):
        pad = plan.chunk - len(nodes)
        asks.append(
            GroupAsk(
                (*[dict(bundle)] * len(nodes), *[dict(PAD_BUNDLE)] * pad),
                (*nodes, *[nodes[-1]] * pad),
                name=f"{name}{i}" if name else "",
            )
        )
    reservation = Reservation.reserve_ordered(
        cluster, asks, lifetime=lifetime, timeout_s=timeout_s, check=False, always_probe=probe
    )
    try:
        if probe:
            check_gpu_order(plan, reservation.ordered)
    except BaseException:
        reservation.release()
        raise
    return reservation


def check_gpu_order(plan: PoolPlan, groups: list[OrderedPlacementGroup]) -> None:
    """Each node's ranks hold rising GPU ids (bundles without GPUs are skipped)."""
    by_index = [{s.index: s for s in g.slots} for g in groups]
    last: dict[int, tuple[int, int]] = {}
    for rank, node in enumerate(plan.nodes):
        slot = by_index[rank // plan.chunk][rank % plan.chunk]
        if slot.node_rank != node:
            raise ClusterError(
                f"rank {rank} of pool {plan.name!r} was pinned to node {node} but landed on "
                f"node {slot.node_rank}"
            )
        if slot.gpu_id < 0:
            continue
        before = last.get(node)
        if before is not None and slot.gpu_id <= before[1]:
            raise ClusterError(
                f"pool {plan.name!r}: Ray gave rank {rank} GPU {slot.gpu_id} of node {node} "
                f"but rank {before[0]} GPU {before[1]}; ranks would not follow GPU order "
                "(is other work holding some of the node's GPUs?)"
            )
        last[node] = (rank, slot.gpu_id)
