"""slime's layout: one placement group of 1-GPU bundles, sliced per role.

See docs/concepts/slime-layouts.md.

| mode (first flag that is set)          | bundles                       | rollout starts at |
|----------------------------------------|-------------------------------|-------------------|
| debug_train_only                       | actor_gpus                    | (no rollout)      |
| rollout_external                       | actor_gpus                    | (no rollout)      |
| rollout_external + debug_rollout_only  | actor_gpus                    | (no rollout)      |
| debug_rollout_only                     | rollout_gpus                  | 0                 |
| colocate                               | max(actor_gpus, rollout_gpus) | 0                 |
| disaggregated (default)                | actor_gpus + rollout_gpus     | actor_gpus        |

``actor_gpus = actor_num_nodes * actor_num_gpus_per_node``. With ``rollout_external`` the
engines run elsewhere, so only the trainer's GPUs are reserved. Bundles are ordered by
(node rank, physical GPU index), so rank r of the actor role sits in the r-th bundle and
nodes that share an IP are never interleaved (slime sorts by IP and GPU id, which does).
Each rollout engine keeps to one node (or to whole nodes): where filling nodes in order
would split one, every bundle is pinned to a node chosen for that; see ``alignment``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

from ray.util.placement_group import PlacementGroup

from placement_ray._cluster import Cluster
from placement_ray._feasibility import check_feasible
from placement_ray._placement_groups import (
    BundleSlot,
    OrderedPlacementGroup,
    create_placement_group,
    node_totals,
)
from placement_ray._rayapi import available_per_node
from placement_ray.errors import ArgumentError, EngineAlignmentError, UnknownRoleError

from .alignment import align_engines

__all__ = [
    "RoleBundles",
    "SlimeLayout",
    "create_placement_groups",
    "slime_bundle_counts",
]


@dataclass(frozen=True, slots=True)
class RoleBundles:
    """One role's share of the placement group, in rank order.

    Attributes:
        role: ``"actor"``, ``"critic"`` or ``"rollout"``.
        pg: The (shared) placement group.
        bundle_indices: Bundle index for rank 0, 1, ...
        node_ranks: Node rank of each of those bundles.
        node_ids: Ray node id of each of those bundles.
        gpu_ids: Physical GPU index (on its node) of each of those bundles.
    """

    role: str
    pg: PlacementGroup
    bundle_indices: tuple[int, ...]
    node_ranks: tuple[int, ...]
    node_ids: tuple[str, ...]
    gpu_ids: tuple[int, ...]

    def __len__(self) -> int:
        return len(self.bundle_indices)

    @classmethod
    def from_slots(
        cls, role: str, pg: PlacementGroup, slots: tuple[BundleSlot, ...]
    ) -> RoleBundles:
        """The role's view of some ordered bundles."""
        return cls(
            role=role,
            pg=pg,
            bundle_indices=tuple(s.index for s in slots),
            node_ranks=tuple(s.node_rank for s in slots),
            node_ids=tuple(s.node_id for s in slots),
            gpu_ids=tuple(s.gpu_id for s in slots),
        )


