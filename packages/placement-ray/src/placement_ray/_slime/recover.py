"""Takeover for slime's objects: a lost node's train ranks and rollout engines, on a spare.

A layout made with ``spare_nodes`` keeps each node's bundles in a placement group of its
own and each spare reserved whole (``create_placement_groups``). ``SlimeLayout.recover``
then does what ``Launch.recover()`` does, with the same machinery (``_recover``):

1. find the layout's nodes (used and spare) that Ray no longer lists alive;
2. ask core's ``replan`` for the moves, on a plan of the layout's bundles and of every
   given group's workers (so one lost node goes to one spare, whatever it held); no
   compatible spare: ``NoSpareNodeError``, nothing changed;
3. choose what starts again: each train rank on a lost node, and each rollout engine with
   an actor there, whole (its actors on surviving nodes too: an engine lives or dies
   whole); check the GPU shares they take against the cluster view's ledger;
4. remove the lost nodes' groups (and lost spares'), kill what starts again, issue each
   request again at its new seat (the same class, arguments and options; a moved worker
   in the spare's group, an engine's surviving actor in its own node's), start them
   together: a moved rank 0 holds a new ``MASTER_PORT``, the other ranks get the kept
   one, and each re-created engine's ``dist_init_addr`` is made from its first actor;
5. update the layout's roles to the new seats (the spare's group becomes that node's),
   put the new workers in their places in the ``TrainGroup`` / ``RolloutEngines``, and
   re-announce a moved rank 0's ``MASTER_ADDR``/``MASTER_PORT`` to the survivors.
"""

from __future__ import annotations

import logging
import time
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ray.util.placement_group import PlacementGroup

from placement_core import (
    Move,
    Plan,
    Replan,
    format_rank_list,
    load_config,
    plan_from_assignments,
)
from placement_ray._allocate import Worker, release, worker_shares
from placement_ray._cluster import Cluster
from placement_ray._colocation import GpuShare, check_shares
from placement_ray._notice import warn
from placement_ray._placement_groups import BundleSlot, OrderedPlacementGroup
from placement_ray._recover import (
    RecoveryReport,
    announce,
    moved_ranks,
    reissue,
    replan_lost,
    start_again,
)
from placement_ray._request import WorkerRequest
from placement_ray._reservation import Reservation
from placement_ray._startup import Started
from placement_ray._worker_group import WorkerGroup
from placement_ray.errors import ArgumentError, NoSpareNodeError

from .bundles import RoleBundles
from .rollout import RolloutEngine, RolloutEngines, dist_init_env
from .train_group import TrainGroup

if TYPE_CHECKING:
    from .layout import SlimeLayout

__all__ = ["recover_layout"]

logger = logging.getLogger(__name__)

LAYOUT = "(layout bundles)"
"""The recovery plan's component of every bundle of the layout (so that each lost node
that holds bundles gets a spare, whichever workers were on it)."""

_NO_SPARES = (
    "; the layout was made without spare_nodes: make it with "
    "create_placement_groups(..., spare_nodes=...) to keep nodes for takeover"
)


def _members(
    layout: SlimeLayout, groups: Iterable[object]
) -> tuple[dict[str, WorkerGroup], dict[str, RolloutEngines]]:
    """Component -> its worker group, and the rollout engines among them; checked."""
    members: dict[str, WorkerGroup] = {}
    engines: dict[str, RolloutEngines] = {}
    held = {g.pg.id.hex() for g in layout.placement_groups}
    for item in groups:
        if isinstance(item, RolloutEngines):
            group: WorkerGroup = item.group
            engines[group.component] = item
        elif isinstance(item, TrainGroup):
            group = item
        else:
            raise ArgumentError(
                f"groups: expected the TrainGroup and RolloutEngines made on this layout, "
                f"got {item!r}"
            )
        if group._killed:
            raise ArgumentError(f"groups: the {group.component!r} group was killed")
        if group.component in members:
            raise ArgumentError(f"groups: two groups of {group.component!r}; pass each once")
        strangers = [
            w.name for w in group.workers if w.pg is not None and w.pg.id.hex() not in held
        ]
        if strangers:
            raise ArgumentError(
                f"groups: {strangers[0]} sits in a placement group this layout does not hold; "
                "pass the groups made on this layout"
            )
        members[group.component] = group
    return members, engines


