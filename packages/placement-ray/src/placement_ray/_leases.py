"""The client side of the lease ledger: acquire (queueing), confirm, release, list.

``launch(..., share_cluster=True)`` goes through :func:`launch_shared`: the job's need is
its config planned on the whole cluster; it plans on the free view (``_free_view``) and
asks the ledger for those accelerators, all at once; when they are not granted it waits in
the ledger's queue (woken by every change of the book, and at least every
``_RECHECK_S`` for Ray work outside the ledger), plans again, asks again, up to
``queue_timeout_s``. Once Ray reserved the groups the lease is confirmed with the physical
accelerators Ray chose; ``Launch.shutdown`` releases it, and the ledger reclaims it when
the driver dies.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import ray

from placement_core import ClusterConfig, PlacementError, plan

from ._cluster import Cluster
from ._free_view import (
    capacities,
    config_of,
    free_view,
    need_of,
    plan_slots,
    ray_taken,
    widened,
)
from ._lease_state import LeaseBook, Request, Slot
from ._ledger import find_ledger, ledger_actor, ledger_call
from .errors import ArgumentError, ClusterError, LeaseError, QueueTimeoutError

if TYPE_CHECKING:
    from placement_core import Plan

    from ._launch import Launch

__all__ = [
    "LeaseRecord",
    "QueueRecord",
    "SharedLease",
    "acquire_lease",
    "acquire_need",
    "first_free",
    "launch_shared",
    "lease_table",
    "leases",
    "ledger_nodes",
]

logger = logging.getLogger(__name__)

_RECHECK_S = 2.0
_OWN = frozenset(
    {"config_or_plan", "actors", "cluster", "colocate", "share_cluster", "priority"}
    | {"queue_timeout_s", "recover_onto_free"}
)


@dataclass(frozen=True, slots=True)
class LeaseRecord:
    """One leased accelerator: its job, node (id and cluster rank), index, UUID, share,
    the job's priority and since when (seconds since the epoch)."""

    job: str
    node_id: str
    node_rank: int
    accelerator: int
    uuid: str | None
    share: float
    priority: int
    since: float


@dataclass(frozen=True, slots=True)
class QueueRecord:
    """One waiting job: queue position (1 first), priority, accelerators per node it
    needs, since when it waits."""

    position: int
    job: str
    priority: int
    need: tuple[int, ...]
    since: float


class SharedLease:
    """A granted lease of one job: its free view and the plan made on it.

    Attributes:
        job: The job's name (the ``Cluster``'s ``job``).
        cluster: The free view the job runs on (nodes ``0..n-1`` of the chosen ones).
        plan: The config planned on the free view (None for a slime layout, which lays
            itself out on the view).
        whole: The job's view of the whole cluster (every node, as first discovered).
        onto_free: Whether a recovery without a compatible spare may lease free
            capacity of the cluster (``launch(..., recover_onto_free=True)``).
    """

    def __init__(
        self, ledger: Any, job: str, cluster: Cluster, the_plan: Any, whole: Cluster | None = None
    ) -> None:
        self._ledger = ledger
        self.job = job
        self.cluster = cluster
        self.plan = the_plan
        self.whole = cluster if whole is None else whole
        self.onto_free = False
        self.released = False

    @property
    def ledger(self) -> Any:
        """The cluster's ledger actor."""
        return self._ledger

    def confirm(self, gpu_map: Mapping[tuple[int, int], int], spare_ranks: Iterable[int]) -> None:
        """Record the physical accelerators Ray reserved (``Launch.gpu_map``, spares whole)."""
        keys = {(node, physical) for (node, _), physical in gpu_map.items()}
        for rank in spare_ranks:
            keys |= {(rank, a.index) for a in self.cluster.node(rank).accelerators}
        self.confirm_held(keys)

    def confirm_held(self, held: Iterable[tuple[int, int]]) -> None:
        """Record the accelerators Ray holds for the job, ``(view node rank, physical id)``."""
        slots = [Slot(self.cluster.node(n).node_id, g, 1.0) for n, g in sorted(set(held))]
        ledger_call(self._ledger, "confirm", self.job, slots)

    def release(self) -> None:
        """End the lease (idempotent); the queue's first waiter that fits starts."""
        if self.released:
            return
        self.released = True
        try:
            ledger_call(self._ledger, "release", self.job, timeout_s=30)
        except (ray.exceptions.RayError, ConnectionError, ClusterError) as exc:  # Ray is gone
            logger.warning("job %s: could not release its lease: %s", self.job, exc)


