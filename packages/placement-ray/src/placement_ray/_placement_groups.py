"""Placement groups: create (checked, pinned, with a timeout), then order bundles.

Bundle -> node comes from Ray's placement-group table. Bundle -> physical GPU is known
without any probe where the group holds every GPU of a node with whole-GPU bundles (the
node's bundles, by index, take its GPUs in physical order; workers are given explicit
visibility lists, so any fixed bijection is right). Elsewhere a tiny fractional task runs
in each bundle, one at a time per node (per-node waves reuse one warm worker per node),
and reads the GPU id Ray gave the bundle. Bundles are then ordered by
(node rank, physical GPU index) so nodes that share an IP are never interleaved.
"""

from __future__ import annotations

import logging
import time
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import ray
from ray.util.placement_group import (
    PlacementGroup,
    placement_group,
    placement_group_table,
    remove_placement_group,
)
from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

from placement_core import Node

from ._accelerators import (
    accelerator_amount,
    managed_by_ray,
    node_resource,
    share_options,
    whole_only,
)
from ._domain_label import domain_selector
from ._feasibility import check_feasible, format_resources, validate_bundles
from ._node_order import NODE_RANK_LABEL
from ._rayapi import alive_nodes, available_per_node, schedulable_resources, shown_resources
from ._text import clean as clean_text
from .errors import ArgumentError, ClusterError, PlacementGroupTimeoutError, ProbeError

if TYPE_CHECKING:
    from ._cluster import Cluster

__all__ = [
    "NODE_ID_LABEL",
    "BundleSlot",
    "OrderedPlacementGroup",
    "create_placement_group",
    "held_slots",
    "node_totals",
    "order_bundles",
    "pin_selectors",
    "probe_bundle_gpus",
    "remove_groups",
    "reserve_nodes",
    "wait_placement_group",
]

logger = logging.getLogger(__name__)

NODE_ID_LABEL = "ray.io/node-id"
"""Label every Ray node carries; pins a bundle to a node even where nodes share an IP."""


@dataclass(frozen=True, slots=True)
class BundleSlot:
    """Where one bundle of a placement group landed.

    Attributes:
        index: The bundle's index in the placement group.
        node_rank: Rank of its node in the cluster's node order.
        node_id: Ray node id of its node.
        gpu_ids: Physical indices (on that node) of the GPUs the bundle holds.
    """

    index: int
    node_rank: int
    node_id: str
    gpu_ids: tuple[int, ...]

    @property
    def gpu_id(self) -> int:
        """The bundle's first physical GPU index, or -1 for a bundle without GPUs."""
        return self.gpu_ids[0] if self.gpu_ids else -1


@dataclass(frozen=True, slots=True)
class OrderedPlacementGroup:
    """A ready placement group and its bundles ordered by (node rank, physical GPU).

    Attributes:
        pg: The Ray placement group.
        slots: Every bundle, ordered by (node rank, first physical GPU, bundle index).
        probed: How many bundles needed a probe task to learn their GPUs.
    """

    pg: PlacementGroup
    slots: tuple[BundleSlot, ...]
    probed: int = 0

    @property
    def bundle_indices(self) -> tuple[int, ...]:
        """Bundle indices in order: position r holds the bundle for rank r."""
        return tuple(s.index for s in self.slots)

    @property
    def node_ranks(self) -> tuple[int, ...]:
        """Node rank of each ordered bundle."""
        return tuple(s.node_rank for s in self.slots)

    @property
    def gpu_ids(self) -> tuple[int, ...]:
        """First physical GPU index of each ordered bundle (-1 where none)."""
        return tuple(s.gpu_id for s in self.slots)

    def remove(self) -> None:
        """Remove the placement group (its actors and tasks are killed by Ray)."""
        remove_placement_group(self.pg)


def node_totals(cluster: Cluster) -> list[dict[str, float]]:
    """Total schedulable resources of each node of the cluster, by rank.

    A node that is dead now counts as having nothing.
    """
    alive = {n["NodeID"]: n for n in alive_nodes()}
    return [
        schedulable_resources(dict(alive[n.node_id].get("Resources") or {}))
        if n.node_id in alive
        else {}
        for n in cluster.nodes
    ]


def held_slots(group: OrderedPlacementGroup | None) -> dict[tuple[int, int], tuple[int, int]]:
    """``(node, GPU id) -> (physical id, bundle)`` of a group (a spare's holds its node)."""
    if group is None:
        return {}
    return {(s.node_rank, s.gpu_id): (s.gpu_id, s.index) for s in group.slots}