@dataclass(frozen=True, slots=True)
class SlimeLayout:
    """What ``create_placement_groups`` returns: the group and each role's slice.

    Index it like slime's dict: ``layout["actor"]``, ``layout["rollout"]`` and, where
    made with ``use_critic``, ``layout["critic"]``.

    Attributes:
        group: The placement group and all its bundles in order.
        actor: The trainer's bundles, rank by rank.
        rollout: The rollout engines' bundles; engine ``i`` of ``k`` GPUs takes positions
            ``i*k .. i*k+k-1``, all on one node (or whole nodes).
        mode: The layout's row of the table (``"disaggregated"``, ``"colocate"``, ...).
        critic: The critic's bundles (the trainer's, as in slime), or None.
        rollout_start: Position in ``group.slots`` where the rollout's slice starts.
        engine_size: GPUs per rollout engine the layout keeps within nodes.
        cluster: The cluster view that reserved the group (the train group and rollout
            engines default to it, so their GPU shares are checked against each other).
    """

    group: OrderedPlacementGroup
    actor: RoleBundles
    rollout: RoleBundles
    mode: str
    critic: RoleBundles | None = None
    rollout_start: int = 0
    engine_size: int = 1
    cluster: Cluster | None = field(default=None, repr=False, compare=False)

    def __getitem__(self, role: str) -> RoleBundles:
        if role == "actor":
            return self.actor
        if role == "rollout":
            return self.rollout
        if role == "critic" and self.critic is not None:
            return self.critic
        if role == "critic":
            raise UnknownRoleError("role: this layout has no 'critic' (made without use_critic)")
        raise UnknownRoleError(
            f"role: unknown role {role!r}; expected 'actor', 'critic' or 'rollout'"
        )

    def remove(self) -> None:
        """Remove the placement group."""
        self.group.remove()