def _check_wait(priority: object, queue_timeout_s: object) -> None:
    if isinstance(priority, bool) or not isinstance(priority, int) or priority < 0:
        raise LeaseError(f"priority: expected an int >= 0 (higher goes first), got {priority!r}")
    if queue_timeout_s is not None and (
        isinstance(queue_timeout_s, bool)
        or not isinstance(queue_timeout_s, int | float)
        or not queue_timeout_s >= 0
    ):
        raise ArgumentError(
            "queue_timeout_s: expected seconds >= 0 or None (wait forever), got "
            f"{queue_timeout_s!r}"
        )


def _available() -> dict[str, dict[str, float]]:
    from ray._private import state

    per_node = state.available_resources_per_node()  # type: ignore[no-untyped-call]
    return {node: dict(res) for node, res in per_node.items()}


def acquire_lease(
    cluster: Cluster,
    config: ClusterConfig,
    colocate: Iterable[Iterable[str]] = (),
    *,
    priority: int = 0,
    queue_timeout_s: float | None = 600.0,
) -> SharedLease:
    """Plan ``config`` on the cluster's free accelerators and lease them, waiting in the
    queue up to ``queue_timeout_s`` (see :func:`acquire_need`)."""
    _check_wait(priority, queue_timeout_s)
    groups = [list(g) for g in colocate]

    def on_view(view: Cluster) -> tuple[Plan, tuple[Slot, ...]] | None:
        try:
            the_plan = plan(config, view.inventory, colocate=groups)
        except PlacementError as exc:  # the free accelerators cannot hold the rules
            logger.debug("job %s: no plan on the free view: %s", cluster.job, exc)
            return None
        return the_plan, plan_slots(the_plan)

    return acquire_need(
        cluster,
        need_of(config, cluster, groups),
        on_view,
        priority=priority,
        queue_timeout_s=queue_timeout_s,
    )


def first_free(need: tuple[int, ...]) -> Callable[[Cluster], tuple[None, tuple[Slot, ...]]]:
    """A planner for :func:`acquire_need`: on each chosen node, its lowest free indices."""

    def on_view(view: Cluster) -> tuple[None, tuple[Slot, ...]]:
        slots = tuple(
            Slot(n.node_id, a.index)
            for n, count in zip(view.nodes, need, strict=True)
            for a in n.accelerators[:count]
        )
        return None, slots

    return on_view


def acquire_need(
    cluster: Cluster,
    need: tuple[int, ...],
    on_view: Callable[[Cluster], tuple[Any, tuple[Slot, ...]] | None],
    *,
    priority: int = 0,
    queue_timeout_s: float | None = 600.0,
) -> SharedLease:
    """Lease ``need`` (accelerators per node, in the job's node order), waiting in the
    queue up to ``queue_timeout_s``.

    ``on_view(free view)`` plans on the nodes chosen for the need: it returns what it
    planned and the accelerators that takes, or None when the free accelerators cannot
    hold it (the job waits).

    Raises:
        LeaseError / JobNameTakenError: bad priority, or the job's name is taken.
        LedgerVersionError: the cluster's ledger speaks another version.
        QueueTimeoutError: the accelerators did not come free in time.
    """
    _check_wait(priority, queue_timeout_s)
    ledger = ledger_actor()
    ledger_call(ledger, "register", capacities(cluster))
    owner = ray.get_runtime_context().get_job_id()
    deadline = math.inf if queue_timeout_s is None else time.monotonic() + queue_timeout_s
    said = False
    while True:
        book = LeaseBook.from_record(ledger_call(ledger, "snapshot"))
        book.foreign = ray_taken(cluster, book, _available())
        view = free_view(cluster, need, book)
        planned = on_view(view) if view is not None else None
        slots = planned[1] if planned is not None else ()
        request = Request(cluster.job, owner, priority, slots, need)
        granted, change = ledger_call(ledger, "acquire", request, book.foreign, time.time())
        if granted and planned is not None and view is not None:
            return SharedLease(ledger, cluster.job, view, planned[0], cluster)
        if granted:  # it needs no accelerator, yet did not plan: the config's own error
            ledger_call(ledger, "release", cluster.job)
            raise ArgumentError(
                f"config_or_plan: it needs no accelerator but cannot be planned on the "
                f"cluster's nodes: {need}"
            )
        left = deadline - time.monotonic()
        if left <= 0:
            ledger_call(ledger, "release", cluster.job)
            raise _timed_out(cluster, need, priority, queue_timeout_s, ledger)
        if not said:
            logger.info("job %s waits in the lease queue for %s", cluster.job, list(need))
            said = True
        ledger_call(ledger, "wait_change", change, min(left, _RECHECK_S))