def create_placement_group(
    cluster: Cluster,
    bundles: Sequence[Mapping[str, float]],
    *,
    strategy: str = "PACK",
    pin_to: Sequence[int | None] | None = None,
    name: str = "",
    lifetime: str | None = None,
    timeout_s: float | None = 60.0,
    check: bool = True,
    always_probe: bool = False,
) -> OrderedPlacementGroup:
    """Create a placement group, wait for it, and order its bundles.

    Args:
        cluster: The job's cluster view.
        bundles: One resource mapping per bundle, e.g. ``{"GPU": 1, "CPU": 1}``.
        strategy: ``PACK``, ``SPREAD``, ``STRICT_PACK`` or ``STRICT_SPREAD``.
        pin_to: Per bundle, the node rank it must land on (None: anywhere). Pins use the
            ``ray.io/node-id`` label, so they hold where nodes share an IP.
        name: Placement-group name (empty: anonymous).
        lifetime: None (dies with the job's driver) or ``"detached"``.
        timeout_s: How long to wait for the group; None waits forever (autoscaling).
        check: Check feasibility against per-node totals first (turn off where an
            autoscaler will add nodes).
        always_probe: Probe every GPU bundle, even where the order is known without.

    Returns:
        The ready group with its ordered bundles.

    Raises:
        ArgumentError: a malformed request.
        InfeasiblePlacementGroupError: the nodes can never hold the group (raised before
            anything is created).
        PlacementGroupTimeoutError: not placed within ``timeout_s``; the group is removed.
        ClusterError: Ray placed a bundle off its pinned node (old Ray); the group is
            removed.
        ProbeError: a probe task failed.
    """
    if timeout_s is not None and (
        isinstance(timeout_s, bool) or not isinstance(timeout_s, int | float) or not timeout_s > 0
    ):
        raise ArgumentError(f"timeout_s: expected seconds > 0 or None, got {timeout_s!r}")
    clean = validate_bundles(bundles, strategy, pin_to, cluster.num_nodes)
    if check:
        alive = {n["NodeID"] for n in alive_nodes()}
        dead = [n.rank for n in cluster.nodes if n.node_id not in alive]
        check_feasible(clean, node_totals(cluster), strategy=strategy, pins=pin_to, dead=dead)
    selectors = None if pin_to is None else pin_selectors(cluster, pin_to)
    started = time.perf_counter()
    pg = placement_group(
        clean, strategy=strategy, name=name, lifetime=lifetime, bundle_label_selector=selectors
    )
    wait_placement_group(pg, cluster, timeout_s=timeout_s, pins=pin_to)
    logger.debug(
        "placement group of %d bundles ready in %.3fs", len(clean), time.perf_counter() - started
    )
    try:
        if pin_to is not None:
            _check_pins(pg, cluster, pin_to)
        return order_bundles(pg, cluster, always_probe=always_probe)
    except BaseException:
        remove_placement_group(pg)
        raise


def reserve_nodes(
    cluster: Cluster,
    counts: Mapping[int, int],
    *,
    cpus_per_bundle: float = 0,
    resource: str | None = None,
    timeout_s: float | None = 60.0,
    name: str = "",
    kind: str = "node",
    lifetime: str | None = None,
) -> dict[int, OrderedPlacementGroup]:
    """One placement group per node, pinned to it: ``counts[rank]`` one-accelerator bundles.

    One group per node keeps a node loss local: Ray cannot move a lost node's pinned
    bundles, so a group holding them must be removed, which kills every worker in it. So
    ``launch`` holds each used node and each spare, and a slime layout with spares each of
    its nodes, in a group of its own.

    Args:
        cluster: The job's cluster view.
        counts: Node rank -> bundles to reserve there (nodes with 0 get no group).
        cpus_per_bundle: CPUs in each bundle.
        resource: The Ray resource each bundle holds one of; None: the node's own
            accelerators' (``GPU``, ``NPU``, ``HPU``, ...).
        timeout_s: Limit for all the groups together (None: wait forever).
        name: Name the groups ``<name>/<kind>-<rank>`` (empty: anonymous).
        kind: See ``name``.
        lifetime: None (dies with the driver) or ``"detached"``.

    Returns:
        Node rank -> its ready group, in node order.

    Raises:
        InfeasiblePlacementGroupError / PlacementGroupTimeoutError: as
            :func:`create_placement_group`; the groups made so far are removed.
    """
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    groups: dict[int, OrderedPlacementGroup] = {}
    try:
        for rank, count in sorted(counts.items()):
            if not count:
                continue
            bundle = {resource or node_resource(cluster.node(rank)): 1.0}
            if cpus_per_bundle:
                bundle["CPU"] = float(cpus_per_bundle)
            left = None if deadline is None else max(deadline - time.monotonic(), 1.0)
            groups[rank] = create_placement_group(
                cluster,
                [bundle] * count,
                pin_to=[rank] * count,
                timeout_s=left,
                name=f"{name}/{kind}-{rank}" if name else "",
                lifetime=lifetime,
            )
    except BaseException:
        for group in groups.values():
            group.remove()
        raise
    return groups


