"""slime's rollout engines on ``create_placement_groups``' rollout role.

An engine has ``num_gpus_per_engine`` GPUs: consecutive ordered bundles on one node, or
whole nodes for a multi-node engine (one actor per node; every node of the engine is
given node 0's ``dist_init_addr``). Each engine actor takes a small GPU share (0.2) of
its first bundle, with child-task capture, and sees exactly its GPUs, renumbered
``0..k-1`` under the visibility variable. Per actor, named port blocks (server, nccl, a
dist-init block of ``30 + dp_size``) are reserved and HELD inside the actor, on its own
node, so engines on one node never collide and nothing else can take the ports before
the engine's server binds them (``placement_ray.hand_over_ports("server")``).

Strided colocation: given the trainer's TP size ``t``, engines of TP ``r`` use core's
packed placement with ``per_process=r, stride=t/r`` over the trainer's GPUs, and each
engine reports which trainer ranks share its GPUs (by GPU UUID where known).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from placement_core import (
    Inventory,
    Node,
    Plan,
    plan_from_assignments,
    shared_ranks,
    strided_rollout,
)
from placement_ray._allocate import Worker
from placement_ray._cluster import Cluster
from placement_ray._colocation import GpuShare, check_shares, validate_share
from placement_ray._request import WorkerOptions, WorkerRequest, worker_request
from placement_ray._startup import LateEnv, start_workers
from placement_ray._worker import DIST_INIT_ADDR_ENV
from placement_ray._worker_group import WorkerGroup
from placement_ray.errors import ArgumentError

from .bundles import RoleBundles, role_seats
from .train_group import bundle_plan, used_shares

if TYPE_CHECKING:
    from .layout import SlimeLayout

__all__ = [
    "DIST_INIT_ADDR_ENV",
    "ENGINE_GPU_SHARE",
    "RolloutEngine",
    "RolloutEngines",
    "create_rollout_engines",
    "default_port_blocks",
    "dist_init_env",
    "engine_gpu_sets",
    "engine_requests",
]

ENGINE_GPU_SHARE = 0.2
"""Default GPU share of an engine actor in its first bundle."""

DIST_INIT_BLOCK = "dist_init"


def default_port_blocks(dp_size: int = 1) -> dict[str, int]:
    """slime's blocks per engine: ``{"server": 1, "nccl": 1, "dist_init": 30 + dp_size}``."""
    if isinstance(dp_size, bool) or not isinstance(dp_size, int) or dp_size < 1:
        raise ArgumentError(f"dp_size: expected an int >= 1, got {dp_size!r}")
    return {"server": 1, "nccl": 1, DIST_INIT_BLOCK: 30 + dp_size}


@dataclass(frozen=True, slots=True)
class RolloutEngine:
    """One rollout engine: its actors (one per node) and what they hold.

    Attributes:
        index: The engine's index.
        workers: Its actors, node 0 of the engine first.
        gpus: Per actor, the physical GPU ids it sees (as ``0..k-1``).
        dist_init_addr: Node 0's ``host:port`` that every actor of the engine uses.
        ports: Per actor, its held port blocks by name.
        shared_with: Trainer ranks whose GPUs this engine uses (empty if none).
    """

    index: int
    workers: tuple[Worker, ...]
    gpus: tuple[tuple[int, ...], ...]
    dist_init_addr: str
    ports: tuple[Mapping[str, tuple[int, ...]], ...]
    shared_with: tuple[int, ...] = ()

    @property
    def node_ranks(self) -> tuple[int, ...]:
        """The engine's nodes, node 0 of the engine first."""
        return tuple(w.node_rank for w in self.workers)

    @property
    def num_gpus(self) -> int:
        """GPUs of the engine over all its nodes."""
        return sum(len(g) for g in self.gpus)


