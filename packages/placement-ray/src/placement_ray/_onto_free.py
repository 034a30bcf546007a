"""Recovery onto free capacity of a shared cluster (``launch(..., recover_onto_free=True)``).

A shared job (``share_cluster=True``) whose lost node has no compatible spare may take
its ranks to a node of the cluster that no lease and no foreign Ray work holds:

1. :func:`choose_free`: lost nodes in rank order, each takes the lowest-ranked live node
   outside the job's view on which every accelerator the lost node held (same index,
   type and model) is free (pure);
2. :func:`extended_plan`: that node joins the plan as a spare after the job's nodes
   (narrowed to those accelerators, as the lost node is), so core's ``replan`` makes the
   moves with its own rules (node groups, NVLink) (pure);
3. :func:`take_free`: the ledger moves the lease (the lost nodes' accelerators out, the
   new ones in; all or nothing: capacity taken meanwhile refuses it), the job's view
   gains the node, and a placement group pinned to it holds the accelerators before any
   rank moves.

Without the opt-in, a ``NoSpareNodeError`` of a shared job says when free capacity
could have taken the lost nodes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from placement_core import Inventory, Node, NoSpareError, Plan, Replan, replan

from ._free_view import _planned_gpus, ray_taken
from ._lease_state import LeaseBook, Slot
from ._leases import _available
from ._ledger import ledger_call
from ._placement_groups import OrderedPlacementGroup
from ._rayapi import alive_nodes
from .errors import NoSpareNodeError

if TYPE_CHECKING:
    from ._leases import SharedLease
    from ._recover import RecoveringJob

__all__ = ["TakenFree", "choose_free", "extended_plan", "free_for", "take_free"]

_Kind = tuple[int, str, str | None]


@dataclass(frozen=True, slots=True)
class TakenFree:
    """Free nodes a recovery leased: the job's new node rank -> Ray node id."""

    nodes: Mapping[int, str]


def _kinds(node: Node, indices: Sequence[int] | None = None) -> set[_Kind]:
    keep = None if indices is None else set(indices)
    return {
        (a.index, a.type, a.model) for a in node.accelerators if keep is None or a.index in keep
    }


def choose_free(
    lost: Mapping[int, Node], candidates: Sequence[Node], free: Mapping[str, Sequence[int]]
) -> dict[int, Node]:
    """Lost node rank -> the free node that takes it (lost nodes without one are left out).

    Args:
        lost: Lost node rank -> its node as the job held it (its accelerators those the
            job used there).
        candidates: Live nodes outside the job, in cluster rank order.
        free: Node id -> indices of its accelerators no lease and no Ray work holds.
    """
    chosen: dict[int, Node] = {}
    taken: set[str] = set()
    for rank in sorted(lost):
        wanted = _kinds(lost[rank])
        for node in candidates:
            if node.node_id in taken:
                continue
            if wanted <= _kinds(node, free.get(node.node_id, ())):
                chosen[rank] = node
                taken.add(node.node_id)
                break
    return chosen


def _held_on(plan: Plan, rank: int) -> Node:
    """The plan's node ``rank`` with only the accelerators the plan uses on it."""
    used = {g for node, g in _planned_gpus(plan) if node == rank}
    return _narrow(plan.inventory.node(rank), rank, used)


def _narrow(node: Node, rank: int, keep: set[int]) -> Node:
    return replace(
        node,
        rank=rank,
        accelerators=tuple(a for a in node.accelerators if a.index in keep),
        links=tuple(link for link in node.links if link[0] in keep and link[1] in keep),
    )


def extended_plan(plan: Plan, chosen: Mapping[int, Node]) -> Plan:
    """The plan with each chosen free node appended as a spare (ranks after the plan's),
    narrowed to the accelerators its lost node held, and each lost node narrowed alike."""
    count = plan.inventory.num_nodes
    nodes = list(plan.inventory.nodes)
    added = []
    for i, (lost, node) in enumerate(sorted(chosen.items())):
        held = _held_on(plan, lost)
        nodes[lost] = held
        added.append(_narrow(node, count + i, {a.index for a in held.accelerators}))
    config = plan.config.model_copy(
        update={
            "num_nodes": count + len(added),
            "spare_input": (*plan.config.spare_nodes, *range(count, count + len(added))),
        }
    )
    inventory = Inventory(tuple(nodes + added), plan.inventory.warnings, plan.inventory.shortfalls)
    return Plan(
        config, inventory, plan.components, plan.warnings, True, plan.lost_nodes, plan.moves
    )


def _book(lease: SharedLease) -> LeaseBook:
    book = LeaseBook.from_record(ledger_call(lease.ledger, "snapshot"))
    book.foreign = ray_taken(lease.whole, book, _available())
    return book