def remove_groups(cluster: Cluster, groups: Iterable[OrderedPlacementGroup]) -> None:
    """Remove placement groups and forget their shares; a group gone already is skipped."""
    for group in groups:
        cluster.shares.forget(group.pg.id.hex())
        try:
            group.remove()
        except Exception as exc:  # gone with its node already
            logger.debug("removing placement group %s: %s", group.pg.id.hex(), exc)


def _check_pins(pg: PlacementGroup, cluster: Cluster, pin_to: Sequence[int | None]) -> None:
    """Refuse a group whose bundles ignored their pins (Ray before ray-project/ray#55599)."""
    where = {int(k): str(v) for k, v in placement_group_table(pg)["bundles_to_node_id"].items()}
    wrong = [
        f"bundle {i} pinned to node {rank} landed on node {cluster.rank_of(where[i])}"
        for i, rank in enumerate(pin_to)
        if rank is not None and where.get(i) != cluster.node(rank).node_id
    ]
    if wrong:
        raise ClusterError(
            f"Ray {ray.__version__} did not honour bundle_label_selector pins: "
            + "; ".join(wrong[:5])
            + " (Ray releases before ray-project/ray#55599 ignore them; upgrade Ray)"
        )


def pin_selectors(cluster: Cluster, pin_to: Sequence[int | None]) -> list[dict[str, str]]:
    """Per bundle, the label selector that pins it to its node (``{}`` for no pin).

    The ``ray.io/node-id`` label where the node carries it, else its ``node-rank`` label
    when that label equals the node's rank; both hold where nodes share an IP.

    Raises:
        ClusterError: a pinned node carries neither label.
    """
    labels = {n["NodeID"]: dict(n.get("Labels") or {}) for n in alive_nodes()}
    selectors: list[dict[str, str]] = []
    for i, rank in enumerate(pin_to):
        if rank is None:
            selectors.append({})
            continue
        node_id = cluster.node(rank).node_id
        mine = labels.get(node_id, {})
        if mine.get(NODE_ID_LABEL) == node_id:
            selectors.append({NODE_ID_LABEL: node_id})
        elif mine.get(NODE_RANK_LABEL) == str(rank):
            selectors.append({NODE_RANK_LABEL: str(rank)})
        else:
            raise ClusterError(
                f"pin_to[{i}]: node {rank} ({node_id}) carries neither the {NODE_ID_LABEL!r} "
                f"label (Ray too old?) nor {NODE_RANK_LABEL!r}={rank}, so a bundle cannot be "
                "pinned to it"
            )
        selectors[-1].update(domain_selector(mine))
    return selectors


