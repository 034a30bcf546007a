"""The lease ledger's state machine: pure, no Ray (the ledger actor is a thin shell on it).

A **lease** is one job's accelerators, all granted at once or none: each slot is one
accelerator of one node (by Ray node id and physical index) with the share the job holds
on it. A **waiter** is a job queued for ``need`` (accelerators per node, in the job's node
order) because its accelerators are not free. The rules:

* no accelerator's shares sum to more than 1 (whole accelerators are share 1);
* a job acquires when its slots fit and no waiter ahead of it (higher priority, or the same
  priority and earlier arrival) fits the free accelerators: the highest-priority waiter
  that fits starts first, and a smaller one starts in a gap that no waiter ahead can use;
* whether a need fits is :func:`choose_nodes`, which the client plans with as well: walking
  the nodes in rank order, each position of the need takes the next node with enough
  accelerators free (the chosen nodes keep their relative order, so the config's node
  order rules apply among them unchanged).

Accelerators held by Ray work that is not a lease (``foreign``, reported by the clients)
count as taken. ``to_record`` / ``from_record`` give the JSON the actor keeps in Ray's
internal KV; a record of a newer version is refused (``LedgerVersionError``).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

from .errors import JobNameTakenError, LeaseError, LedgerVersionError

__all__ = [
    "LEDGER_VERSION",
    "Lease",
    "LeaseBook",
    "NodeCapacity",
    "Request",
    "Slot",
    "Waiter",
    "choose_nodes",
]

LEDGER_VERSION = 1
_EPS = 1e-9


@dataclass(frozen=True, slots=True)
class NodeCapacity:
    """A node the ledger knows: Ray node id, cluster rank, ``(index, uuid)`` per accelerator."""

    node_id: str
    rank: int
    accelerators: tuple[tuple[int, str | None], ...]


@dataclass(frozen=True, slots=True)
class Slot:
    """One accelerator of a lease: node, physical index, the share held on it."""

    node_id: str
    accelerator: int
    share: float = 1.0


@dataclass(frozen=True, slots=True)
class Lease:
    """One job's accelerators. ``confirmed``: its slots are the physical ones Ray reserved."""

    job: str
    owner: str
    priority: int
    since: float
    slots: tuple[Slot, ...]
    cpus: float = 0.0
    confirmed: bool = False


@dataclass(frozen=True, slots=True)
class Waiter:
    """A queued job: what it needs per node (in its node order) and at what share."""

    job: str
    owner: str
    priority: int
    seq: int
    since: float
    need: tuple[int, ...]
    share: float


@dataclass(frozen=True, slots=True)
class Request:
    """An acquisition: ``slots`` (empty when the job could not plan on the free view, or
    needs no accelerator) and ``need``, what it waits for if the slots cannot be granted."""

    job: str
    owner: str
    priority: int
    slots: tuple[Slot, ...]
    need: tuple[int, ...]
    share: float = 1.0
    cpus: float = 0.0


def choose_nodes(
    need: Sequence[int], share: float, free: Mapping[str, Sequence[int]], ranks: Mapping[str, int]
) -> list[str] | None:
    """The nodes a need takes, one per position in order, or None when it does not fit.

    Args:
        need: Accelerators per node, in the job's node order.
        share: The share it holds on each (an accelerator is free for it when at least
            that much of it is free).
        free: Node id -> indices of its accelerators free at ``share``.
        ranks: Node id -> cluster rank (the walk order).
    """
    order = sorted(free, key=lambda n: ranks.get(n, 0))
    chosen: list[str] = []
    at = 0
    for count in need:
        while at < len(order) and len(free[order[at]]) < count:
            at += 1
        if at == len(order):
            return None
        chosen.append(order[at])
        at += 1
    return chosen


def _check_job(job: object) -> str:
    if not isinstance(job, str) or not job.strip() or "/" in job:
        raise LeaseError(f"job: expected a non-empty name without '/', got {job!r}")
    return job


def _check_priority(priority: object) -> int:
    if isinstance(priority, bool) or not isinstance(priority, int) or priority < 0:
        raise LeaseError(f"priority: expected an int >= 0 (higher goes first), got {priority!r}")
    return priority