class RolloutEngines:
    """All engines, plus one ``WorkerGroup`` over every engine actor (engine order)."""

    def __init__(self, engines: Sequence[RolloutEngine], group: WorkerGroup) -> None:
        self.engines = tuple(engines)
        self.group = group

    def __len__(self) -> int:
        return len(self.engines)

    def __getitem__(self, index: int) -> RolloutEngine:
        return self.engines[index]

    def __iter__(self) -> Iterator[RolloutEngine]:
        return iter(self.engines)

    def kill(self) -> None:
        """Kill every engine actor (their held ports close with them)."""
        self.group.kill()

    def _replace(
        self, engines: Sequence[RolloutEngine], reports: Mapping[int, Mapping[str, Any]]
    ) -> None:
        """Put re-created engines in their places (``reports``: actor rank -> its report)."""
        fresh = {e.index: e for e in engines}
        moved = {w.rank: (w, reports[w.rank]) for e in engines for w in e.workers}
        self.group._replace(
            moved, master_addr=self.group.master_addr, master_port=self.group.master_port
        )
        self.engines = tuple(fresh.get(e.index, e) for e in self.engines)


def _sub_inventory(cluster: Cluster, bundles: RoleBundles) -> tuple[Inventory, list[int]]:
    """The rollout's GPUs as an inventory (node i = i-th distinct node); its real ranks."""
    real: list[int] = []
    gpus: dict[int, list[int]] = {}
    for node_rank, gpu in zip(bundles.node_ranks, bundles.gpu_ids, strict=True):
        if node_rank not in gpus:
            real.append(node_rank)
            gpus[node_rank] = []
        gpus[node_rank].append(gpu)
    nodes = []
    for i, node_rank in enumerate(real):
        node = cluster.node(node_rank)
        known = {a.index: a for a in node.accelerators}
        accelerators = tuple(known[g] for g in sorted(gpus[node_rank]))
        nodes.append(Node(rank=i, node_id=node.node_id, ip=node.ip, accelerators=accelerators))
    return Inventory(tuple(nodes)), real


def engine_gpu_sets(
    cluster: Cluster,
    bundles: RoleBundles,
    num_gpus_per_engine: int,
    *,
    trainer_tp: int | None = None,
) -> list[list[tuple[int, tuple[int, ...]]]]:
    """Per engine, per actor: ``(node rank, physical GPU ids)``.

    Raises:
        ArgumentError: the counts do not divide, an engine would straddle nodes without
            spanning them whole, or ``trainer_tp`` is not a multiple of the engine size.
    """
    k = num_gpus_per_engine
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ArgumentError(f"num_gpus_per_engine: expected an int >= 1, got {k!r}")
    if not len(bundles) or len(bundles) % k:
        raise ArgumentError(
            f"num_gpus_per_engine: {len(bundles)} rollout GPUs do not divide into engines of {k}"
        )
    if trainer_tp is not None:
        inventory, real = _sub_inventory(cluster, bundles)
        try:
            strided = strided_rollout(trainer_tp, k, inventory)
        except ValueError as exc:
            raise ArgumentError(f"trainer_tp={trainer_tp}, num_gpus_per_engine={k}: {exc}") from exc
        return [[(real[p.node_rank], p.hardware_ranks)] for p in strided.placements]
    engines = []
    for start in range(0, len(bundles), k):
        parts: dict[int, list[int]] = {}
        for node_rank, gpu in zip(
            bundles.node_ranks[start : start + k], bundles.gpu_ids[start : start + k], strict=True
        ):
            parts.setdefault(node_rank, []).append(gpu)
        if len(parts) > 1:
            partial = [
                (n, len(g), len(cluster.node(n).accelerators))
                for n, g in parts.items()
                if len(g) != len(cluster.node(n).accelerators)
            ]
            if partial:
                shown = ", ".join(f"node {n}: {got} of {total}" for n, got, total in partial)
                raise ArgumentError(
                    f"num_gpus_per_engine: engine {start // k} ({k} GPUs) spans nodes "
                    f"{list(parts)} without holding them whole ({shown}); a multi-node "
                    "engine must span whole nodes, a smaller one must fit one node (make "
                    f"the layout with rollout_num_gpus_per_engine={k} to get such nodes)"
                )
        engines.append([(n, tuple(g)) for n, g in parts.items()])
    return engines