def wait_placement_group(
    pg: PlacementGroup,
    cluster: Cluster,
    *,
    timeout_s: float | None,
    pins: Sequence[int | None] | None = None,
) -> None:
    """Wait until ``pg`` is placed; on timeout remove it and explain why.

    Raises:
        PlacementGroupTimeoutError: listing each unplaced bundle (and the node it is
            pinned to) and, per node, its rank, labels and available / total resources;
            a dead node is called dead.
    """
    try:
        ray.get(pg.ready(), timeout=timeout_s)
        return
    except ray.exceptions.GetTimeoutError:
        pass
    table = placement_group_table(pg)
    remove_placement_group(pg)
    specs = dict(enumerate(dict(b) for b in pg.bundle_specs))
    available = available_per_node()
    alive = {n["NodeID"]: n for n in alive_nodes()}
    # Pending bundles are listed too, with a nil node id.
    placed = {int(k) for k, v in (table.get("bundles_to_node_id") or {}).items() if v in alive}
    unplaced = [(i, specs[i]) for i in sorted(specs) if i not in placed]
    nodes: dict[str, dict[str, Any]] = {}
    lines = []
    for node in cluster.nodes:
        info = alive.get(node.node_id)
        total = shown_resources(dict(info.get("Resources") or {})) if info else {}
        free_now = available.get(node.node_id, {})
        free = {k: free_now.get(k, 0.0) for k in total}
        labels = {
            k: v for k, v in dict((info or {}).get("Labels") or {}).items() if k != NODE_ID_LABEL
        }
        nodes[node.node_id] = {
            "rank": node.rank,
            "alive": info is not None,
            "labels": labels,
            "available": free,
            "total": total,
        }
        if info is None:
            lines.append(f"  node {node.rank} ({node.node_id[:12]}): dead (lost from the cluster)")
            continue
        lines.append(
            f"  node {node.rank} ({node.node_id[:12]}) labels {labels}: available "
            f"{format_resources(free)} of {format_resources(total)}"
        )
    pinned = {i: p for i, p in enumerate(pins or ()) if p is not None}
    shown = "\n".join(
        f"  bundle {i}: {format_resources(b)}"
        + (f", pinned to node {pinned[i]}" if i in pinned else "")
        for i, b in unplaced[:50]
    )
    if any(i in pinned for i, _ in unplaced):
        shown += (
            "\n  (a pinned bundle can only go to its own node: free resources on other "
            "nodes cannot hold it)"
        )
    if len(unplaced) > 50:
        shown += f"\n  ... and {len(unplaced) - 50} more"
    bundles = f"{len(specs)} bundle" + ("" if len(specs) == 1 else "s")
    raise PlacementGroupTimeoutError(
        f"placement group of {bundles} (strategy {table.get('strategy')}) was not "
        f"placed within {timeout_s:g}s and has been removed; other work holds the resources "
        f"it needs.\nunplaced bundles:\n{shown}\nnodes:\n" + "\n".join(lines),
        unplaced=unplaced,
        nodes=nodes,
    )


def order_bundles(
    pg: PlacementGroup,
    cluster: Cluster,
    *,
    always_probe: bool = False,
    timeout_s: float = 60.0,
) -> OrderedPlacementGroup:
    """Order a ready placement group's bundles by (node rank, physical GPU index).

    Args:
        pg: A placement group that is ready.
        cluster: The job's cluster view.
        always_probe: Probe every GPU bundle, even on nodes the group holds whole.
        timeout_s: Limit for the probe tasks.

    Raises:
        ClusterError: a bundle sits on a node outside the job's view.
        ProbeError: a probe task failed or timed out.
    """
    table = placement_group_table(pg)
    specs = {int(k): dict(v) for k, v in table["bundles"].items()}
    where = {int(k): str(v) for k, v in table["bundles_to_node_id"].items()}
    if len(where) != len(specs):
        raise ProbeError(
            f"placement group {pg.id.hex()} is not fully placed ({len(where)} of "
            f"{len(specs)} bundles have a node); wait for it first"
        )
    by_node: dict[str, list[int]] = defaultdict(list)
    for index in sorted(where):
        by_node[where[index]].append(index)
    alive = {n["NodeID"]: n for n in alive_nodes()}
    gpus: dict[int, tuple[int, ...]] = {}
    to_probe: dict[str, list[int]] = {}
    for node_id, indices in by_node.items():
        node = cluster.node(cluster.rank_of(node_id))
        resource = node_resource(node)
        amounts = [accelerator_amount(specs[i], resource) for i in indices]
        ray_gpus = accelerator_amount(alive.get(node_id, {}).get("Resources") or {}, resource)
        whole = all(a == int(a) for a in amounts) and sum(amounts) == ray_gpus
        if not managed_by_ray(resource):  # Ray keeps no ids: number the devices in order
            gpus.update(_in_order(node, indices, amounts))
            continue
        if whole and not always_probe and len(node.accelerators) == int(ray_gpus):
            gpus.update(_in_order(node, indices, amounts))
            continue
        for i, amount in zip(indices, amounts, strict=True):
            if amount == 0:
                gpus[i] = ()
        wanted = [i for i, a in zip(indices, amounts, strict=True) if a > 0]
        if wanted:
            to_probe[node_id] = wanted
    if to_probe:
        gpus.update(probe_bundle_gpus(pg, to_probe, cluster, specs=specs, timeout_s=timeout_s))
    slots = [
        BundleSlot(index=i, node_rank=cluster.rank_of(where[i]), node_id=where[i], gpu_ids=gpus[i])
        for i in sorted(specs)
    ]
    slots.sort(key=lambda s: (s.node_rank, s.gpu_ids or (-1,), s.index))
    return OrderedPlacementGroup(
        pg=pg, slots=tuple(slots), probed=sum(len(v) for v in to_probe.values())
    )