def _when(since: float) -> str:
    return datetime.fromtimestamp(since, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _timed_out(
    cluster: Cluster, need: tuple[int, ...], priority: int, timeout: float | None, ledger: Any
) -> QueueTimeoutError:
    table = lease_table(cluster)
    per_job: dict[str, dict[int, list[int]]] = {}
    since: dict[str, float] = {}
    for r in table["leases"]:
        per_job.setdefault(r.job, {}).setdefault(r.node_rank, []).append(r.accelerator)
        since[r.job] = r.since
    holders = [
        f"job {job!r}: "
        + "; ".join(f"node {n} accelerators {sorted(g)}" for n, g in sorted(nodes.items()))
        + f" (since {_when(since[job])})"
        for job, nodes in sorted(per_job.items())
    ]
    shown = "\n".join(f"  {h}" for h in holders) or "  (no lease: Ray work outside the ledger)"
    return QueueTimeoutError(
        f"job {cluster.job!r} waited {timeout:g}s in the lease queue (priority {priority}) for "
        f"{list(need)} accelerators on {len(need)} node(s), in its node order; they are held:\n"
        f"{shown}\nraise queue_timeout_s, the priority, or end a job",
        job=cluster.job,
        need=need,
        holders=holders,
    )


def lease_table(cluster: Cluster | None = None) -> dict[str, list[Any]]:
    """``{"leases": [LeaseRecord...], "queue": [QueueRecord...]}`` of the connected cluster
    (empty when no job started a ledger). Node ranks are the cluster view's where it knows
    the node, else the ledger's."""
    ledger = find_ledger()
    if ledger is None:
        return {"leases": [], "queue": []}
    book = LeaseBook.from_record(ledger_call(ledger, "snapshot"))
    ranks = book.ranks()
    if cluster is not None:
        ranks.update((n.node_id, n.rank) for n in cluster.nodes)
    uuids = {(n.node_id, i): u for n in book.nodes.values() for i, u in n.accelerators}
    records = [
        LeaseRecord(
            lease.job,
            s.node_id,
            ranks.get(s.node_id, -1),
            s.accelerator,
            uuids.get((s.node_id, s.accelerator)),
            s.share,
            lease.priority,
            lease.since,
        )
        for lease in book.leases.values()
        for s in lease.slots
    ]
    records.sort(key=lambda r: (r.node_rank, r.accelerator, r.job))
    queue = [
        QueueRecord(i, w.job, w.priority, w.need, w.since)
        for i, w in enumerate(book.queue(), start=1)
    ]
    return {"leases": records, "queue": queue}


def ledger_nodes() -> list[tuple[int, str, tuple[int, ...]]]:
    """``(rank, node id, accelerator indices)`` of every node the ledger knows, by rank
    (empty when no job started a ledger)."""
    ledger = find_ledger()
    if ledger is None:
        return []
    book = LeaseBook.from_record(ledger_call(ledger, "snapshot"))
    return sorted(
        (n.rank, n.node_id, tuple(i for i, _ in n.accelerators)) for n in book.nodes.values()
    )


def leases(cluster: Cluster) -> list[LeaseRecord]:
    """Every leased accelerator of the cluster, one record per accelerator.

    Args:
        cluster: Any job's view of the cluster (its node ranks name the nodes).

    Returns:
        ``LeaseRecord`` s (``job``, ``node_id``, ``node_rank``, ``accelerator``, ``uuid``,
        ``share``, ``priority``, ``since``), by node rank and accelerator.
    """
    if not isinstance(cluster, Cluster):
        raise ArgumentError(f"cluster: expected a placement_ray.Cluster, got {cluster!r}")
    records: list[LeaseRecord] = lease_table(cluster)["leases"]
    return records


def launch_shared(launch: Callable[..., Launch], given: dict[str, Any]) -> Launch:
    """``launch`` on a shared cluster: lease (queueing), launch on the free view, confirm.

    ``given`` holds ``launch``'s own arguments.
    """
    if given["detached"]:
        raise ArgumentError(
            "share_cluster: a detached launch outlives its driver, whose death ends a "
            "lease; launch shared jobs without detached=True"
        )
    cluster = given["cluster"] if given["cluster"] is not None else Cluster()
    colocate = [list(g) for g in given["colocate"]]
    lease = acquire_lease(
        cluster,
        config_of(given["config_or_plan"]),
        colocate,
        priority=given["priority"],
        queue_timeout_s=given["queue_timeout_s"],
    )
    rest = {k: v for k, v in given.items() if k not in _OWN}
    try:
        view = widened(lease.cluster, cluster)
        job = launch(lease.plan, given["actors"], view, colocate=colocate, **rest)
    except BaseException:
        lease.release()
        raise
    job.reservation.lease = lease  # released with the job's groups
    lease.onto_free = given["recover_onto_free"]
    lease.cluster = job.cluster  # a recovery onto free capacity grows this view
    try:
        lease.confirm(job.gpu_map, job.spare_groups)
    except BaseException:
        job.shutdown()
        raise
    return job
