"""Placement groups whose bundle index order is the (node, GPU) order, and rank maps.

OpenRLHF gives rank ``r`` bundle ``r`` and vLLM engine ``i`` of ``k`` GPUs the bundles
``get_bundle_indices`` lists. Here a group is reserved with every bundle pinned to a node
(nodes filled in node order; an engine of ``k`` GPUs never split across nodes when it fits
one), so bundle ``r`` is the r-th (node, GPU); the GPU Ray gives each bundle is read back
and must rise with the index on each node. For any other group, ranks and engines follow
the group's bundles ordered by (node rank, GPU), read from Ray.
"""

from __future__ import annotations

from collections.abc import Mapping

from ray.util.placement_group import PlacementGroup

from placement_ray._cluster import Cluster
from placement_ray._feasibility import check_feasible
from placement_ray._placement_groups import OrderedPlacementGroup, node_totals, order_bundles
from placement_ray._reservation import GroupAsk, Reservation
from placement_ray._slime.alignment import align_engines
from placement_ray.errors import ArgumentError, ClusterError, EngineAlignmentError

__all__ = ["engine_bundles", "ordered_group", "rank_bundles"]

_ORDERED: dict[str, OrderedPlacementGroup] = {}
"""Placement group id -> its ordered bundles (read once: a probe task per bundle)."""


def _capacity(cluster: Cluster, bundle: Mapping[str, float]) -> list[int]:
    out = []
    for total in node_totals(cluster):
        fits = [int(total.get(k, 0.0) / v + 1e-9) for k, v in bundle.items() if v > 0]
        out.append(min(fits, default=0))
    return out


def ordered_group(
    cluster: Cluster,
    count: int,
    bundle: Mapping[str, float],
    *,
    engine_size: int = 1,
    timeout_s: float | None = None,
) -> OrderedPlacementGroup:
    """Reserve ``count`` bundles, bundle ``r`` on the r-th (node, GPU).

    Args:
        cluster: The job's cluster view.
        count: Bundles.
        bundle: Each bundle's resources (OpenRLHF: ``{"GPU": 1, "CPU": 1}``).
        engine_size: Consecutive bundles that must share a node (a vLLM engine's
            tensor-parallel size), or take whole nodes where bigger than one.
        timeout_s: Limit for placing the group (None: wait, as OpenRLHF does).

    Raises:
        ArgumentError: a count or engine size that is not an int >= 1.
        InfeasiblePlacementGroupError: the cluster can never hold the group (names each
            node's resources); EngineAlignmentError: it can, but not with every engine on
            one node. Nothing is reserved then.
        ClusterError: Ray gave a node's bundles GPUs out of index order (the group is
            removed).
    """
    for name, value in (("count", count), ("engine_size", engine_size)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ArgumentError(f"{name}: expected an int >= 1, got {value!r}")
    bundles = [dict(bundle)] * count
    check_feasible(bundles, node_totals(cluster), strategy="PACK")
    pins = align_engines(
        _capacity(cluster, bundle),
        actors=count,
        start=0,
        rollouts=count if count % engine_size == 0 else 0,
        total=count,
        engine_size=engine_size,
    )
    reservation = Reservation.reserve_ordered(
        cluster, [GroupAsk(tuple(bundles), tuple(pins))], timeout_s=timeout_s, always_probe=True
    )
    group = reservation.ordered[0]
    if list(group.bundle_indices) != list(range(count)):
        reservation.release()
        raise ClusterError(
            f"Ray gave the bundles GPUs out of index order ({group.gpu_ids} for bundles "
            f"{group.bundle_indices} in node order); is other work holding some GPUs?"
        )
    _ORDERED[group.pg.id.hex()] = group
    return group


def _ordered(pg: PlacementGroup, cluster: Cluster) -> OrderedPlacementGroup:
    key = pg.id.hex()
    if key not in _ORDERED:
        _ORDERED[key] = order_bundles(pg, cluster, always_probe=True)
    return _ORDERED[key]


def rank_bundles(pg: PlacementGroup, cluster: Cluster, world_size: int) -> list[int]:
    """The bundle of rank 0, 1, ...: the group's bundles in (node rank, GPU) order.

    Raises:
        ArgumentError: the group holds fewer bundles than ``world_size``.
    """
    order = list(_ordered(pg, cluster).bundle_indices)
    if len(order) < world_size:
        raise ArgumentError(
            f"pg: the placement group holds {len(order)} bundles, {world_size} ranks need one each"
        )
    return order[:world_size]


def engine_bundles(pg: PlacementGroup, cluster: Cluster, index: int, length: int) -> list[int]:
    """Engine ``index``'s ``length`` bundles: positions ``index*length ..`` in (node, GPU)
    order, all on one node (or on whole nodes held by this engine alone).

    Raises:
        ArgumentError: a bad index or length, or too few bundles.
        EngineAlignmentError: the engine's bundles straddle nodes it does not hold whole.
    """
    for name, value, low in (("index", index, 0), ("length", length, 1)):
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise ArgumentError(f"{name}: expected an int >= {low}, got {value!r}")
    slots = _ordered(pg, cluster).slots
    mine = slots[index * length : (index + 1) * length]
    if len(mine) < length:
        raise ArgumentError(
            f"index: engine {index} of {length} GPUs needs bundles up to "
            f"{(index + 1) * length - 1}, the group holds {len(slots)}"
        )
    nodes = [s.node_rank for s in mine]
    everywhere = [s.node_rank for s in slots]
    if len(set(nodes)) > 1 and any(nodes.count(n) != everywhere.count(n) for n in set(nodes)):
        raise EngineAlignmentError(
            f"engine {index} of {length} GPUs: its bundles sit on nodes {sorted(set(nodes))} "
            "without holding them whole (tensor parallelism would cross nodes); reserve the "
            "group with placement_ray.compat.openrlhf.placement_group(..., engine_size=...)",
            problems=[f"engine {index} straddles nodes"],
        )
    return [s.index for s in mine]
