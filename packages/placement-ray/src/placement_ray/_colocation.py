"""GPU sharing: fractional shares that must fit one GPU (who shares which GPU: core).

Ray hangs silently when the fractional GPU requests placed in one bundle add up to more
than the bundle holds, so every share is checked here, before anything is created. A
worker that uses several GPUs (tensor parallel, a strided set) counts with its share on
every one of them.

Ray itself can only protect one of those GPUs: an actor sits in one bundle, so it asks for
its share of its first GPU's bundle and Ray knows nothing of the others. Every other GPU
it uses is protected by our own per-bundle accounting instead: the share is recorded in
the cluster view's :class:`ShareLedger` (``Cluster.shares``) on each of its bundles, and
every placement-ray allocation into a bundle (launch, slime's train group and rollout
engines) checks the ledger first.
Work placed into those bundles directly through Ray, bypassing placement-ray, is not
checked: reserving each extra GPU with an idle placeholder actor would make Ray enforce
it, at the price of one idle process per extra GPU.

Shares already handed out in a placement group are remembered per bundle (by the cluster
view, in this driver process), so a rollout created after a colocated trainer is checked
against the trainer's shares too.
"""

from __future__ import annotations

import math
import threading
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from .errors import ArgumentError, OversubscribedGPUError

__all__ = [
    "SHARE_QUANTUM",
    "GpuShare",
    "ShareLedger",
    "check_shares",
    "default_share",
    "validate_share",
]

SHARE_QUANTUM = 1e-4
"""Ray's resource granularity: shares are multiples of it (rounded down)."""

_EPS = 1e-9


@dataclass(frozen=True, slots=True)
class GpuShare:
    """One worker's share of one GPU it uses (a worker on several GPUs has one per GPU).

    Attributes:
        who: The worker, as people read it (``rollout rank 3``).
        node_rank: Node of the GPU.
        gpu: Physical index of the GPU.
        share: The fractional GPU request, ``0 < share <= 1``.
    """

    who: str
    node_rank: int
    gpu: int
    share: float


def validate_share(name: str, value: object) -> float:
    """A GPU share: a number in ``(0, 1]``, rounded down to Ray's 0.0001 quantum.

    Raises:
        ArgumentError: not a number in ``(0, 1]``.
    """
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or not 0 < value <= 1
    ):
        raise ArgumentError(f"{name}: expected a GPU share in (0, 1], got {value!r}")
    quantised = math.floor(float(value) / SHARE_QUANTUM + _EPS) * SHARE_QUANTUM
    if quantised <= 0:
        raise ArgumentError(
            f"{name}: {value!r} is below Ray's smallest GPU share {SHARE_QUANTUM:g}"
        )
    return round(quantised, 4)


def default_share(sharers: int, free: float = 1.0) -> float:
    """The largest share that lets ``sharers`` workers fit ``free`` of a GPU.

    ``default_share(2) == 0.5``, ``default_share(3) == 0.3333``; with ``free=0.5`` (the
    rest given explicitly to others) two workers get 0.25 each. 0 when nothing is free.
    """
    if sharers < 1:
        raise ArgumentError(f"sharers: expected an int >= 1, got {sharers!r}")
    return round(max(0.0, math.floor(free / sharers / SHARE_QUANTUM + _EPS)) * SHARE_QUANTUM, 4)


def check_shares(
    shares: Iterable[GpuShare], *, already: Mapping[tuple[int, int], float] | None = None
) -> dict[tuple[int, int], float]:
    """Sum the shares per GPU and raise if any GPU gets more than 1.

    Args:
        shares: Every worker's request.
        already: Shares handed out earlier on the same GPUs, by ``(node rank, GPU)``.

    Returns:
        The total per ``(node rank, GPU)`` (including ``already``).

    Raises:
        OversubscribedGPUError: naming every over-subscribed GPU, its workers and shares.
    """
    totals: dict[tuple[int, int], float] = defaultdict(float)
    who: dict[tuple[int, int], list[tuple[str, float]]] = defaultdict(list)
    for key, amount in (already or {}).items():
        if amount > _EPS:
            totals[key] += amount
            who[key].append(("in use earlier", amount))
    for item in shares:
        key = (item.node_rank, item.gpu)
        totals[key] += item.share
        who[key].append((item.who, item.share))
    bad = [(key, total) for key, total in sorted(totals.items()) if total > 1 + _EPS]
    if bad:
        shown = []
        for (node_rank, gpu), total in bad[:20]:
            parts = ", ".join(f"{w} {s:g}" for w, s in who[(node_rank, gpu)])
            shown.append(f"  node {node_rank} GPU {gpu}: {total:.4g} = {parts}")
        if len(bad) > 20:
            shown.append(f"  ... and {len(bad) - 20} more GPUs")
        raise OversubscribedGPUError(
            f"GPU shares add up to more than 1 on {len(bad)} GPU(s); Ray would wait forever "
            "for them, so nothing was created:\n"
            + "\n".join(shown)
            + "\nlower the shares (e.g. gpu_share={'rollout': 0.2}) so each GPU's sum is <= 1",
            gpus=[(f"node {n} GPU {g}", t, who[(n, g)]) for (n, g), t in bad],
        )
    return dict(totals)


class ShareLedger:
    """GPU shares handed out per placement-group bundle, by one cluster view.

    Each ``Cluster`` holds one (``Cluster.shares``): every worker placement-ray starts
    through that view books the share of each bundle it uses, and returns it when it is
    killed, so a later allocation into the same bundles (a rollout after a colocated
    trainer) is checked against them. Thread-safe.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._used: dict[str, dict[int, float]] = {}

    def used(self, pg_id: str) -> dict[int, float]:
        """Bundle index -> share in use, for one placement group (hex id)."""
        with self._lock:
            return dict(self._used.get(pg_id, {}))

    def book(self, entries: Iterable[tuple[str, int, float]]) -> None:
        """Add ``(placement group id, bundle index, share)`` entries."""
        with self._lock:
            for pg_id, bundle, share in entries:
                per = self._used.setdefault(pg_id, {})
                per[bundle] = round(per.get(bundle, 0.0) + share, 6)

    def unbook(self, entries: Iterable[tuple[str, int, float]]) -> None:
        """Take back ``(placement group id, bundle index, share)`` entries booked before."""
        with self._lock:
            for pg_id, bundle, share in entries:
                per = self._used.get(pg_id)
                if per is None or bundle not in per:
                    continue
                left = round(per[bundle] - share, 6)
                if left > _EPS:
                    per[bundle] = left
                else:
                    del per[bundle]
                if not per:
                    del self._used[pg_id]

    def forget(self, pg_id: str) -> None:
        """Drop every share of a placement group (it was removed)."""
        with self._lock:
            self._used.pop(pg_id, None)

    def __repr__(self) -> str:
        with self._lock:
            return f"ShareLedger({self._used!r})"