def create_rollout_engines(
    layout: SlimeLayout,
    engine_cls: Any,
    *,
    num_gpus_per_engine: int,
    cluster: Cluster | None = None,
    gpu_share: float = ENGINE_GPU_SHARE,
    port_blocks: Mapping[str, int] | None = None,
    dp_size: int = 1,
    trainer_tp: int | None = None,
    args: Sequence[Any] = (),
    kwargs: Mapping[str, Any] | None = None,
    env_vars: Mapping[str, str] | None = None,
    timeout_s: float | None = 120.0,
) -> RolloutEngines:
    """Start the rollout engines on ``layout["rollout"]``.

    Args:
        layout: From ``create_placement_groups``.
        engine_cls: The engine actor class (plain or ``@ray.remote``).
        num_gpus_per_engine: GPUs per engine (its TP size); more than a node's GPUs
            makes a multi-node engine of whole nodes.
        cluster: The job's cluster view (default: the layout's, else ``Cluster()``); GPU
            shares are checked against those started through the same view.
        gpu_share: Each engine actor's share of its first bundle (default 0.2).
        port_blocks: Block name -> port count held by each engine actor (default
            :func:`default_port_blocks`); the dist-init block only on an engine's node 0.
        dp_size: Data-parallel size (sizes the default dist-init block).
        trainer_tp: Strided colocation: the trainer's TP size (a multiple of
            ``num_gpus_per_engine``); engines then take ``per_process=num_gpus_per_engine,
            stride=trainer_tp / num_gpus_per_engine`` over the rollout bundles' GPUs.
        args: Constructor arguments of every engine actor.
        kwargs: Constructor keyword arguments of every engine actor.
        env_vars: Extra environment of every engine actor.
        timeout_s: Limit for the actors to start (and, separately, their ``__init__``).

    Raises:
        ArgumentError: bad sizes or shares.
        OversubscribedGPUError: with the shares already on these GPUs (a colocated
            trainer), one would exceed 1.
        WorkerStartTimeoutError: actors did not start in time (named, with the cause).
        WorkerStartError: actors died starting, or their ``__init__`` raised.
    """
    if cluster is None:
        cluster = layout.cluster or Cluster()
    bundles = layout["rollout"]
    share = validate_share("gpu_share", gpu_share)
    blocks = _engine_blocks(port_blocks, dp_size)
    sets = engine_gpu_sets(cluster, bundles, num_gpus_per_engine, trainer_tp=trainer_tp)
    check_shares(
        (
            GpuShare(f"rollout engine {e} node {j}", n, gpu, share)
            for e, parts in enumerate(sets)
            for j, (n, ids) in enumerate(parts)
            for gpu in ids
        ),
        already=used_shares(cluster.shares, bundles),
    )
    options = WorkerOptions(
        engine_cls,
        args=tuple(args),
        kwargs=dict(kwargs or {}),
        env_vars=dict(env_vars or {}),
        rank_env=False,
        gpu_share=share,
        port_blocks={name: (count, count > 1) for name, count in blocks.items()},
        capture_child_tasks=True,
    )
    the_plan, requests = engine_requests(cluster, bundles, sets, options)
    engine_of = [e for e, parts in enumerate(sets) for _ in parts]
    dist_init, addrs = dist_init_env(dict(enumerate(engine_of)))
    started = start_workers(requests, cluster=cluster, late_env=dist_init, timeout_s=timeout_s)
    shared = _shared_with(layout, cluster, the_plan, sets)
    engines = []
    for e, parts in enumerate(sets):
        members = [i for i, owner in enumerate(engine_of) if owner == e]
        engines.append(
            RolloutEngine(
                index=e,
                workers=tuple(started.workers[i] for i in members),
                gpus=tuple(ids for _, ids in parts),
                dist_init_addr=addrs[e],
                ports=tuple(dict(started.reports[i].get("ports", {})) for i in members),
                shared_with=tuple(sorted({r for i in members for r in shared[i]})),
            )
        )
    group = WorkerGroup("rollout", started.workers, cluster=cluster, reports=started.reports)
    return RolloutEngines(engines, group)