def _in_order(
    node: Node, indices: Sequence[int], amounts: Sequence[float]
) -> dict[int, tuple[int, ...]]:
    """Bundle -> the node's devices handed out in bundle order (a share counts as one)."""
    ids = list(node.accelerator_ids)
    found: dict[int, tuple[int, ...]] = {}
    for i, amount in zip(indices, amounts, strict=True):
        count = 0 if amount == 0 else max(1, int(amount))
        if count > len(ids):
            raise ProbeError(
                f"bundles on node {node.rank} ask for more {node_resource(node)} than its "
                f"{len(node.accelerators)} devices"
            )
        found[i], ids = tuple(ids[:count]), ids[count:]
    return found


def _read_gpu_ids(resource: str) -> list[str]:
    return [str(g) for g in ray.get_runtime_context().get_accelerator_ids().get(resource, [])]


_probe_task = ray.remote(num_cpus=0, max_retries=0)(_read_gpu_ids)


def probe_bundle_gpus(
    pg: PlacementGroup,
    bundles_by_node: Mapping[str, Sequence[int]],
    cluster: Cluster,
    *,
    specs: Mapping[int, Mapping[str, float]] | None = None,
    timeout_s: float = 60.0,
) -> dict[int, tuple[int, ...]]:
    """Learn the physical GPU ids of bundles with tiny tasks, in per-node waves.

    Each node runs one probe at a time (so one warm worker serves all its bundles) while
    all nodes run in parallel. A bundle of one GPU or less is probed with a 0.0001-GPU
    task, so it works even while the bundle is partly in use; a bundle of k whole GPUs
    needs all k free.

    Args:
        pg: A ready placement group.
        bundles_by_node: Ray node id -> bundle indices on that node to probe.
        cluster: The job's cluster view (maps GPU UUIDs to indices where Ray reports UUIDs).
        specs: Bundle index -> resources (read from Ray when omitted).
        timeout_s: Limit for all probes together.

    Returns:
        Bundle index -> physical GPU indices.

    Raises:
        ProbeError: a probe failed, timed out, or returned an id that is not a GPU index.
    """
    if specs is None:
        specs = {int(k): dict(v) for k, v in placement_group_table(pg)["bundles"].items()}
    queues = {node: list(indices) for node, indices in bundles_by_node.items() if indices}
    inflight: dict[Any, tuple[str, int]] = {}

    def submit(node_id: str) -> None:
        index = queues[node_id].pop(0)
        resource = node_resource(cluster.node(cluster.rank_of(node_id)))
        amount = accelerator_amount(specs[index], resource)
        request = amount if amount > 1 or whole_only(resource) else 0.0001
        ref = _probe_task.options(
            **share_options(resource, request),
            scheduling_strategy=PlacementGroupSchedulingStrategy(
                placement_group=pg, placement_group_bundle_index=index
            ),
        ).remote(resource)
        inflight[ref] = (node_id, index)

    for node_id in queues:
        submit(node_id)
    deadline = time.monotonic() + timeout_s
    found: dict[int, tuple[int, ...]] = {}
    while inflight:
        remaining = deadline - time.monotonic()
        done, _ = ray.wait(list(inflight), num_returns=1, timeout=max(remaining, 0.0))
        if not done:
            late = sorted(i for _, i in inflight.values())
            for ref in inflight:
                ray.cancel(ref, force=True)
            raise ProbeError(
                f"probe tasks for bundles {late} did not finish within {timeout_s:g}s "
                "(are those nodes overloaded, or the bundles' GPUs fully used?)"
            )
        for ref in done:
            node_id, index = inflight.pop(ref)
            try:
                raw = ray.get(ref)
            except ray.exceptions.RayError as exc:
                raise ProbeError(
                    f"probe of bundle {index} on node {node_id} failed: {clean_text(str(exc))}"
                ) from exc
            found[index] = _to_indices(raw, node_id, index, cluster)
            if queues[node_id]:
                submit(node_id)
    return found


def _to_indices(raw: Sequence[str], node_id: str, index: int, cluster: Cluster) -> tuple[int, ...]:
    node = cluster.node(cluster.rank_of(node_id))
    by_uuid = {a.uuid: a.index for a in node.accelerators if a.uuid}
    ids = []
    for value in raw:
        if value.isdigit():
            ids.append(int(value))
        elif value in by_uuid:
            ids.append(by_uuid[value])
        else:
            raise ProbeError(
                f"bundle {index} on node {node.rank} reports GPU {value!r}, which is neither "
                f"an index nor the UUID of one of the node's GPUs"
            )
    if not ids:
        raise ProbeError(f"bundle {index} on node {node.rank} holds GPUs but its probe saw none")
    return tuple(sorted(ids))
