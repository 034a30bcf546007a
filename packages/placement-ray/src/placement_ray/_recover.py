"""Live takeover of lost nodes: spares reserved at launch, lost ranks re-created on them.

``launch`` reserves every spare node of the plan (``cluster.spare_nodes``) in a placement
group of its own, pinned to that node, one bundle per accelerator: no other job can take
the spare while the job runs. :func:`recover` then does, after a node loss:

1. find the job's nodes that Ray no longer lists alive (used nodes and spares);
2. ask core's ``replan`` for the moves (the same decision ``placement plan --lose``
   shows); no compatible spare: ``NoSpareNodeError``, nothing changed (a shared job
   launched with ``recover_onto_free=True`` leases a free node instead: ``_onto_free``);
3. remove the lost nodes' placement groups (Ray would keep them ``RESCHEDULING``, one GCS
   core spinning) and the groups of lost spares;
4. issue every lost worker's request again at its moved placement, seated in the spare's
   group (the same class, constructor arguments and options; the environment rebuilt from
   the new plan, so ``RANK``, ``LOCAL_RANK``, ``WORLD_SIZE``, visibility and group env are
   kept and only node-derived values change), start them together (ports reserved and
   held anew on the spare; a moved rank 0 holds a new ``MASTER_PORT``);
5. re-announce a moved rank 0: every survivor of that component gets the new
   ``MASTER_ADDR``/``MASTER_PORT`` in its ``os.environ`` (and its
   ``placement_env_changed(env)`` hook is called when the class defines one); the
   component's ``WorkerGroup`` carries them too;
6. put the new workers in their ranks' places: survivors keep their processes and
   handles, ``WorkerGroup`` calls reach every rank in rank order.

The job's placement groups (used, spare) are its ``Reservation``'s (``_reservation.py``):
step 3 is ``Reservation.drop``, step 6 ``Reservation.take_spares``. slime's layouts
recover with the same pieces (``replan_lost``, ``reissue``, ``start_again``,
``announce``; see ``_slime/recover.py``). This module knows the job only through
``RecoveringJob``: it imports nothing of ``_launch``, which calls it.

What the lost processes held in memory is gone: the application restores it from its
checkpoint, and every component with a moved rank must form its process group again
(``RecoveryReport.rendezvous``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import ray

from placement_core import Move, NoSpareError, Plan, Replan, format_rank_list, replan

from ._allocate import Worker
from ._cluster import Cluster
from ._onto_free import take_free
from ._placement_groups import OrderedPlacementGroup, held_slots
from ._request import WorkerRequest, seat_for
from ._standby import Standbys
from ._startup import LateEnv, Started, start_workers
from ._text import clean
from .errors import ArgumentError, NoSpareNodeError, WorkerCallError

if TYPE_CHECKING:
    from ._reservation import Reservation
    from ._worker_group import WorkerGroup

__all__ = [
    "RecoveringJob",
    "RecoveryReport",
    "announce",
    "moved_ranks",
    "recover",
    "reissue",
    "replan_lost",
    "start_again",
]

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class RecoveryReport:
    """What ``Launch.recover()`` or ``SlimeLayout.recover()`` did.

    Attributes:
        lost: The job's nodes found lost (used nodes and spares), ascending.
        moves: One per lost node that held workers (core's ``Move``: component -> the
            ranks that moved, from which node to which spare).
        dropped_spares: Lost spares, dropped (nothing moved).
        master: Component -> ``(MASTER_ADDR, MASTER_PORT)`` re-announced to its
            survivors, for each component whose rank 0 moved.
        rendezvous: Components with a moved rank: their collective groups lost a
            member and must be formed again by the application.
        seconds: Wall time of the recovery.
        restarted: Component -> ranks re-created on their own (surviving) node because
            they belong to a unit that lost another member: the other nodes' actors of
            a multi-node rollout engine (an engine lives or dies whole).
        onto_free: The job's new node rank -> Ray node id of each free node of a shared
            cluster the ranks moved onto (``recover_onto_free``), leased for the job.
    """

    lost: tuple[int, ...] = ()
    moves: tuple[Move, ...] = ()
    dropped_spares: tuple[int, ...] = ()
    master: Mapping[str, tuple[str, int | None]] = field(default_factory=dict)
    rendezvous: tuple[str, ...] = ()
    seconds: float = 0.0
    restarted: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    onto_free: Mapping[int, str] = field(default_factory=dict)

    @property
    def moved(self) -> bool:
        """Whether any worker was re-created."""
        return bool(self.moves) or bool(self.restarted)

    def move_lines(self) -> list[str]:
        """``actor 8-15: node 1 -> node 3`` per moved component, and nothing else."""
        return [line for move in self.moves for line in _move_lines(move, self.master)]

    def lines(self) -> list[str]:
        """``actor 8-15: node 1 -> node 3`` per moved component, then the rest."""
        out = self.move_lines()
        out += [
            f"{component} {format_rank_list(ranks)}: re-created on their own node with their "
            "engine (an engine lives or dies whole)"
            for component, ranks in self.restarted.items()
        ]
        out += [
            f"node {rank} is free capacity of the shared cluster (Ray node {node_id}), "
            "now leased by this job"
            for rank, node_id in self.onto_free.items()
        ]
        if self.dropped_spares:
            out.append(f"lost spare node(s) {list(self.dropped_spares)}: dropped")
        for component, (addr, port) in self.master.items():
            out.append(f"{component}: MASTER_ADDR={addr} MASTER_PORT={port} re-announced")
        if self.rendezvous:
            out.append(f"must form their process groups again: {', '.join(self.rendezvous)}")
        return out

    def describe(self) -> str:
        """A multi-line account for a log: the lines and the time taken."""
        if not self.lost:
            return "no node lost; nothing to recover"
        return "\n".join([f"recovered in {self.seconds:.2f}s:", *self.lines()])


def _move_lines(move: Move, master: Mapping[str, object]) -> list[str]:
    """``actor 8-15: node 1 -> node 3``; a moved rank 0 is named where its component has a
    master address (a rollout engine has none)."""
    return [
        f"{component} {format_rank_list(ranks)}: node {move.lost} -> node {move.spare}"
        + (
            f" (rank 0: the master node is now node {move.spare})"
            if ranks[0] == 0 and component in master
            else ""
        )
        + move.where
        for component, ranks in move.ranks.items()
    ]


class RecoveringJob(Protocol):
    """What :func:`recover` reads and calls of a launch (``Launch`` is one)."""

    plan: Plan
    cluster: Cluster
    reservation: Reservation
    worker_groups: dict[str, WorkerGroup]
    standbys: Standbys

    def _drop_nodes(self, lost: Iterable[int]) -> None: ...

    def _adopt(
        self,
        new_plan: Plan,
        moves: Sequence[Move],
        started: Started,
        master: Mapping[str, tuple[str, int | None]],
    ) -> None: ...

    def _recovered(self, report: RecoveryReport) -> None: ...


def _lost_nodes(job: RecoveringJob) -> list[int]:
    alive = job.cluster.alive_node_ids()
    watched = {p.node_rank for ps in job.plan.components.values() for p in ps}
    watched.update(job.reservation.spares)
    watched.update(job.plan.config.spare_nodes)
    return sorted(r for r in watched if job.cluster.node(r).node_id not in alive)


def reissue(worker: Worker, new_plan: Plan, group: OrderedPlacementGroup | None) -> WorkerRequest:
    """The worker's request again, at its placement in ``new_plan``, seated in ``group``.

    Raises:
        ArgumentError: the worker was made without a request.
    """
    if worker.request is None:
        raise ArgumentError(f"{worker.name} was made without a request; it cannot be re-created")
    placement = new_plan.components[worker.component][worker.rank]
    seat = seat_for(placement, None if group is None else group.pg, held_slots(group))
    return worker.request.reissue(new_plan, placement, seat)


def _requests(job: RecoveringJob, new_plan: Plan, moves: Sequence[Move]) -> list[WorkerRequest]:
    spares = job.reservation.spares
    out = []
    for move in moves:
        group = spares.get(move.spare)
        for component, ranks in move.ranks.items():
            for rank in ranks:
                worker = job.worker_groups[component].workers[rank]
                if group is None:  # a free node's group (recover_onto_free): the reservation's
                    out.append(_reissue_held(job.reservation, worker, new_plan))
                else:
                    out.append(reissue(worker, new_plan, group))
    return out


def _reissue_held(reservation: Reservation, worker: Worker, new_plan: Plan) -> WorkerRequest:
    if worker.request is None:
        raise ArgumentError(f"{worker.name} was made without a request; it cannot be re-created")
    placement = new_plan.components[worker.component][worker.rank]
    return worker.request.reissue(new_plan, placement, reservation.seat(placement))


def replan_lost(the_plan: Plan, lost: Sequence[int], *, hint: str = "") -> Replan:
    """Core's ``replan``, its ``NoSpareError`` raised as ``NoSpareNodeError``.

    Raises:
        NoSpareNodeError: a lost node has no compatible spare (``hint`` ends the message).
    """
    try:
        return replan(the_plan, lost)
    except NoSpareError as exc:
        raise NoSpareNodeError(
            f"cannot recover: {exc.reason}; nothing was changed{hint}",
            lost=exc.lost,
            needs=exc.needs,
        ) from exc


def announce(
    groups: Mapping[str, WorkerGroup],
    master: Mapping[str, tuple[str, int | None]],
    moved: Mapping[str, Iterable[int]],
    timeout_s: float | None,
) -> None:
    """Give the survivors (ranks not in ``moved``) of each component whose rank 0 moved the
    new master address."""
    refs: list[tuple[Worker, Any]] = []
    for component, (addr, port) in master.items():
        env = {"MASTER_ADDR": addr}
        if port is not None:
            env["MASTER_PORT"] = str(port)
        gone = set(moved.get(component, ()))
        for worker in groups[component].workers:
            if worker.rank not in gone:
                refs.append((worker, worker.handle._placement_update_env.remote(env)))
    for worker, ref in refs:
        try:
            ray.get(ref, timeout=timeout_s)
        except (ray.exceptions.RayError, ray.exceptions.GetTimeoutError) as exc:
            why = clean(str(exc).strip().splitlines()[-1] if str(exc).strip() else repr(exc))
            raise WorkerCallError(
                f"re-announcing MASTER_ADDR to {worker.describe()} failed: {why}",
                method="placement_env_changed",
                failed=[(worker.rank, worker.describe(), why)],
            ) from exc


def start_again(
    cluster: Cluster,
    groups: Mapping[str, WorkerGroup],
    requests: Sequence[WorkerRequest],
    moved_master: Iterable[str],
    *,
    timeout_s: float | None,
    more_env: LateEnv | None = None,
    standbys: Standbys | None = None,
) -> Started:
    """Start re-issued workers together; those of a component whose rank 0 stayed get its
    ``MASTER_PORT`` (a moved rank 0 holds a new one), plus what ``more_env`` gives. A
    request with a matching standby (``standbys``, warm spares) adopts it."""
    if not requests:  # only spares were lost
        return Started((), (), {})
    moved = set(moved_master)
    kept_ports = {
        c: g.master_port for c, g in groups.items() if c not in moved and g.master_port is not None
    }

    def late_env(i: int, worker: Worker, first: Sequence[Mapping[str, Any]]) -> dict[str, str]:
        port = kept_ports.get(worker.component)
        env = {} if port is None else {"MASTER_PORT": str(port)}
        if more_env is not None:
            env.update(more_env(i, worker, first))
        return env

    return start_workers(
        requests, cluster=cluster, late_env=late_env, timeout_s=timeout_s, standbys=standbys
    )


def moved_ranks(moves: Sequence[Move]) -> dict[str, set[int]]:
    """Component -> every rank the moves took to a spare."""
    out: dict[str, set[int]] = {}
    for move in moves:
        for component, ranks in move.ranks.items():
            out.setdefault(component, set()).update(ranks)
    return out


def recover(job: RecoveringJob, *, timeout_s: float | None = 120.0) -> RecoveryReport:
    """Re-create the workers of the job's lost nodes on spares; see the module docstring.

    Raises:
        NoSpareNodeError: a lost node has no compatible spare; nothing was changed.
        WorkerStartError / WorkerStartTimeoutError: a re-created worker did not start.
        WorkerCallError: a survivor could not be told the new master address.
    """
    started_at = time.perf_counter()
    lost = _lost_nodes(job)
    if not lost:
        return RecoveryReport()
    onto: Mapping[int, str] = {}
    try:
        result = replan_lost(job.plan, lost)
    except NoSpareNodeError as error:  # a shared job may take free capacity (opt in)
        result, taken = take_free(job, lost, error, timeout_s=timeout_s)
        onto = taken.nodes
    requests = _requests(job, result.plan, result.moves)
    moved_master = set(result.master_moves())
    job._drop_nodes(lost)
    started = start_again(
        job.cluster,
        job.worker_groups,
        requests,
        moved_master,
        timeout_s=timeout_s,
        standbys=job.standbys,
    )
    master = {c: (result.plan.master_addr(c), started.master_ports[c]) for c in moved_master}
    job._adopt(result.plan, result.moves, started, master)
    announce(job.worker_groups, master, moved_ranks(result.moves), timeout_s)
    report = RecoveryReport(
        lost=tuple(lost),
        moves=result.moves,
        dropped_spares=result.dropped_spares,
        master=master,
        rendezvous=tuple(c for c in job.plan.components if any(c in m.ranks for m in result.moves)),
        seconds=time.perf_counter() - started_at,
        onto_free=onto,
    )
    job._recovered(report)
    return report