def _roles(layout: SlimeLayout) -> list[RoleBundles]:
    return [r for r in (layout.actor, layout.critic, layout.rollout) if r is not None]


def _lost_nodes(
    layout: SlimeLayout, cluster: Cluster, members: Mapping[str, WorkerGroup]
) -> list[int]:
    watched = {n for role in _roles(layout) for n in role.node_ranks}
    watched.update(layout.node_groups)
    watched.update(layout.spare_groups)
    watched.update(w.node_rank for g in members.values() for w in g.workers)
    alive = cluster.alive_node_ids()
    return sorted(r for r in watched if cluster.node(r).node_id not in alive)


def _recovery_plan(
    layout: SlimeLayout, cluster: Cluster, members: Mapping[str, WorkerGroup]
) -> Plan:
    """One plan of the layout's bundles and every group's workers, with the free spares."""
    bundles = sorted(
        {
            (n, g)
            for role in _roles(layout)
            for n, g in zip(role.node_ranks, role.gpu_ids, strict=True)
        }
    )
    assignments: dict[str, list[tuple[int, tuple[int, ...]]]] = {
        LAYOUT: [(n, (g,)) for n, g in bundles]
    }
    for component, group in members.items():
        assignments[component] = [(w.node_rank, w.gpu_ids) for w in group.workers]
    config = load_config(
        {
            "cluster": {
                "num_nodes": cluster.num_nodes,
                "spare_nodes": list(layout.spare_nodes),
                "component_placement": dict.fromkeys(assignments, "all"),
            }
        }
    )
    return plan_from_assignments(assignments, cluster.inventory, config=config)


def _again(
    members: Mapping[str, WorkerGroup],
    engines: Mapping[str, RolloutEngines],
    moves: Sequence[Move],
) -> tuple[dict[str, list[int]], dict[str, tuple[int, ...]]]:
    """Component -> the ranks that start again, and those of them that stay on their node
    (an engine's actors on surviving nodes: an engine lives or dies whole)."""
    moved = {c: ranks for c, ranks in moved_ranks(moves).items() if c in members}
    again: dict[str, list[int]] = {}
    stay: dict[str, tuple[int, ...]] = {}
    for component, gone in moved.items():
        if component in engines:
            hit = [e for e in engines[component] if any(w.rank in gone for w in e.workers)]
            whole = sorted(w.rank for e in hit for w in e.workers)
            stay_here = tuple(r for r in whole if r not in gone)
            if stay_here:
                stay[component] = stay_here
            again[component] = whole
        else:
            again[component] = sorted(gone)
    return again, stay


def _requests(
    layout: SlimeLayout,
    members: Mapping[str, WorkerGroup],
    again: Mapping[str, Sequence[int]],
    result: Replan,
) -> list[WorkerRequest]:
    """Each worker that starts again, issued at its new placement: on a spare in the
    spare's group, on its own node in its node's group."""
    takers = {m.spare for m in result.moves}
    requests = []
    for component, ranks in again.items():
        placements = result.plan.components[component]
        for rank in ranks:
            node = placements[rank].node_rank
            group = layout.spare_groups[node] if node in takers else layout.node_groups[node]
            requests.append(reissue(members[component].workers[rank], result.plan, group))
    return requests


