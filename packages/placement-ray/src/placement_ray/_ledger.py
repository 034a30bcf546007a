"""The lease ledger actor: one per Ray cluster, detached, named, a thin shell on ``LeaseBook``.

Whichever job comes first creates it (``get_if_exists``, which the GCS resolves: drivers
starting at once all get the one actor). It keeps its book in Ray's internal KV after
every change, so a restarted ledger (``max_restarts=-1``) starts from the same leases;
a stored book of another version is kept untouched and every call raises
``LedgerVersionError``. A watch task asks the GCS job table every ``WATCH_S`` seconds
which owners (Ray job ids of the drivers) died and ends their leases: a driver killed
with SIGKILL is reclaimed within Ray's own detection plus ``WATCH_S``.

Callers wait for a change with ``wait_change`` (the actor is async: the call returns when
the book's version moves, or at its timeout), never by polling.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from typing import Any

import ray

from ._lease_state import LEDGER_VERSION, LeaseBook, NodeCapacity, Request, Slot
from .errors import ClusterError, LedgerVersionError

__all__ = [
    "KV_KEY",
    "LEDGER_NAME",
    "LEDGER_NAMESPACE",
    "WATCH_S",
    "LeaseLedger",
    "find_ledger",
    "ledger_actor",
    "ledger_call",
]

logger = logging.getLogger(__name__)

LEDGER_NAME = "placement-lease-ledger"
LEDGER_NAMESPACE = "placement-leases"
KV_KEY = b"placement-leases/book"
WATCH_S = 0.25


def _dead_owners(owners: set[str]) -> set[str]:
    from ray._private import state

    dead = {str(j["JobID"]) for j in state.jobs() if j.get("IsDead")}  # type: ignore[no-untyped-call]
    return owners & dead


class LeaseLedger:
    """The ledger's methods (``ledger_actor`` makes the Ray actor of this class)."""

    def __init__(self, kv_key: bytes = KV_KEY) -> None:
        from ray.experimental import internal_kv

        self._kv_key = kv_key
        self._error: LedgerVersionError | None = None
        raw = internal_kv._internal_kv_get(kv_key, namespace=LEDGER_NAMESPACE)
        try:
            self._book = LeaseBook.from_record(json.loads(raw)) if raw else LeaseBook()
        except LedgerVersionError as exc:
            self._error = exc
            self._book = LeaseBook()
        self._version = 0
        self._changed: asyncio.Event | None = None
        self._watch: asyncio.Task[None] | None = None

    def _ready(self) -> LeaseBook:
        if self._error is not None:
            raise self._error
        if self._watch is None:
            self._changed = asyncio.Event()
            self._watch = asyncio.get_running_loop().create_task(self._watch_owners())
        return self._book

    def _bump(self) -> None:
        from ray.experimental import internal_kv

        internal_kv._internal_kv_put(
            self._kv_key,
            json.dumps(self._book.to_record()),
            overwrite=True,
            namespace=LEDGER_NAMESPACE,
        )
        self._version += 1
        if self._changed is not None:
            self._changed.set()
            self._changed = asyncio.Event()

    async def _watch_owners(self) -> None:
        while True:
            owners = self._book.owners()
            if owners:
                try:
                    dead = _dead_owners(owners)
                except Exception as exc:  # the GCS is briefly unreachable: ask again
                    logger.warning("lease ledger: cannot read the job table: %s", exc)
                    dead = set()
                if dead:
                    jobs = self._book.reclaim(dead)
                    logger.info("lease ledger: reclaimed %s (owners died)", jobs)
                    self._bump()
            await asyncio.sleep(WATCH_S)

    async def hello(self, client_version: int) -> int:
        """This ledger's version (raises the stored book's version error, if any)."""
        self._ready()
        return LEDGER_VERSION

    async def register(self, nodes: list[NodeCapacity]) -> None:
        book = self._ready()
        before = len(book.nodes)
        book.register(nodes)
        if len(book.nodes) != before:
            self._bump()

    async def acquire(
        self, request: Request, foreign: dict[str, tuple[int, ...]], now: float
    ) -> tuple[bool, int]:
        """Grant or queue ``request``; whether granted, and the change counter after."""
        book = self._ready()
        book.foreign = dict(foreign)
        granted = book.acquire(request, now)
        self._bump()
        return granted, self._version

    async def move(
        self, job: str, drop: list[str], add: list[Slot], foreign: dict[str, tuple[int, ...]]
    ) -> bool:
        """Move part of a job's lease (``LeaseBook.move``); whether it was granted."""
        book = self._ready()
        book.foreign = dict(foreign)
        moved = book.move(job, drop, add)
        if moved:
            self._bump()
        return moved

    async def confirm(self, job: str, slots: list[Slot]) -> None:
        self._ready().confirm(job, slots)
        self._bump()

    async def release(self, job: str) -> bool:
        had = self._ready().release(job)
        if had:
            self._bump()
        return had

    async def snapshot(self) -> dict[str, Any]:
        """The book (``to_record``) with its ``change`` counter."""
        return {**self._ready().to_record(), "change": self._version}

    async def wait_change(self, change: int, timeout_s: float) -> int:
        """Return the change counter once it differs from ``change``, or at the timeout."""
        self._ready()
        if self._version == change and self._changed is not None:
            event = self._changed
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(event.wait(), timeout=max(0.0, timeout_s))
        return self._version


_Actor = ray.remote(LeaseLedger)


def ledger_call(actor: Any, method: str, *args: Any, timeout_s: float = 120.0) -> Any:
    """``actor.method(*args)``, again while the ledger restarts (every method is idempotent).

    Raises:
        ClusterError: the ledger did not answer within ``timeout_s``.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return ray.get(getattr(actor, method).remote(*args), timeout=timeout_s)
        except ray.exceptions.ActorUnavailableError as exc:
            if time.monotonic() > deadline:
                raise ClusterError(
                    f"the lease ledger ({LEDGER_NAME!r} in namespace {LEDGER_NAMESPACE!r}) "
                    f"did not come back within {timeout_s:g}s: {exc}"
                ) from exc
            time.sleep(0.1)  # Ray is starting it again from its stored book


def find_ledger() -> Any:
    """The cluster's ledger actor, or None when no job started one."""
    try:
        return ray.get_actor(LEDGER_NAME, namespace=LEDGER_NAMESPACE)
    except ValueError:
        return None


def ledger_actor() -> Any:
    """The cluster's ledger actor, created here if no job started it yet.

    Raises:
        LedgerVersionError: the running ledger (or its stored book) is of another version.
    """
    actor: Any = _Actor.options(
        name=LEDGER_NAME,
        namespace=LEDGER_NAMESPACE,
        lifetime="detached",
        get_if_exists=True,
        max_restarts=-1,
        num_cpus=0,
        max_concurrency=1000,
    ).remote()
    found = ledger_call(actor, "hello", LEDGER_VERSION)
    if found != LEDGER_VERSION:
        raise LedgerVersionError(
            f"the cluster's lease ledger ({LEDGER_NAME!r} in namespace {LEDGER_NAMESPACE!r}) "
            f"speaks version {found}, this placement-ray {LEDGER_VERSION}; run jobs of one "
            "placement-ray version on a shared cluster",
            found=int(found),
            expected=LEDGER_VERSION,
        )
    return actor