def _count(name: str, value: object, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ArgumentError(f"{name}: expected an int >= {minimum}, got {value!r}")
    return value


def _flag(name: str, value: object) -> bool:
    if not isinstance(value, bool):
        raise ArgumentError(f"{name}: expected True or False, got {value!r}")
    return value


def slime_bundle_counts(
    actor_num_nodes: int,
    actor_num_gpus_per_node: int,
    rollout_num_gpus: int,
    *,
    colocate: bool = False,
    debug_train_only: bool = False,
    debug_rollout_only: bool = False,
    rollout_external: bool = False,
) -> tuple[str, int, int, int, int]:
    """The mode table of docs/concepts/slime-layouts.md as numbers, without a cluster.

    Returns:
        ``(mode, num_bundles, actor_count, rollout_start, rollout_count)``.
        ``rollout_start`` is where slime's rollout slice starts (it runs to the end of
        the group); ``rollout_count`` is how many of those GPUs local engines use.

    Raises:
        ArgumentError: a count that is not an int, a flag that is not a bool, both debug
            flags, or a mode that would reserve no GPU at all.
    """
    actor_gpus = _count("actor_num_nodes", actor_num_nodes, 0) * _count(
        "actor_num_gpus_per_node", actor_num_gpus_per_node, 0
    )
    rollout_gpus = _count("rollout_num_gpus", rollout_num_gpus, 0)
    for name, value in (
        ("colocate", colocate),
        ("debug_train_only", debug_train_only),
        ("debug_rollout_only", debug_rollout_only),
        ("rollout_external", rollout_external),
    ):
        _flag(name, value)
    if debug_train_only and debug_rollout_only:
        raise ArgumentError(
            "debug_train_only and debug_rollout_only: at most one may be set, got both"
        )
    if debug_train_only:
        mode, total, actors, start, rollouts = "debug_train_only", actor_gpus, actor_gpus, 0, 0
    elif rollout_external and debug_rollout_only:
        mode, total, actors, start, rollouts = (
            "rollout_external_debug_rollout_only",
            actor_gpus,
            actor_gpus,
            0,
            0,
        )
    elif rollout_external:
        mode, total, actors, start, rollouts = (
            "rollout_external",
            actor_gpus,
            actor_gpus,
            actor_gpus,
            0,
        )
    elif debug_rollout_only:
        mode, total, actors, start, rollouts = (
            "debug_rollout_only",
            rollout_gpus,
            0,
            0,
            rollout_gpus,
        )
    elif colocate:
        total = max(actor_gpus, rollout_gpus)
        mode, actors, start, rollouts = "colocate", actor_gpus, 0, rollout_gpus
    else:
        total = actor_gpus + rollout_gpus
        mode, actors, start, rollouts = "disaggregated", actor_gpus, actor_gpus, rollout_gpus
    if total == 0:
        raise ArgumentError(
            f"{mode} with actor_num_nodes={actor_num_nodes}, actor_num_gpus_per_node="
            f"{actor_num_gpus_per_node}, rollout_num_gpus={rollout_num_gpus} reserves no GPU"
        )
    return mode, total, actors, start, rollouts


def _fits(resources: Mapping[str, float], cpus_per_bundle: float) -> int:
    fits = int(resources.get("GPU", 0.0) + 1e-9)
    if cpus_per_bundle:
        fits = min(fits, int(resources.get("CPU", 0.0) / cpus_per_bundle + 1e-9))
    return fits


def _capacities(cluster: Cluster, cpus_per_bundle: float) -> tuple[list[int], list[int]]:
    """Per node rank, how many ``{"GPU": 1, "CPU": c}`` bundles fit now and ever."""
    available = available_per_node()
    now = [_fits(available.get(n.node_id, {}), cpus_per_bundle) for n in cluster.nodes]
    ever = [_fits(total, cpus_per_bundle) for total in node_totals(cluster)]
    return now, ever


def _pins(
    cluster: Cluster, cpus_per_bundle: float, engine_size: int, shape: Mapping[str, int]
) -> tuple[list[int], bool]:
    """Node of each position so that engines keep to nodes, and whether that is dense.

    Planned over what is free now where that works (the group is placed at once), else
    over the nodes' totals (it waits for running work); an engine bigger than a node is
    always planned over the totals, as it takes whole nodes. Dense: filling nodes in order
    gives the same nodes, so Ray's own ``PACK`` may well place it without pins.
    """
    now, ever = _capacities(cluster, cpus_per_bundle)
    # A multi-node engine takes whole nodes: only the totals say what is whole.
    if engine_size <= max(ever, default=0):
        try:
            pins = align_engines(now, engine_size=engine_size, **shape)
            return pins, pins == align_engines(now, engine_size=1, **shape)
        except EngineAlignmentError:
            pass
    pins = align_engines(ever, engine_size=engine_size, **shape)
    return pins, pins == align_engines(ever, engine_size=1, **shape)


def _check_engines(rollout: RoleBundles, engine_size: int) -> None:
    """Each engine's bundles on one node, or on whole nodes of one engine only."""
    for first in range(0, len(rollout), engine_size):
        nodes = rollout.node_ranks[first : first + engine_size]
        if len(set(nodes)) > 1 and any(
            nodes.count(n) != rollout.node_ranks.count(n) for n in set(nodes)
        ):
            raise EngineAlignmentError(
                f"rollout_num_gpus_per_engine: engine {first // engine_size} of "
                f"{engine_size} GPUs landed on nodes {sorted(set(nodes))} without holding "
                "them whole; only with strategy 'PACK' or 'SPREAD' are bundles pinned so "
                "that each engine keeps to a node",
                problems=[f"engine {first // engine_size} straddles nodes"],
            )


def create_placement_groups(
    actor_num_nodes: int,
    actor_num_gpus_per_node: int,
    rollout_num_gpus: int,
    *,
    rollout_num_gpus_per_engine: int = 1,
    colocate: bool = False,
    debug_train_only: bool = False,
    debug_rollout_only: bool = False,
    rollout_external: bool = False,
    use_critic: bool = False,
    cluster: Cluster | None = None,
    cpus_per_bundle: float = 1.0,
    strategy: str = "PACK",
    timeout_s: float | None = 60.0,
) -> SlimeLayout:
    """slime's placement groups, ordered by (node rank, physical GPU).

    See docs/concepts/slime-layouts.md.

    Unlike slime, which slices its ordered bundles by position whatever the nodes, every
    bundle is pinned to a node chosen so that each rollout engine of
    ``rollout_num_gpus_per_engine`` GPUs keeps to one node (or spans whole nodes); where
    no such choice exists, this fails before anything is reserved and names the engine
    sizes that would fit.

    Args:
        actor_num_nodes: Trainer nodes.
        actor_num_gpus_per_node: Trainer GPUs per node.
        rollout_num_gpus: GPUs of all rollout engines together.
        rollout_num_gpus_per_engine: GPUs per rollout engine (slime's
            ``--rollout-num-gpus-per-engine``).
        colocate: Trainer and rollout share GPUs (rollout starts at bundle 0).
        debug_train_only: Only the trainer's bundles; no rollout.
        debug_rollout_only: Only the rollout's bundles; no trainer.
        rollout_external: The engines run outside this cluster: only the trainer's
            bundles are reserved.
        use_critic: The layout has a critic on the trainer's bundles (as in slime).
        cluster: The job's cluster view (default: ``Cluster()``, attaching to the job).
        cpus_per_bundle: CPUs in each ``{"GPU": 1, "CPU": c}`` bundle.
        strategy: Placement-group strategy.
        timeout_s: Limit for placing the group (None: wait forever).

    Returns:
        The layout: ``layout["actor"]``, ``layout["rollout"]`` (and ``layout["critic"]``)
        each hold the group, the ordered bundle indices, and each bundle's node rank and
        physical GPU index.

    Raises:
        ArgumentError: bad counts or flags.
        InfeasiblePlacementGroupError: the cluster can never hold the group.
        EngineAlignmentError: it can, but not with every engine within a node (or whole
            nodes); the message lists the engine sizes that fit.
        PlacementGroupTimeoutError: it was not placed in time (and was removed).
    """
    mode, total, actors, start, rollouts = slime_bundle_counts(
        actor_num_nodes,
        actor_num_gpus_per_node,
        rollout_num_gpus,
        colocate=colocate,
        debug_train_only=debug_train_only,
        debug_rollout_only=debug_rollout_only,
        rollout_external=rollout_external,
    )
    engine_size = _count("rollout_num_gpus_per_engine", rollout_num_gpus_per_engine, 1)
    _flag("use_critic", use_critic)
    if (
        isinstance(cpus_per_bundle, bool)
        or not isinstance(cpus_per_bundle, int | float)
        or not math.isfinite(cpus_per_bundle)
        or cpus_per_bundle < 0
    ):
        raise ArgumentError(
            f"cpus_per_bundle: expected a finite number >= 0, got {cpus_per_bundle!r}"
        )
    if cluster is None:
        cluster = Cluster()
    bundle = {"GPU": 1.0, "CPU": float(cpus_per_bundle)} if cpus_per_bundle else {"GPU": 1.0}
    bundles = [bundle] * total
    pins: list[int] | None = None
    pinnable = strategy in ("PACK", "SPREAD")
    shape = {"actors": actors, "start": start, "rollouts": rollouts, "total": total}
    if pinnable:
        check_feasible(bundles, node_totals(cluster), strategy=strategy)
        pins, dense = _pins(cluster, float(cpus_per_bundle), engine_size, shape)
        if dense:
            # Try Ray's own PACK first: Ray before ray-project/ray#55599 ignores pins.
            pins = None
    group = create_placement_group(
        cluster, bundles, strategy=strategy, pin_to=pins, timeout_s=timeout_s
    )
    slots = group.slots
    rollout = RoleBundles.from_slots("rollout", group.pg, slots[start : start + rollouts])
    try:
        _check_engines(rollout, engine_size)
    except EngineAlignmentError:
        group.remove()
        if not pinnable or pins is not None:
            raise
        pins, _ = _pins(cluster, float(cpus_per_bundle), engine_size, shape)
        group = create_placement_group(
            cluster, bundles, strategy=strategy, pin_to=pins, timeout_s=timeout_s
        )
        slots = group.slots
        rollout = RoleBundles.from_slots("rollout", group.pg, slots[start : start + rollouts])
    actor = RoleBundles.from_slots("actor", group.pg, slots[:actors])
    return SlimeLayout(
        group=group,
        actor=actor,
        rollout=rollout,
        mode=mode,
        critic=RoleBundles.from_slots("critic", group.pg, slots[:actors]) if use_critic else None,
        rollout_start=start,
        engine_size=engine_size,
        cluster=cluster,
    )
