"""``WorkerGroup``: one component's workers, in rank order, called together.

``execute("train", batch)`` calls a method on every rank concurrently (or on a subset) and
returns the results in rank order, failing fast: the first rank that raises or dies ends
the call, named by rank, node and GPUs (the ranks still running are listed);
a worker lost with its node is reported by rank, node and GPUs, and placement groups left
spinning in ``RESCHEDULING`` are removed (the foundation's ``check_health``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, NoReturn

import ray

from ._allocate import Worker, node_lost, release, strip_lines
from ._failure import HealthReport, Occupant, check_health
from ._text import clean
from ._worker import MASTER_PORT_BLOCK
from .errors import ArgumentError, NodeLostError, WorkerCallError, WorkerTimeoutError

if TYPE_CHECKING:
    from ._cluster import Cluster

__all__ = ["DEFAULT_CALL_TIMEOUT_S", "WorkerGroup"]

logger = logging.getLogger(__name__)

DEFAULT_CALL_TIMEOUT_S = 600.0
"""``WorkerGroup.execute``'s default limit for one call on all ranks, in seconds."""


class WorkerGroup:
    """One component's workers, ordered by rank.

    Args:
        component: The component's name.
        workers: Its workers, rank 0 first.
        cluster: The job's cluster view (for node-loss reports).
        reports: What each worker reported seeing when it started.
        master_addr: Rank 0's node address.
        master_port: The port rank 0 holds for ``MASTER_PORT`` (None if none).

    Attributes:
        on_node_loss: Called with the ``NodeLostError`` a call found, returns the error
            to raise (a ``Launch`` with ``on_node_loss="recover"`` sets it: it recovers
            first); None raises it as it is. After a recovery ``workers``, ``reports``,
            ``master_addr`` and ``master_port`` are the current ones.
    """

    def __init__(
        self,
        component: str,
        workers: Sequence[Worker],
        *,
        cluster: Cluster,
        reports: Sequence[Mapping[str, Any]] = (),
        master_addr: str | None = None,
        master_port: int | None = None,
    ) -> None:
        ranks = [w.rank for w in workers]
        if ranks != list(range(len(workers))):
            raise ArgumentError(
                f"workers: expected ranks 0..{len(workers) - 1} in order, got {ranks}"
            )
        self.component = component
        self.workers: tuple[Worker, ...] = tuple(workers)
        self.cluster = cluster
        self.reports: tuple[dict[str, Any], ...] = tuple(dict(r) for r in reports)
        self.master_addr = master_addr
        self.master_port = master_port
        self._killed = False
        # Set by a Launch with on_node_loss="recover": takes the NodeLostError a call
        # found, recovers, and returns the error to raise (the recovery named in it).
        self.on_node_loss: Callable[[NodeLostError], NodeLostError] | None = None

    def _replace(
        self,
        moved: Mapping[int, tuple[Worker, Mapping[str, Any]]],
        *,
        master_addr: str | None,
        master_port: int | None,
    ) -> None:
        """Put re-created workers (rank -> worker, report) in their ranks' places."""
        workers = list(self.workers)
        reports = list(self.reports) if self.reports else [{} for _ in workers]
        for rank, (worker, report) in moved.items():
            workers[rank] = worker
            reports[rank] = dict(report)
        self.workers = tuple(workers)
        self.reports = tuple(reports)
        self.master_addr = master_addr
        self.master_port = master_port

    # ------------------------------------------------------------------ access
    @property
    def handles(self) -> tuple[Any, ...]:
        """The actor handles in rank order."""
        return tuple(w.handle for w in self.workers)

    @property
    def world_size(self) -> int:
        """Number of workers."""
        return len(self.workers)

    def __len__(self) -> int:
        return len(self.workers)

    def __iter__(self) -> Iterator[Worker]:
        return iter(self.workers)

    def __getitem__(self, rank: int) -> Worker:
        return self.workers[rank]

    def occupants(self) -> list[Occupant]:
        """Every worker as an ``Occupant`` (rank, node, GPUs, bundle) for health checks."""
        return [
            Occupant(self.component, w.rank, w.node_rank, w.node_id, w.gpu_ids, w.bundle_index)
            for w in self.workers
        ]

    # ------------------------------------------------------------------ calls
    def _ranks(self, ranks: Sequence[int] | None) -> list[int]:
        if ranks is None:
            return list(range(len(self.workers)))
        if isinstance(ranks, int | str) or not isinstance(ranks, Sequence):
            raise ArgumentError(f"ranks: expected a list of ranks or None, got {ranks!r}")
        chosen = list(ranks)
        bad = [
            r
            for r in chosen
            if isinstance(r, bool) or not isinstance(r, int) or not 0 <= r < len(self.workers)
        ]
        if bad or len(set(chosen)) != len(chosen):
            raise ArgumentError(
                f"ranks: expected distinct ranks of {self.component!r} in "
                f"0..{len(self.workers) - 1}, got {chosen}"
            )
        return chosen

    def execute_async(
        self, method: str, *args: Any, ranks: Sequence[int] | None = None, **kwargs: Any
    ) -> list[Any]:
        """Call ``method`` on the chosen ranks (all by default); return the object refs.

        Raises:
            ArgumentError: unknown method or bad ranks.
        """
        self._check_alive()
        chosen = self._ranks(ranks)
        if not isinstance(method, str) or method.startswith("__"):
            raise ArgumentError(f"method: expected a method name, got {method!r}")
        self._check_handles(method, chosen)
        refs = []
        for rank in chosen:
            try:
                bound = getattr(self.workers[rank].handle, method)
            except AttributeError:
                raise ArgumentError(
                    f"method: {self.component!r} workers have no method {method!r}"
                ) from None
            refs.append(bound.remote(*args, **kwargs))
        return refs

    def execute(
        self,
        method: str,
        *args: Any,
        ranks: Sequence[int] | None = None,
        timeout_s: float | None = DEFAULT_CALL_TIMEOUT_S,
        **kwargs: Any,
    ) -> list[Any]:
        """Call ``method`` on the chosen ranks concurrently; results in the given rank order.

        The call fails fast: the first rank that raises or dies ends it (the survivors of
        a collective would otherwise block forever), and the ranks whose calls are still
        running are named. Their calls are not cancelled: a running call cannot be
        interrupted in a plain actor, and cancelling a queued one breaks Ray's in-order
        delivery to that actor (its next call fails after 30 s). Kill the group, or wait
        for them with ``execute_async``, to go on.

        Args:
            method: The actor method's name.
            *args: Positional arguments (the same for every rank).
            ranks: The ranks to call (default: all, 0 first); results follow this order.
            timeout_s: Limit for all calls together (default
                :data:`DEFAULT_CALL_TIMEOUT_S`, 600 s); None waits forever.
            **kwargs: Keyword arguments (the same for every rank).

        Raises:
            ArgumentError: unknown method, bad ranks or a bad timeout.
            WorkerTimeoutError: some ranks did not finish in time (named).
            NodeLostError: a rank died with its node: the workers on the lost nodes by
                rank, node, GPUs.
            WorkerCallError: the method raised, or the worker died, on a rank (named with
                its node, GPUs and the cause; the ranks still running are listed).
        """
        chosen = self._ranks(ranks)
        if timeout_s is not None and (
            isinstance(timeout_s, bool)
            or not isinstance(timeout_s, int | float)
            or not timeout_s > 0
        ):
            raise ArgumentError(f"timeout_s: expected seconds > 0 or None, got {timeout_s!r}")
        refs = self.execute_async(method, *args, ranks=chosen, **kwargs)
        rank_of = {ref: rank for rank, ref in zip(chosen, refs, strict=True)}
        results: dict[int, Any] = {}
        pending = list(refs)
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while pending:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            ready, pending = ray.wait(pending, num_returns=1, timeout=left)
            if not ready:
                late = [rank_of[ref] for ref in pending]
                raise WorkerTimeoutError(
                    f"{self.component}.{method} did not finish within {timeout_s:g}s on "
                    f"ranks {late}: "
                    + "; ".join(self.workers[r].describe() for r in late[:8])
                    + (f"; ... and {len(late) - 8} more" if len(late) > 8 else ""),
                    method=method,
                    pending=late,
                )
            for ref in ready:
                try:
                    results[rank_of[ref]] = ray.get(ref)
                except ray.exceptions.RayError as exc:
                    self._call_failed(method, rank_of[ref], exc, [rank_of[p] for p in pending])
        return [results[r] for r in chosen]

    def _check_handles(self, method: str, chosen: list[int]) -> None:
        """Workers without a handle (``attach`` found their actor gone): their node's loss
        as ``NodeLostError``, else a ``WorkerCallError`` naming them."""
        gone = [rank for rank in chosen if self.workers[rank].handle is None]
        if not gone:
            return
        try:
            self.check_health()
        except NodeLostError as lost:
            raise lost if self.on_node_loss is None else self.on_node_loss(lost) from None
        described = [self.workers[r].describe() for r in gone]
        raise WorkerCallError(
            f"{self.component}.{method}: the worker of rank(s) {gone} is gone (attach found "
            f"no actor): {'; '.join(described[:8])}"
            + (f"; ... and {len(gone) - 8} more" if len(gone) > 8 else "")
            + "; call recover() or launch again",
            method=method,
            failed=[(r, d, "worker gone") for r, d in zip(gone, described, strict=True)],
            pending=[],
        )

    def _call_failed(
        self, method: str, rank: int, exc: BaseException, others: list[int]
    ) -> NoReturn:
        worker = self.workers[rank]
        still = f"\nstill running on ranks {others} (not waited for)" if others else ""
        if not isinstance(exc, ray.exceptions.RayTaskError) and node_lost(worker, exc):
            try:
                self.check_health()
            except NodeLostError as lost:
                gone = {a["rank"] for a in lost.affected if a["role"] == self.component}
                running = [r for r in others if r not in gone]
                error = NodeLostError(
                    f"{self.component}.{method}: rank {rank} was lost with its node; "
                    + lost.message
                    + (f"\nstill running on ranks {running} (not waited for)" if running else ""),
                    dead_nodes=lost.dead_nodes,
                    affected=lost.affected,
                )
                if self.on_node_loss is not None:
                    error = self.on_node_loss(error)
                raise error from exc
        how = "raised" if isinstance(exc, ray.exceptions.RayTaskError) else "lost its worker"
        why = _short(exc)
        raise WorkerCallError(
            f"{self.component}.{method} {how} on rank {rank}: {worker.describe()}: {why}" + still,
            method=method,
            failed=[(rank, worker.describe(), why)],
            pending=others,
        ) from exc

    def check_health(self, *, raise_on_loss: bool = True, grace_s: float = 5.0) -> HealthReport:
        """Report workers whose node is gone; remove this group's stuck placement groups.

        Only the nodes its workers run on count (a node lost earlier whose ranks were
        recovered onto a spare is no longer one of them).

        Raises:
            NodeLostError: nodes are lost (when ``raise_on_loss``).
        """
        groups = {w.pg.id.hex(): w.pg for w in self.workers if w.pg is not None}
        return check_health(
            self.cluster,
            self.occupants(),
            list(groups.values()),
            grace_s=grace_s,
            raise_on_loss=raise_on_loss,
            nodes={w.node_rank for w in self.workers},
        )

    def hand_over_master_port(self, *, timeout_s: float = 30.0) -> int:
        """Have rank 0 release the held ``MASTER_PORT`` now; the consumer binds it next.

        Call it right before the workers' ``init_process_group`` (or let the workers call
        ``placement_ray.hand_over_master_port()`` themselves).

        Raises:
            ArgumentError: the group holds no master port.
            PortNotHeldError: (from the worker) it was handed over already.
        """
        if self.master_port is None:
            raise ArgumentError(f"{self.component!r} holds no master port")
        ref = self.workers[0].handle._placement_hand_over.remote(MASTER_PORT_BLOCK)
        return int(ray.get(ref, timeout=timeout_s)[0])

    def _check_alive(self) -> None:
        if self._killed:
            raise ArgumentError(f"worker group {self.component!r} was killed")

    def kill(self) -> None:
        """Kill every worker (their held ports close with them, their GPU shares return to
        the cluster view's ledger); idempotent."""
        if not self._killed:
            release(self.workers, self.cluster.shares)
            self._killed = True

    def __repr__(self) -> str:
        return f"WorkerGroup({self.component!r}, {len(self.workers)} workers)"


def _short(exc: BaseException) -> str:
    lines = strip_lines(str(exc))
    return clean(lines[-1] if lines else type(exc).__name__, 500)
