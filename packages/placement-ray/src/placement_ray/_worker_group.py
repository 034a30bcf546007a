"""``WorkerGroup``: one component's workers, in rank order, called together.

``execute("train", batch)`` calls a method on every rank concurrently (or on a subset) and
returns the results in rank order; a worker that raised is named by rank, node and GPUs;
a worker lost with its node is reported by rank, node and GPUs, and placement groups left
spinning in ``RESCHEDULING`` are removed (the foundation's ``check_health``).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import ray

from ._allocate import Worker, release
from ._failure import HealthReport, Occupant, check_health
from ._worker import MASTER_PORT_BLOCK
from .errors import ArgumentError, WorkerCallError, WorkerTimeoutError

if TYPE_CHECKING:
    from ._cluster import Cluster

__all__ = ["WorkerGroup"]

logger = logging.getLogger(__name__)


class WorkerGroup:
    """One component's workers, ordered by rank.

    Args:
        component: The component's name.
        workers: Its workers, rank 0 first.
        cluster: The job's cluster view (for node-loss reports).
        reports: What each worker reported seeing when it started.
        master_addr: Rank 0's node address.
        master_port: The port rank 0 holds for ``MASTER_PORT`` (None if none).
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
        timeout_s: float | None = None,
        **kwargs: Any,
    ) -> list[Any]:
        """Call ``method`` on the chosen ranks concurrently; results in the given rank order.

        Args:
            method: The actor method's name.
            *args: Positional arguments (the same for every rank).
            ranks: The ranks to call (default: all, 0 first); results follow this order.
            timeout_s: Limit for all calls together; None waits forever.
            **kwargs: Keyword arguments (the same for every rank).

        Raises:
            ArgumentError: unknown method or bad ranks.
            WorkerTimeoutError: some ranks did not finish in time (named).
            NodeLostError: a worker's node is gone (affected workers by rank, node, GPUs).
            WorkerCallError: the method raised, or a worker died, on some ranks (named).
        """
        chosen = self._ranks(ranks)
        refs = self.execute_async(method, *args, ranks=chosen, **kwargs)
        if not refs:
            return []
        _, pending = ray.wait(refs, num_returns=len(refs), timeout=timeout_s)
        if pending:
            late = [r for r, ref in zip(chosen, refs, strict=True) if ref in set(pending)]
            raise WorkerTimeoutError(
                f"{self.component}.{method} did not finish within {timeout_s:g}s on ranks "
                f"{late}: " + "; ".join(self.workers[r].describe() for r in late[:8]),
                method=method,
                pending=late,
            )
        results: list[Any] = []
        failed: list[tuple[int, str, str]] = []
        died = False
        for rank, ref in zip(chosen, refs, strict=True):
            try:
                results.append(ray.get(ref))
            except ray.exceptions.RayActorError as exc:
                died = True
                failed.append((rank, self.workers[rank].describe(), _short(exc)))
                results.append(None)
            except ray.exceptions.RayTaskError as exc:
                failed.append((rank, self.workers[rank].describe(), _short(exc)))
                results.append(None)
        if failed:
            if died:
                self.check_health()  # raises NodeLostError when a node is gone
            lines = "\n".join(f"  rank {r}: {who}: {why}" for r, who, why in failed[:20])
            raise WorkerCallError(
                f"{self.component}.{method} failed on {len(failed)} of {len(chosen)} ranks:\n"
                + lines,
                method=method,
                failed=failed,
            )
        return results

    def check_health(self, *, raise_on_loss: bool = True, grace_s: float = 5.0) -> HealthReport:
        """Report workers whose node is gone; remove this group's stuck placement groups.

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
        """Kill every worker (their held ports close with them); idempotent."""
        if not self._killed:
            release(self.workers)
            self._killed = True

    def __repr__(self) -> str:
        return f"WorkerGroup({self.component!r}, {len(self.workers)} workers)"


def _short(exc: BaseException) -> str:
    lines = [line for line in str(exc).strip().splitlines() if line.strip()]
    return (lines[-1] if lines else type(exc).__name__)[:500]