def dist_init_env(engine_of: Mapping[int, int]) -> tuple[LateEnv, dict[int, str]]:
    """Each engine actor's ``PLACEMENT_DIST_INIT_ADDR``, made from its engine's first actor.

    Args:
        engine_of: Index of a started worker -> its engine, for the engine actors among
            the workers; an engine's first index is its node 0 (the dist-init block's
            holder).

    Returns:
        The late environment for ``start_workers`` and, filled as it runs, engine ->
        ``host:port``.
    """
    heads: dict[int, int] = {}
    for i, e in sorted(engine_of.items()):
        heads.setdefault(e, i)
    addrs: dict[int, str] = {}

    def dist_init(i: int, worker: Worker, first: Sequence[Mapping[str, Any]]) -> dict[str, str]:
        e = engine_of.get(i)
        if e is None:
            return {}
        if e not in addrs:
            head = first[heads[e]]
            held = head["ports"].get(DIST_INIT_BLOCK)
            addrs[e] = f"{head['ip']}:{held[0]}" if held else f"{head['ip']}:"
        return {DIST_INIT_ADDR_ENV: addrs[e]}

    return dist_init, addrs


def _engine_blocks(port_blocks: Mapping[str, int] | None, dp_size: int) -> dict[str, int]:
    """The port blocks every engine actor holds: checked, or slime's default."""
    if port_blocks is not None and not isinstance(port_blocks, Mapping):
        raise ArgumentError(
            f"port_blocks: expected a mapping of block name to port count, got {port_blocks!r}"
        )
    blocks = dict(default_port_blocks(dp_size) if port_blocks is None else port_blocks)
    for name, count in blocks.items():
        if not isinstance(name, str) or not name:
            raise ArgumentError(f"port_blocks: expected non-empty block names, got {name!r}")
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise ArgumentError(f"port_blocks[{name!r}]: expected a port count >= 1, got {count!r}")
    return blocks


def engine_requests(
    cluster: Cluster,
    bundles: RoleBundles,
    sets: Sequence[Sequence[tuple[int, tuple[int, ...]]]],
    options: WorkerOptions,
) -> tuple[Plan, list[WorkerRequest]]:
    """The rollout's plan (one rank per engine actor, engine order) and their requests.

    Engine ``e``'s actor on its ``j``-th node is named ``rollout engine e node j`` (just
    ``rollout engine e`` for a one-node engine); only an engine's node 0 holds the
    dist-init port block.
    """
    the_plan = plan_from_assignments(
        {"rollout": [part for parts in sets for part in parts]}, cluster.inventory
    )
    seat = role_seats(bundles)
    members = replace(
        options,
        port_blocks={k: v for k, v in options.port_blocks.items() if k != DIST_INIT_BLOCK},
    )
    placements = iter(the_plan.components["rollout"])
    requests = []
    for e, parts in enumerate(sets):
        for j in range(len(parts)):
            p = next(placements)
            requests.append(
                worker_request(
                    the_plan,
                    "rollout",
                    p,
                    options if j == 0 else members,
                    seat(p),
                    name=f"rollout engine {e}" + (f" node {j}" if len(parts) > 1 else ""),
                )
            )
    return the_plan, requests


def _shared_with(
    layout: SlimeLayout,
    cluster: Cluster,
    the_plan: Plan,
    sets: Sequence[Sequence[tuple[int, tuple[int, ...]]]],
) -> list[tuple[int, ...]]:
    """Per engine actor, the trainer ranks using one of its GPUs (colocated layouts)."""
    actors = sum(len(parts) for parts in sets)
    if layout.mode != "colocate" or not len(layout.actor):
        return [()] * actors
    trainer = bundle_plan(cluster, "actor", layout.actor).components["actor"]
    return list(shared_ranks(trainer, the_plan.components["rollout"], cluster.inventory))
