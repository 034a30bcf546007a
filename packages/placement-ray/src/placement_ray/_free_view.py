"""Planning against what is free: a job's need, the accelerators taken, the free view.

* A job's **need** is its config planned on the whole cluster (the first ``num_nodes``
  nodes): accelerators per node, in its node order, each spare node counting whole.
* **Taken** are the accelerators leased by other jobs, those Ray holds for work that is
  not a lease (other placement groups, actors asking for GPUs: counted per node from
  Ray's free resources, the highest indices marked), and those the node snapshots show
  running processes (as of the ``Cluster``'s discovery).
* The **free view** is a ``Cluster`` of the nodes ``choose_nodes`` picks for the need,
  renumbered ``0..n-1`` in cluster rank order, each keeping only its free accelerators;
  the config is planned on it as on any cluster (node order rules, topology-aware GPU
  choice), so its plan uses free accelerators only.
"""

from __future__ import annotations

import os
import weakref
from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any

from placement_core import ClusterConfig, Inventory, Node, Plan, load_config, plan

from ._accelerators import node_resource
from ._cluster import Cluster
from ._lease_state import LeaseBook, NodeCapacity, Slot, choose_nodes
from .errors import ArgumentError

__all__ = [
    "capacities",
    "config_of",
    "free_view",
    "is_partial",
    "need_of",
    "plan_slots",
    "ray_taken",
    "widened",
]

_PARTIAL: weakref.WeakSet[Cluster] = weakref.WeakSet()


def is_partial(cluster: Cluster) -> bool:
    """Whether ``cluster`` is a free view (some of the nodes only): what is reserved on it
    must be pinned to its nodes."""
    return cluster in _PARTIAL


def config_of(
    source: Plan | ClusterConfig | Mapping[str, Any] | str | os.PathLike[str],
) -> ClusterConfig:
    """The config to plan on the free view (a plan is planned again from its config).

    Raises:
        ArgumentError: a plan built from assignments (it names fixed nodes).
    """
    if isinstance(source, Plan):
        if source.assigned:
            raise ArgumentError(
                "config_or_plan: a plan built from assignments names fixed nodes; with "
                "share_cluster=True pass the config, which is planned on the free nodes"
            )
        return source.config
    if isinstance(source, ClusterConfig):
        return source
    return load_config(source)


def capacities(cluster: Cluster) -> list[NodeCapacity]:
    """The ledger's record of every node of the cluster view."""
    return [
        NodeCapacity(n.node_id, n.rank, tuple((a.index, a.uuid) for a in n.accelerators))
        for n in cluster.nodes
    ]


def need_of(
    config: ClusterConfig, cluster: Cluster, colocate: Iterable[Iterable[str]]
) -> tuple[int, ...]:
    """Accelerators per node the config takes on the cluster's first ``num_nodes`` nodes.

    Raises:
        ArgumentError: the cluster has fewer nodes than the config declares.
    """
    if config.num_nodes > cluster.num_nodes:
        raise ArgumentError(
            f"cluster.num_nodes: the config declares {config.num_nodes} nodes, the cluster "
            f"has {cluster.num_nodes}"
        )
    whole = plan(config, Inventory(cluster.nodes[: config.num_nodes]), colocate=colocate)
    counts = [0] * config.num_nodes
    for node, _ in _planned_gpus(whole):
        counts[node] += 1
    for rank in config.spare_nodes:
        counts[rank] = len(whole.inventory.node(rank).accelerators)
    return tuple(counts)


def _planned_gpus(the_plan: Plan) -> set[tuple[int, int]]:
    from ._request import placement_kind

    return {
        (p.node_rank, g)
        for placements in the_plan.components.values()
        for p in placements
        if placement_kind(p) == "gpu"
        for g in p.hardware_ranks
    }