def _check_room(
    cluster: Cluster, requests: Sequence[WorkerRequest], releasing: Sequence[Worker]
) -> None:
    """The new workers' GPU shares, with what their bundles hold once ``releasing`` is gone.

    Raises:
        OversubscribedGPUError: a GPU would be given more than 1; nothing was created.
    """
    freed: dict[tuple[str, int], float] = defaultdict(float)
    for worker in releasing:
        for pg_id, index, share in worker_shares(worker):
            freed[(pg_id, index)] += share
    already: dict[tuple[int, int], float] = {}
    wanted: list[GpuShare] = []
    for request in requests:
        if request.seat.bundle is None:
            continue
        pg, first = request.seat.bundle
        pg_id = pg.id.hex()
        used = cluster.shares.used(pg_id)
        share = request.gpu_share or 1.0
        indices = (first, *request.seat.more_bundles)
        for gpu, index in zip(request.seat.gpu_ids, indices, strict=True):
            key = (request.node_rank, gpu)
            already[key] = max(0.0, used.get(index, 0.0) - freed[(pg_id, index)])
            wanted.append(GpuShare(request.name, request.node_rank, gpu, share))
    check_shares(wanted, already=already)


def _drop(
    reservation: Reservation,
    gone: Iterable[int],
    releasing: Sequence[Worker],
) -> None:
    """Remove the groups of lost nodes and lost spares; kill what starts again."""
    reservation.drop(gone)
    release(releasing, reservation.cluster.shares)


def _moved_role(
    bundles: RoleBundles, chosen: Mapping[int, int], groups: Mapping[int, OrderedPlacementGroup]
) -> RoleBundles:
    """The role's bundles with those of lost nodes on their spares (same GPU ids)."""
    if not any(n in chosen for n in bundles.node_ranks):
        return bundles
    positions: list[tuple[PlacementGroup, BundleSlot]] = []
    for i, (index, node, node_id, gpu) in enumerate(
        zip(
            bundles.bundle_indices,
            bundles.node_ranks,
            bundles.node_ids,
            bundles.gpu_ids,
            strict=True,
        )
    ):
        if node in chosen:
            group = groups[chosen[node]]
            positions.append((group.pg, next(s for s in group.slots if s.gpu_id == gpu)))
        else:
            positions.append((bundles.group_at(i), BundleSlot(index, node, node_id, (gpu,))))
    return RoleBundles.from_positions(bundles.role, positions, bundles.pg)


def _adopt_layout(layout: SlimeLayout, moves: Sequence[Move]) -> None:
    """The spares' groups become their nodes' groups; the roles follow the moves."""
    chosen = {m.lost: m.spare for m in moves}
    if layout.reservation is not None:
        layout.reservation.take_spares(chosen.values())
    layout.actor = _moved_role(layout.actor, chosen, layout.node_groups)
    layout.rollout = _moved_role(layout.rollout, chosen, layout.node_groups)
    if layout.critic is not None:
        layout.critic = _moved_role(layout.critic, chosen, layout.node_groups)
    first = layout.actor if len(layout.actor) else layout.rollout
    if len(first):
        layout.group = layout.node_groups[first.node_ranks[0]]


def _adopt_workers(
    members: Mapping[str, WorkerGroup],
    engines: Mapping[str, RolloutEngines],
    started: Started,
    master: Mapping[str, tuple[str, int | None]],
    addrs: Mapping[tuple[str, int], str],
) -> None:
    """Put the new workers in their ranks' places (train groups) and engines (rollout)."""
    fresh: dict[str, dict[int, tuple[Worker, Mapping[str, Any]]]] = defaultdict(dict)
    for worker, report in zip(started.workers, started.reports, strict=True):
        fresh[worker.component][worker.rank] = (worker, report)
    for component, moved in fresh.items():
        group = members[component]
        if component not in engines:
            addr, port = master.get(component, (group.master_addr, group.master_port))
            group._replace(moved, master_addr=addr, master_port=port)
            continue
        rebuilt = [
            RolloutEngine(
                index=e.index,
                workers=tuple(moved[w.rank][0] for w in e.workers),
                gpus=tuple(moved[w.rank][0].gpu_ids for w in e.workers),
                dist_init_addr=addrs[(component, e.index)],
                ports=tuple(dict(moved[w.rank][1].get("ports", {})) for w in e.workers),
                shared_with=e.shared_with,
            )
            for e in engines[component]
            if e.workers[0].rank in moved
        ]
        engines[component]._replace(rebuilt, {r: report for r, (_, report) in moved.items()})


