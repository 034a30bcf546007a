"""Warm spares: standby workers started ahead on spare nodes, adopted by a recovery.

Re-creating a lost worker costs a new Python process: Ray starts an interpreter, connects
it, unpickles the actor class (which imports the user's module: torch, the model code).
On a busy node that takes seconds per worker. ``launch(..., warm_spares=True)`` pays it
ahead: for every spare node and every used node it can replace, each worker there gets a
standby on the spare, seated where the worker would be moved (the same GPUs and bundle,
GPU share and CPUs), started with the same class, interpreter and node-group environment,
its ``__init__`` not run. ``recover()`` then adopts a standby instead of starting a
process: the worker's own environment (``RANK``, ``MASTER_ADDR``, ...) is set inside it,
its ports reserved there, and its ``__init__`` runs with its arguments. The standbys left
on a spare that took a node over are stopped.

A standby is made only where the spare's bundle holds it beside the standbys already
made (GPU share and CPUs summed per bundle); the used nodes are taken in rank order, so a
spare that can replace nodes of different workloads keeps standbys for the first ones
that fit. A lost worker without a matching standby is started as without warm spares.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from placement_core import CPU_AFFINITY_ENV, HARDWARE_CONFIG_ENV, RANK_ENV_VARS, format_rank_list

from ._allocate import Worker, adopt, allocate, release, wait_started
from ._notice import warn
from ._placement_groups import OrderedPlacementGroup, held_slots
from ._request import Seat, WorkerRequest, seat_for
from ._worker import DIST_INIT_ADDR_ENV
from .errors import PlacementRayError

if TYPE_CHECKING:
    from ._cluster import Cluster

__all__ = ["Standbys", "spare_requests", "standby_key", "warm_standbys"]

logger = logging.getLogger(__name__)

# Variables a standby cannot know before it is adopted: set inside it then.
_PER_WORKER_ENV = frozenset(
    {*RANK_ENV_VARS, CPU_AFFINITY_ENV, HARDWARE_CONFIG_ENV, DIST_INIT_ADDR_ENV}
)

StandbyKey = tuple[Any, ...]
"""What a standby must share with the worker it becomes (see :func:`standby_key`)."""


def _shared_env(env: Mapping[str, str]) -> frozenset[tuple[str, str]]:
    return frozenset((k, v) for k, v in env.items() if k not in _PER_WORKER_ENV)


def standby_key(request: WorkerRequest) -> StandbyKey:
    """Node, GPUs and bundle, class, interpreter, environment shared by every worker of
    the node group, GPU share and CPUs: a standby with the same key can become the worker
    of ``request``."""
    seat, options = request.seat, request.options
    bundle = None if seat.bundle is None else (seat.bundle[0].id.hex(), seat.bundle[1])
    return (
        seat.node_rank,
        seat.gpu_ids,
        bundle,
        seat.more_bundles,
        options.cls,
        request.interpreter,
        _shared_env(request.env),
        options.gpu_share if seat.bundle is not None else None,
        options.num_cpus,
        options.capture_child_tasks,
        options.detached,
    )


@dataclass
class Standbys:
    """The standbys of a launch, by key; adopted ones are taken out.

    Attributes:
        idle: Key -> the started standbys of that key not adopted yet.
    """

    idle: dict[StandbyKey, list[Worker]] = field(default_factory=dict)

    def __len__(self) -> int:
        return sum(len(workers) for workers in self.idle.values())

    def __repr__(self) -> str:
        # Short: the workers' handles and requests would make it kilobytes.
        nodes = sorted({w.node_rank for w in self.workers()})
        return f"Standbys({len(self)} idle on nodes {format_rank_list(nodes) or '-'})"

    def workers(self) -> list[Worker]:
        """Every idle standby."""
        return [w for workers in self.idle.values() for w in workers]

    def adopt(self, requests: Sequence[WorkerRequest], *, cluster: Cluster) -> dict[int, Worker]:
        """Adopt a standby for each request that has one; stop the others on the nodes
        the requests go to (those spares now hold workers).

        Returns:
            Request index -> its worker (a standby that became it).
        """
        taken: dict[int, Worker] = {}
        for index, request in enumerate(requests):
            waiting = self.idle.get(standby_key(request))
            if not waiting:
                continue
            standby = waiting.pop()
            try:
                taken[index] = adopt(standby, request, cluster=cluster)
            except BaseException:  # the one in hand and those adopted so far
                release([standby, *taken.values()], cluster.shares)
                raise
        self.stop({r.node_rank for r in requests}, cluster=cluster)
        return taken

    def stop(self, node_ranks: Iterable[int] | None = None, *, cluster: Cluster) -> None:
        """Stop the idle standbys on ``node_ranks`` (all of them for None)."""
        ranks = None if node_ranks is None else set(node_ranks)
        stopped: list[Worker] = []
        for key, workers in list(self.idle.items()):
            if ranks is None or key[0] in ranks:  # a key starts with its node rank
                stopped += workers
                del self.idle[key]
        release(stopped, cluster.shares)


def _bundle_room(group: OrderedPlacementGroup) -> dict[int, list[float]]:
    """Bundle index -> ``[accelerator share left, CPUs left]`` of a spare's group."""
    specs = group.pg.bundle_specs
    return {s.index: [1.0, float(specs[s.index].get("CPU", 0.0))] for s in group.slots}


