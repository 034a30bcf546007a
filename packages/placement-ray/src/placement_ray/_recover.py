"""Live takeover of lost nodes: spares reserved at launch, lost ranks re-created on them.

``launch`` reserves every spare node of the plan (``cluster.spare_nodes``) in a placement
group of its own, pinned to that node, one bundle per accelerator: no other job can take
the spare while the job runs. :func:`recover` then does, after a node loss:

1. find the job's nodes that Ray no longer lists alive (used nodes and spares);
2. ask core's ``replan`` for the moves (the same decision ``placement plan --lose``
   shows); no compatible spare: ``NoSpareNodeError``, nothing changed;
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

What the lost processes held in memory is gone: the application restores it from its
checkpoint, and every component with a moved rank must form its process group again
(``RecoveryReport.rendezvous``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import ray

from placement_core import Move, NoSpareError, Plan, replan

from ._accelerators import node_resource
from ._allocate import Worker
from ._cluster import Cluster
from ._placement_groups import OrderedPlacementGroup, create_placement_group
from ._request import WorkerRequest, seat_for
from ._startup import Started, start_workers
from ._text import clean
from .errors import ArgumentError, NoSpareNodeError, WorkerCallError

if TYPE_CHECKING:
    from ._launch import Launch

__all__ = ["RecoveryReport", "recover", "reserve_spares"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class RecoveryReport:
    """What ``Launch.recover()`` did.

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
    """

    lost: tuple[int, ...] = ()
    moves: tuple[Move, ...] = ()
    dropped_spares: tuple[int, ...] = ()
    master: Mapping[str, tuple[str, int | None]] = field(default_factory=dict)
    rendezvous: tuple[str, ...] = ()
    seconds: float = 0.0

    @property
    def moved(self) -> bool:
        """Whether any worker was re-created."""
        return bool(self.moves)

    def lines(self) -> list[str]:
        """``actor 8-15: node 1 -> node 3`` per moved component, then the rest."""
        out = [line for move in self.moves for line in move.lines()]
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


def reserve_spares(
    cluster: Cluster,
    the_plan: Plan,
    *,
    cpus_per_bundle: float = 0,
    timeout_s: float | None = 60.0,
    name: str = "",
    lifetime: str | None = None,
) -> dict[int, OrderedPlacementGroup]:
    """One placement group per spare node, pinned to it, one bundle per accelerator.

    A spare without accelerators gets no group (its workers would sit on it by node
    affinity, asking for no GPU).

    Returns:
        Spare node rank -> its group.
    """
    groups: dict[int, OrderedPlacementGroup] = {}
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    try:
        for rank in the_plan.config.spare_nodes:
            count = len(cluster.node(rank).accelerators)
            if not count:
                continue
            # The spare's own accelerators' Ray resource (GPU, NPU, HPU, ...).
            bundle = {node_resource(cluster.node(rank)): 1.0}
            if cpus_per_bundle:
                bundle["CPU"] = float(cpus_per_bundle)
            left = None if deadline is None else max(deadline - time.monotonic(), 1.0)
            groups[rank] = create_placement_group(
                cluster,
                [bundle] * count,
                pin_to=[rank] * count,
                timeout_s=left,
                name=f"{name}/spare-{rank}" if name else "",
                lifetime=lifetime,
            )
    except BaseException:
        for group in groups.values():
            group.remove()
        raise
    return groups


def _lost_nodes(job: Launch) -> list[int]:
    alive = job.cluster.alive_node_ids()
    watched = {p.node_rank for ps in job.plan.components.values() for p in ps}
    watched.update(job.spare_groups)
    watched.update(job.plan.config.spare_nodes)
    return sorted(r for r in watched if job.cluster.node(r).node_id not in alive)


def _held(group: OrderedPlacementGroup | None) -> dict[tuple[int, int], tuple[int, int]]:
    """``(node, GPU id) -> (physical id, bundle)``: a spare's group holds the whole node."""
    if group is None:
        return {}
    return {(s.node_rank, s.gpu_id): (s.gpu_id, s.index) for s in group.slots}


def _requests(job: Launch, new_plan: Plan, moves: Sequence[Move]) -> list[WorkerRequest]:
    requests: list[WorkerRequest] = []
    for move in moves:
        group = job.spare_groups.get(move.spare)
        held = _held(group)
        for component, ranks in move.ranks.items():
            for rank in ranks:
                old = job.worker_groups[component].workers[rank]
                if old.request is None:
                    raise ArgumentError(
                        f"{old.name} was made without a request; it cannot be re-created"
                    )
                placement = new_plan.components[component][rank]
                seat = seat_for(placement, None if group is None else group.pg, held)
                requests.append(old.request.reissue(new_plan, placement, seat))
    return requests


def _announce(
    job: Launch,
    master: Mapping[str, tuple[str, int | None]],
    moves: Sequence[Move],
    timeout_s: float | None,
) -> None:
    """Give the survivors of each component whose rank 0 moved the new master address."""
    refs: list[tuple[Worker, Any]] = []
    for component, (addr, port) in master.items():
        env = {"MASTER_ADDR": addr}
        if port is not None:
            env["MASTER_PORT"] = str(port)
        moved = {r for m in moves for r in m.ranks.get(component, ())}
        for worker in job.worker_groups[component].workers:
            if worker.rank in moved:
                continue
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


def _start(
    job: Launch, requests: Sequence[WorkerRequest], moved_master: set[str], timeout_s: float | None
) -> Started:
    kept_ports = {
        c: g.master_port
        for c, g in job.worker_groups.items()
        if c not in moved_master and g.master_port is not None
    }

    def late_env(_i: int, worker: Worker, _first: Sequence[Mapping[str, Any]]) -> dict[str, str]:
        port = kept_ports.get(worker.component)
        return {} if port is None else {"MASTER_PORT": str(port)}

    return start_workers(
        requests,
        cluster=job.cluster,
        late_env=late_env,
        timeout_s=timeout_s,
        standbys=job.standbys,
    )


def recover(job: Launch, *, timeout_s: float | None = 120.0) -> RecoveryReport:
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
    try:
        result = replan(job.plan, lost)
    except NoSpareError as exc:
        raise NoSpareNodeError(
            f"cannot recover: {exc.reason}; nothing was changed", lost=exc.lost, needs=exc.needs
        ) from exc
    requests = _requests(job, result.plan, result.moves)
    moved_master = set(result.master_moves())
    job._drop_nodes(lost)
    started = _start(job, requests, moved_master, timeout_s)
    master = {c: (result.plan.master_addr(c), started.master_ports[c]) for c in moved_master}
    job._adopt(result.plan, result.moves, started, master)
    _announce(job, master, result.moves, timeout_s)
    report = RecoveryReport(
        lost=tuple(lost),
        moves=result.moves,
        dropped_spares=result.dropped_spares,
        master=master,
        rendezvous=tuple(c for c in job.plan.components if any(c in m.ranks for m in result.moves)),
        seconds=time.perf_counter() - started_at,
    )
    job._recovered(report)
    return report