def _check_share(field: str, share: object) -> float:
    if isinstance(share, bool) or not isinstance(share, int | float) or not 0 < share <= 1:
        raise LeaseError(f"{field}: expected a share in (0, 1], got {share!r}")
    return float(share)


class LeaseBook:
    """Leases, waiters and the nodes they may use (see the module docstring)."""

    def __init__(self, nodes: Iterable[NodeCapacity] = ()) -> None:
        self.nodes: dict[str, NodeCapacity] = {}
        self.leases: dict[str, Lease] = {}
        self.waiters: dict[str, Waiter] = {}
        self.foreign: dict[str, tuple[int, ...]] = {}
        self.seq = 0
        self.register(nodes)

    # ------------------------------------------------------------------ the view
    def register(self, nodes: Iterable[NodeCapacity]) -> None:
        """Learn nodes (a node already known keeps its record)."""
        for node in nodes:
            self.nodes.setdefault(node.node_id, node)

    def used(self) -> dict[tuple[str, int], float]:
        """``(node id, index) -> share`` held by leases and by foreign Ray work."""
        out: dict[tuple[str, int], float] = defaultdict(float)
        for lease in self.leases.values():
            for slot in lease.slots:
                out[(slot.node_id, slot.accelerator)] += slot.share
        for node_id, indices in self.foreign.items():
            for index in indices:
                out[(node_id, index)] = 1.0
        return out

    def free(self, share: float = 1.0) -> dict[str, list[int]]:
        """Node id -> indices of its accelerators with at least ``share`` free."""
        used = self.used()
        return {
            n.node_id: [
                i for i, _ in n.accelerators if used.get((n.node_id, i), 0) + share <= 1 + _EPS
            ]
            for n in self.nodes.values()
        }

    def ranks(self) -> dict[str, int]:
        return {n.node_id: n.rank for n in self.nodes.values()}

    def fits_need(self, need: Sequence[int], share: float) -> bool:
        return choose_nodes(need, share, self.free(share), self.ranks()) is not None

    def fits(self, slots: Sequence[Slot]) -> bool:
        used = self.used()
        return all(used.get((s.node_id, s.accelerator), 0) + s.share <= 1 + _EPS for s in slots)

    def queue(self) -> list[Waiter]:
        """The waiters in queue order: priority (highest first), then arrival."""
        return sorted(self.waiters.values(), key=lambda w: (-w.priority, w.seq))

    def ahead_that_fits(self, job: str, priority: int, seq: int) -> Waiter | None:
        """The first waiter ahead of ``(priority, seq)`` whose need fits now, if any."""
        for waiter in self.queue():
            if (-waiter.priority, waiter.seq) >= (-priority, seq):
                return None
            if waiter.job != job and self.fits_need(waiter.need, waiter.share):
                return waiter
        return None

    # ------------------------------------------------------------------ changes
    def acquire(self, request: Request, now: float) -> bool:
        """Grant ``request`` (True) or queue it (False); all its slots or none.

        Raises:
            LeaseError: a bad job name, priority, share, need, or a slot on an unknown
                node or accelerator, or a job that holds a lease already.
            JobNameTakenError: another owner holds or waits under the job's name.
        """
        self._check(request)
        if request.job in self.leases:
            return True
        waiting = self.waiters.get(request.job)
        if waiting is None:
            self.seq += 1
            seq = self.seq
        else:
            seq = waiting.seq
        planned = bool(request.slots) or not any(request.need)
        if (
            planned
            and self.fits(request.slots)
            and self.ahead_that_fits(request.job, request.priority, seq) is None
        ):
            self.waiters.pop(request.job, None)
            self.leases[request.job] = Lease(
                request.job, request.owner, request.priority, now, request.slots, request.cpus
            )
            return True
        since = waiting.since if waiting is not None else now
        self.waiters[request.job] = Waiter(
            request.job, request.owner, request.priority, seq, since, request.need, request.share
        )
        return False

    def _check(self, request: Request) -> None:
        job = _check_job(request.job)
        _check_priority(request.priority)
        _check_share("share", request.share)
        if not isinstance(request.owner, str) or not request.owner:
            raise LeaseError(f"owner: expected a Ray job id, got {request.owner!r}")
        if any(isinstance(c, bool) or not isinstance(c, int) or c < 0 for c in request.need):
            raise LeaseError(
                f"need: expected accelerators per node as ints >= 0, got {list(request.need)}"
            )
        for holder in (self.leases.get(job), self.waiters.get(job)):
            if holder is not None and holder.owner != request.owner:
                raise JobNameTakenError(
                    f"job: {job!r} is taken by a live job (owner {holder.owner}); choose "
                    "another name (Cluster(job=...)) or end that job first",
                    job=job,
                    owner=holder.owner,
                )
        held = self.leases.get(job)
        if held is not None and held.slots == request.slots:
            return  # the same acquisition again (a retry): granted already
        if held is not None:
            raise LeaseError(f"job: {job!r} holds a lease already; release it before acquiring")
        self._check_slots(request.slots)

    def _check_slots(self, slots: Sequence[Slot]) -> None:
        seen: set[tuple[str, int]] = set()
        for i, slot in enumerate(slots):
            node = self.nodes.get(slot.node_id)
            if node is None:
                raise LeaseError(
                    f"slots[{i}].node_id: unknown node {slot.node_id!r}; the ledger knows "
                    f"{sorted(self.nodes)}"
                )
            indices = [index for index, _ in node.accelerators]
            if slot.accelerator not in indices:
                raise LeaseError(
                    f"slots[{i}].accelerator: node {slot.node_id} (rank {node.rank}) has no "
                    f"accelerator {slot.accelerator!r}; it has {indices}"
                )
            _check_share(f"slots[{i}].share", slot.share)
            key = (slot.node_id, slot.accelerator)
            if key in seen:
                raise LeaseError(
                    f"slots[{i}]: node {slot.node_id} accelerator {slot.accelerator} is listed "
                    "twice; list each accelerator once with its total share"
                )
            seen.add(key)

    def confirm(self, job: str, slots: Sequence[Slot]) -> None:
        """Replace a lease's slots by the physical accelerators Ray reserved for it.

        Ray picks which accelerators of a node a reservation gets (and a slime layout
        how many per node); where it took ones another (unconfirmed) lease planned on,
        that lease's slots move to the node's accelerators left free, so the book keeps
        matching what Ray holds. Where it took ones marked foreign (Ray work outside the
        ledger is counted per node, its indices guessed), the mark is wrong and goes.

        Raises:
            LeaseError: no such lease, a bad slot, or accelerators a confirmed lease holds.
        """
        lease = self.leases.get(job)
        if lease is None:
            raise LeaseError(f"job: {job!r} holds no lease; the ledger has {sorted(self.leases)}")
        self._check_slots(slots)
        self._unmark_foreign(job, slots)
        del self.leases[job]
        try:
            self._make_room(slots)
        except LeaseError:
            self.leases[job] = lease
            raise
        self.leases[job] = replace(lease, slots=tuple(slots), confirmed=True)

    def _unmark_foreign(self, job: str, slots: Sequence[Slot]) -> None:
        """Ray reserved these: no foreign work holds them (foreign work is known per node
        by count, its indices only guessed); the mark moves to the node's highest
        accelerator that no lease holds, so the count stays."""
        for slot in slots:
            marked = list(self.foreign.get(slot.node_id, ()))
            if slot.accelerator not in marked:
                continue
            marked.remove(slot.accelerator)
            held = {
                s.accelerator
                for lease in self.leases.values()
                if lease.job != job
                for s in lease.slots
                if s.node_id == slot.node_id
            } | {s.accelerator for s in slots if s.node_id == slot.node_id}
            node = self.nodes[slot.node_id]
            other = [i for i, _ in node.accelerators if i not in held and i not in marked]
            self.foreign[slot.node_id] = tuple(sorted(marked + other[-1:]))

    def _make_room(self, slots: Sequence[Slot]) -> None:
        for slot in slots:
            if self.fits([slot]):
                continue
            for other in list(self.leases.values()):
                key = (slot.node_id, slot.accelerator)
                mine = [s for s in other.slots if (s.node_id, s.accelerator) == key]
                if not mine or other.confirmed:
                    continue
                kept = tuple(s for s in other.slots if s not in mine)
                self.leases[other.job] = replace(other, slots=kept)
                room = [i for i in self.free(mine[0].share)[slot.node_id] if i != slot.accelerator]
                if not room:
                    self.leases[other.job] = other
                    continue
                moved = replace(mine[0], accelerator=room[0])
                self.leases[other.job] = replace(other, slots=(*kept, moved))
                if self.fits([slot]):
                    break
            if not self.fits([slot]):
                raise LeaseError(
                    f"slots: node {slot.node_id} accelerator {slot.accelerator} is held by "
                    "another lease that Ray reserved already"
                )

    def move(self, job: str, drop: Iterable[str], add: Sequence[Slot]) -> bool:
        """Move part of a lease: drop its slots on the ``drop`` nodes, add ``add``; all or
        nothing (True), or nothing when an added accelerator is not free (False).

        A job recovering onto free capacity does this: it does not queue (its other
        nodes run), so waiters keep their places and it takes only what is free now.

        Raises:
            LeaseError: the job holds no lease, or a bad slot.
        """
        lease = self.leases.get(job)
        if lease is None:
            raise LeaseError(f"job: {job!r} holds no lease; the ledger has {sorted(self.leases)}")
        self._check_slots(add)
        gone = set(drop)
        added = {(s.node_id, s.accelerator) for s in add}
        kept = tuple(
            s
            for s in lease.slots
            if s.node_id not in gone and (s.node_id, s.accelerator) not in added
        )
        del self.leases[job]  # its own slots do not count against it (a retried move)
        if not self.fits(add):
            self.leases[job] = lease
            return False
        self.leases[job] = replace(lease, slots=(*kept, *add), confirmed=False)
        return True

    def release(self, job: str) -> bool:
        """End a job's lease and leave the queue; whether it had either."""
        had = self.leases.pop(job, None) is not None
        return self.waiters.pop(job, None) is not None or had

    def reclaim(self, dead: Iterable[str]) -> list[str]:
        """End the leases and waits of dead owners; the jobs dropped."""
        gone = set(dead)
        jobs = sorted(
            {lease.job for lease in self.leases.values() if lease.owner in gone}
            | {w.job for w in self.waiters.values() if w.owner in gone}
        )
        for job in jobs:
            self.release(job)
        return jobs

    def owners(self) -> set[str]:
        return {x.owner for x in self.leases.values()} | {w.owner for w in self.waiters.values()}

    # ------------------------------------------------------------------ storage
    def to_record(self) -> dict[str, Any]:
        return {
            "version": LEDGER_VERSION,
            "seq": self.seq,
            "nodes": [asdict(n) for n in self.nodes.values()],
            "leases": [asdict(x) for x in self.leases.values()],
            "waiters": [asdict(w) for w in self.waiters.values()],
        }

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> LeaseBook:
        """Rebuild a book from ``to_record``'s output.

        Raises:
            LedgerVersionError: the record is of another version than this ledger's.
        """
        version = record.get("version")
        if version != LEDGER_VERSION:
            raise LedgerVersionError(
                f"the stored lease ledger is version {version!r}, this placement-ray speaks "
                f"version {LEDGER_VERSION}; run the placement-ray that wrote it (or newer), "
                "nothing was changed",
                found=int(version) if isinstance(version, int) else -1,
                expected=LEDGER_VERSION,
            )
        book = cls(
            NodeCapacity(n["node_id"], n["rank"], tuple((a[0], a[1]) for a in n["accelerators"]))
            for n in record["nodes"]
        )
        book.seq = int(record["seq"])
        for x in record["leases"]:
            slots = tuple(Slot(**s) for s in x["slots"])
            book.leases[x["job"]] = Lease(**{**x, "slots": slots})
        for w in record["waiters"]:
            book.waiters[w["job"]] = Waiter(**{**w, "need": tuple(w["need"])})
        return book