def ray_taken(
    cluster: Cluster, book: LeaseBook, available: Mapping[str, Mapping[str, float]]
) -> dict[str, tuple[int, ...]]:
    """Accelerators taken by Ray work that is not a lease, and busy in the snapshots.

    Per node, what Ray holds beyond the leased accelerators counts as taken by others
    (the highest free indices are marked: Ray does not say which); every accelerator of a
    node Ray no longer lists alive is taken. A lease counts whether
    or not its groups are reserved yet: counting only reserved ones would take a lease
    reserved a moment before it is confirmed twice, and the next job would skip its node.

    Args:
        cluster: The job's view (its inventory's snapshots).
        book: The ledger's book.
        available: Ray's free resources per live node id.
    """
    leased: dict[str, set[int]] = {}
    for lease in book.leases.values():
        for slot in lease.slots:
            leased.setdefault(slot.node_id, set()).add(slot.accelerator)
    out: dict[str, tuple[int, ...]] = {}
    for node in cluster.nodes:
        if node.node_id not in available:  # Ray lists live nodes only: a lost one offers none
            if node.accelerators:
                out[node.node_id] = tuple(a.index for a in node.accelerators)
            continue
        mine = leased.get(node.node_id, set())
        busy = {a.index for a in node.accelerators if a.processes} - mine
        total = len(node.accelerators)
        # Ray leaves a resource with nothing available out of the node's entry.
        free = available[node.node_id].get(node_resource(node), 0.0)
        by_ray = max(0, total - int(free + 1e-6) - len(mine))
        spare = [a.index for a in node.accelerators if a.index not in mine | busy]
        marked = set(spare[len(spare) - by_ray :]) if by_ray else set()
        if busy | marked:
            out[node.node_id] = tuple(sorted(busy | marked))
    return out


def free_view(
    cluster: Cluster, need: tuple[int, ...], book: LeaseBook, share: float = 1.0
) -> Cluster | None:
    """The job's view of the nodes chosen for ``need``, their free accelerators only
    (None when the need does not fit now)."""
    free = book.free(share)
    ours = {n.node_id: free.get(n.node_id, []) for n in cluster.nodes}
    chosen = choose_nodes(need, share, ours, {n.node_id: n.rank for n in cluster.nodes})
    if chosen is None:
        return None
    nodes = [
        _narrowed(cluster.node(cluster.rank_of(node_id)), rank, ours[node_id])
        for rank, node_id in enumerate(chosen)
    ]
    return _subset(
        cluster, Inventory(tuple(nodes), cluster.inventory.warnings, cluster.inventory.shortfalls)
    )


def widened(view: Cluster, whole: Cluster) -> Cluster:
    """The free view's nodes with every accelerator of theirs: the view a launch runs on.

    The plan is made on the free accelerators, but which free ones Ray gives a
    reservation is Ray's choice (the plan's ids are mapped onto them), and Ray's other
    work is counted per node, not by index: the launch's view must know every
    accelerator its workers may be given.
    """
    nodes = tuple(replace(whole.node(whole.rank_of(n.node_id)), rank=n.rank) for n in view.nodes)
    return _subset(view, Inventory(nodes, view.inventory.warnings, view.inventory.shortfalls))


def _narrowed(node: Node, rank: int, free: Iterable[int]) -> Node:
    keep = set(free)
    return replace(
        node,
        rank=rank,
        accelerators=tuple(a for a in node.accelerators if a.index in keep),
        links=tuple(link for link in node.links if link[0] in keep and link[1] in keep),
    )


def _subset(cluster: Cluster, inventory: Inventory) -> Cluster:
    """``cluster`` seeing only ``inventory``'s nodes (``Cluster._seeing``), marked partial."""
    view = cluster._seeing(inventory)
    _PARTIAL.add(view)
    return view


def plan_slots(the_plan: Plan) -> tuple[Slot, ...]:
    """The accelerators a plan on a free view uses: its GPUs, and every spare node whole."""
    keys = _planned_gpus(the_plan)
    for rank in the_plan.config.spare_nodes:
        keys |= {(rank, a.index) for a in the_plan.inventory.node(rank).accelerators}
    return tuple(Slot(the_plan.inventory.node(n).node_id, g, 1.0) for n, g in sorted(keys))