def _fits(room: dict[int, list[float]], request: WorkerRequest) -> bool:
    """Whether the spare's bundles hold the request's standby; books it if so."""
    if request.seat.bundle is None:
        return True
    share = request.options.gpu_share
    share = 1.0 if share is None else share
    bundle = request.seat.bundle[1]
    wanted = [(bundle, share, request.options.num_cpus)]
    wanted += [(b, share, 0.0) for b in request.seat.more_bundles]
    if any(room[b][0] + 1e-9 < s or room[b][1] + 1e-9 < c for b, s, c in wanted if b in room):
        return False
    for b, s, c in wanted:
        if b in room:
            room[b][0] -= s
            room[b][1] -= c
    return True


def _standby_request(request: WorkerRequest, number: int) -> WorkerRequest:
    """The request a standby of ``request``'s key is started from: no rank, no ports,
    no arguments, only the environment every worker of the node group shares."""
    return replace(
        request,
        rank=-1,
        name=f"standby {number} for {request.component} on node {request.node_rank}",
        placement=None,
        options=replace(request.options, args=(), kwargs={}, actor_prefix=None),
        env=dict(_shared_env(request.env)),
        port_blocks={},
    )


def _wanted(
    candidates: Mapping[int, Sequence[WorkerRequest]],
    spare: int,
    group: OrderedPlacementGroup | None,
) -> list[WorkerRequest]:
    """The standbys one spare keeps: per key, the most any one replaceable node needs,
    where the spare's bundles hold them."""
    room = {} if group is None else _bundle_room(group)
    have: Counter[StandbyKey] = Counter()
    out: list[WorkerRequest] = []
    for used in sorted(candidates):
        seen: Counter[StandbyKey] = Counter()
        for request in candidates[used]:
            key = standby_key(request)
            seen[key] += 1
            if seen[key] > have[key] and _fits(room, request):
                have[key] += 1
                out.append(request)
    logger.debug("spare node %d: %d standby(s)", spare, len(out))
    return out


def warm_standbys(
    moved: Mapping[int, Mapping[int, Sequence[WorkerRequest]]],
    *,
    cluster: Cluster,
    spare_groups: Mapping[int, OrderedPlacementGroup],
    name: str | None = None,
    timeout_s: float | None = 120.0,
) -> Standbys:
    """Start the standbys of every spare and wait for them.

    Args:
        moved: Spare node rank -> used node rank -> the requests of that node's workers
            as they would be re-issued on the spare.
        cluster: The job's cluster view (the standbys' shares are booked in its ledger).
        spare_groups: Spare node rank -> the placement group reserving it.
        name: The launch's name: standbys are named ``<name>/standby/<spare>/<n>``.
        timeout_s: Limit for the standbys to start. Standbys that do not start in time
            are stopped and the launch goes on without them (logged).

    Returns:
        The started standbys.
    """
    standbys = Standbys()
    made: list[tuple[StandbyKey, Worker]] = []
    try:
        for spare, candidates in sorted(moved.items()):
            for number, request in enumerate(_wanted(candidates, spare, spare_groups.get(spare))):
                actor_name = None if name is None else f"{name}/standby/{spare}/{number}"
                worker = allocate(
                    _standby_request(request, number),
                    cluster=cluster,
                    check_interpreter=False,
                    defer_init=True,
                    actor_name=actor_name,
                )
                made.append((standby_key(request), worker))
        wait_started([w for _, w in made], timeout_s=timeout_s)
    except PlacementRayError as exc:
        release([w for _, w in made], cluster.shares)
        warn(logger, f"warm spares: the standbys could not start, none kept: {exc}")
        return standbys
    for key, worker in made:
        standbys.idle.setdefault(key, []).append(worker)
    return standbys


def spare_requests(
    replaces: Mapping[int, Sequence[int]],
    workers: Iterable[Worker],
    spare_groups: Mapping[int, OrderedPlacementGroup],
) -> dict[int, dict[int, list[WorkerRequest]]]:
    """Spare -> used node it can replace -> its workers' requests seated on the spare.

    Only the seat changes (a spare has the same accelerators and node groups, so the
    environment every worker of the group shares is the same there).
    """
    by_node: dict[int, list[WorkerRequest]] = {}
    for worker in workers:
        request = worker.request
        if request is not None and request.placement is not None:
            by_node.setdefault(worker.node_rank, []).append(request)
    out: dict[int, dict[int, list[WorkerRequest]]] = {}
    for spare, used in replaces.items():
        group = spare_groups.get(spare)
        held = held_slots(group)
        out[spare] = {
            node: [_seated(r, spare, group, held) for r in by_node.get(node, [])] for node in used
        }
    return out


def _seated(
    request: WorkerRequest,
    spare: int,
    group: OrderedPlacementGroup | None,
    held: Mapping[tuple[int, int], tuple[int, int]],
) -> WorkerRequest:
    assert request.placement is not None
    placement = replace(request.placement, node_rank=spare)
    seat: Seat = seat_for(placement, None if group is None else group.pg, held)
    return replace(request, seat=seat)