def _engine_numbers(
    requests: Sequence[WorkerRequest], engines: Mapping[str, RolloutEngines]
) -> tuple[dict[int, int], dict[tuple[str, int], int]]:
    """Request index -> number of its engine, and ``(component, engine index)`` -> number,
    for the engines' actors among the requests (an engine's first actor comes first)."""
    owner = {
        (component, w.rank): e.index
        for component, group in engines.items()
        for e in group
        for w in e.workers
    }
    numbers: dict[tuple[str, int], int] = {}
    engine_of: dict[int, int] = {}
    for i, request in enumerate(requests):
        if request.component in engines:
            key = (request.component, owner[(request.component, request.rank)])
            engine_of[i] = numbers.setdefault(key, len(numbers))
    return engine_of, numbers


def recover_layout(
    layout: SlimeLayout, groups: Sequence[object], *, timeout_s: float | None = 120.0
) -> RecoveryReport:
    """``SlimeLayout.recover``: see it, and the module docstring."""
    started_at = time.perf_counter()
    cluster, reservation = layout.cluster, layout.reservation
    if cluster is None or reservation is None:
        raise ArgumentError("layout: it has no cluster view; make it with create_placement_groups")
    members, engines = _members(layout, groups)
    lost = _lost_nodes(layout, cluster, members)
    if not lost:
        return RecoveryReport()
    if layout.node_groups and not layout.spare_nodes:
        # The recovery plan is made anew from what the layout holds now: it knows no spare
        # was ever declared from none being left, so the layout says which it is.
        raise NoSpareNodeError(
            f"cannot recover: no compatible spare for lost {_nodes(lost)}: every spare node "
            "of the layout has taken over a node already; nothing was changed",
            lost=tuple(lost),
            needs={},
        )
    result = replan_lost(
        _recovery_plan(layout, cluster, members),
        lost,
        hint="" if layout.node_groups else _NO_SPARES,
    )
    again, stay = _again(members, engines, result.moves)
    requests = _requests(layout, members, again, result)
    releasing = [members[c].workers[r] for c, ranks in again.items() for r in ranks]
    _check_room(cluster, requests, releasing)
    moved_master = {c for c in result.master_moves() if c in members and c not in engines}
    _drop(reservation, lost, releasing)
    engine_of, numbers = _engine_numbers(requests, engines)
    dist_init, by_number = dist_init_env(engine_of)
    started = start_again(
        cluster, members, requests, moved_master, timeout_s=timeout_s, more_env=dist_init
    )
    master = {c: (result.plan.master_addr(c), started.master_ports[c]) for c in moved_master}
    _adopt_layout(layout, result.moves)
    addrs = {key: by_number[n] for key, n in numbers.items()}
    _adopt_workers(members, engines, started, master, addrs)
    moves = _worker_moves(result.moves, members)
    announce(members, master, {c: again[c] for c in master}, timeout_s)
    report = RecoveryReport(
        lost=tuple(lost),
        moves=moves,
        dropped_spares=result.dropped_spares,
        master=master,
        rendezvous=tuple(c for c in members if c in again),
        seconds=time.perf_counter() - started_at,
        restarted=stay,
    )
    layout.recoveries.append(report)
    warn(logger, f"node loss: {report.describe()}")
    return report


def _worker_moves(moves: Sequence[Move], members: Mapping[str, WorkerGroup]) -> tuple[Move, ...]:
    """The moves as the groups' workers made them (the layout's own bundles left out)."""
    out = []
    for move in moves:
        ranks = {c: r for c, r in move.ranks.items() if c in members}
        if ranks:
            out.append(Move(move.lost, move.spare, move.lost_node_id, move.spare_node_id, ranks))
    return tuple(out)


def _nodes(ranks: Sequence[int]) -> str:
    return f"node {ranks[0]}" if len(ranks) == 1 else f"nodes {format_rank_list(ranks)}"