def free_for(job: RecoveringJob, lost: Sequence[int], book: LeaseBook) -> dict[int, Node]:
    """:func:`choose_free` for the job's lost nodes on the cluster now."""
    lease: SharedLease = job.reservation.lease  # type: ignore[assignment]
    alive = {n["NodeID"] for n in alive_nodes()}
    mine = {n.node_id for n in job.cluster.nodes}
    candidates = [n for n in lease.whole.nodes if n.node_id in alive and n.node_id not in mine]
    held = {rank: _held_on(job.plan, rank) for rank in lost}
    return choose_free(held, candidates, book.free())


def take_free(
    job: RecoveringJob, lost: Sequence[int], error: NoSpareNodeError, *, timeout_s: float | None
) -> tuple[Replan, TakenFree]:
    """Replan the lost nodes onto free capacity, lease and reserve it (see the module).

    Raises:
        NoSpareNodeError: ``error`` when the job is not shared; with a hint when free
            capacity could take the lost nodes but the job did not opt in; when no free
            node fits, or the ledger refused (taken meanwhile). Nothing changed.
        InfeasiblePlacementGroupError / PlacementGroupTimeoutError: the new nodes'
            groups could not be placed; the lease no longer holds the lost nodes, the
            rest is as it was.
    """
    lease: SharedLease | None = job.reservation.lease  # type: ignore[assignment]
    if lease is None or not hasattr(lease, "whole"):
        raise error
    book = _book(lease)
    chosen = free_for(job, error.lost, book)
    if not lease.onto_free:
        if chosen and len(chosen) == len(error.lost):
            raise _again(error, _HINT)
        raise error
    if len(chosen) != len(error.lost):
        short = sorted(set(error.lost) - set(chosen))
        raise _again(
            error,
            f"; no free node of the cluster has the accelerators of node(s) {short} "
            "free either (recover_onto_free)",
        )
    try:
        result = replan(extended_plan(job.plan, chosen), lost)
    except NoSpareError as exc:
        raise _again(error, f"; on free capacity of the cluster: {exc.reason}") from exc
    count = job.plan.inventory.num_nodes
    new = {r: result.plan.inventory.node(r) for r in range(count, result.plan.inventory.num_nodes)}
    slots = [Slot(n.node_id, a.index) for n in new.values() for a in n.accelerators]
    drop = [job.cluster.node(r).node_id for r in lost]
    if not ledger_call(lease.ledger, "move", lease.job, drop, slots, book.foreign):
        raise _again(error, "; the free capacity found was taken meanwhile (recover_onto_free)")
    planned = [(n, g) for n, g in _planned_gpus(result.plan) if n in new]
    _reserve(job, lease, new, planned, timeout_s)
    kept = {k: v for k, v in job.reservation.gpu_map.items() if k[0] not in lost}
    lease.cluster = job.cluster
    lease.confirm(kept, [r for r in job.reservation.spares if r not in lost])
    return result, TakenFree({r: n.node_id for r, n in new.items()})


def _whole(lease: SharedLease, node: Node) -> Node:
    """The cluster's record of ``node`` (every accelerator: Ray picks which free ones the
    job's group gets), at the job's rank for it."""
    return replace(lease.whole.node(lease.whole.rank_of(node.node_id)), rank=node.rank)


def _reserve(
    job: RecoveringJob,
    lease: SharedLease,
    new: Mapping[int, Node],
    planned: Sequence[tuple[int, int]],
    timeout_s: float | None,
) -> dict[int, OrderedPlacementGroup]:
    """The job's view grown by the new nodes, a group pinned to each; on failure the view
    and the lease lose them again (the lost nodes stay out of the lease: they are gone)."""
    before = (job.cluster.inventory, job.cluster._rank_of)
    grown = (*job.cluster.nodes, *(_whole(lease, n) for n in new.values()))
    job.cluster.inventory = replace(job.cluster.inventory, nodes=grown)
    job.cluster._rank_of = {n.node_id: n.rank for n in grown}
    try:
        return job.reservation.add_nodes(
            {r: len(n.accelerators) for r, n in new.items()},
            planned,
            timeout_s=timeout_s,
            name=getattr(job, "name", None) or "",
        )
    except BaseException:
        job.cluster.inventory, job.cluster._rank_of = before
        ledger_call(lease.ledger, "move", lease.job, [n.node_id for n in new.values()], [], {})
        raise


_HINT = (
    "; free capacity of the shared cluster could take them: launch with "
    "recover_onto_free=True to recover onto it"
)


def _again(error: NoSpareNodeError, more: str) -> NoSpareNodeError:
    return NoSpareNodeError(error.message + more, lost=error.lost, needs=error.needs)
