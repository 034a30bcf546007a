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
Where the nodes name NVLink domains, an engine of several nodes takes nodes of one domain.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from placement_core import (
    PlacementError,
    accelerator_kind,
    parse_rank_list,
    ray_resource,
    registered_accelerators,
)
from placement_ray._accelerators import node_resource
from placement_ray._cluster import Cluster
from placement_ray._feasibility import check_feasible
from placement_ray._free_view import is_partial
from placement_ray._placement_groups import OrderedPlacementGroup, node_totals
from placement_ray._rayapi import available_per_node
from placement_ray._recover import RecoveryReport
from placement_ray._reservation import Reservation
from placement_ray._slime.shared import share_layout
from placement_ray.errors import ArgumentError, EngineAlignmentError, UnknownRoleError

from .alignment import Domains, align_engines
from .bundles import RoleBundles, role_seats
from .recover import recover_layout

if TYPE_CHECKING:
    from .rollout import RolloutEngines
    from .train_group import TrainGroup

__all__ = [
    "RoleBundles",
    "SlimeLayout",
    "create_placement_groups",
    "role_seats",
    "slime_bundle_counts",
]


@dataclass(slots=True, eq=False)
class SlimeLayout:
    """What ``create_placement_groups`` returns: the group(s) and each role's slice.

    Index it like slime's dict: ``layout["actor"]``, ``layout["rollout"]`` and, where
    made with ``use_critic``, ``layout["critic"]``. Made with ``spare_nodes``, each node's
    bundles are a placement group of their own and each spare is reserved whole, so that
    :meth:`recover` can put a lost node's workers on a spare; :meth:`recover` updates the
    layout in place.

    Attributes:
        group: The placement group and all its bundles in order; with spare nodes, the
            group of the layout's first node (every group: ``placement_groups``).
        actor: The trainer's bundles, rank by rank.
        rollout: The rollout engines' bundles; engine ``i`` of ``k`` GPUs takes positions
            ``i*k .. i*k+k-1``, all on one node (or whole nodes).
        mode: The layout's row of the table (``"disaggregated"``, ``"colocate"``, ...).
        critic: The critic's bundles (the trainer's, as in slime), or None.
        rollout_start: Position in the ordered bundles where the rollout's slice starts.
        engine_size: GPUs per rollout engine the layout keeps within nodes.
        cluster: The cluster view that reserved the group (the train group and rollout
            engines default to it, so their GPU shares are checked against each other).
        reservation: Every placement group the layout holds, and their removal.
        recoveries: The reports of the recoveries done so far, oldest first.
    """

    group: OrderedPlacementGroup
    actor: RoleBundles
    rollout: RoleBundles
    mode: str
    critic: RoleBundles | None = None
    rollout_start: int = 0
    engine_size: int = 1
    cluster: Cluster | None = field(default=None, repr=False)
    reservation: Reservation | None = field(default=None, repr=False)
    recoveries: list[RecoveryReport] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.reservation is None and self.cluster is not None:  # a layout made by hand
            self.reservation = Reservation(self.cluster, ordered=[self.group])

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

    @property
    def node_groups(self) -> dict[int, OrderedPlacementGroup]:
        """With spare nodes: node rank -> the group of that node's bundles (else empty)."""
        return {} if self.reservation is None else self.reservation.groups

    @property
    def spare_groups(self) -> dict[int, OrderedPlacementGroup]:
        """With spare nodes: spare node rank -> the group reserving every accelerator of
        it, until a recovery takes it over (else empty)."""
        return {} if self.reservation is None else self.reservation.spares

    @property
    def placement_groups(self) -> tuple[OrderedPlacementGroup, ...]:
        """Every group the layout holds: the one group, or each node's then each spare's."""
        if self.reservation is None:
            return (self.group,)
        return self.reservation.all_groups

    @property
    def spare_nodes(self) -> tuple[int, ...]:
        """The spare nodes still free, ascending."""
        return tuple(sorted(self.spare_groups))

    def recover(
        self, *groups: TrainGroup | RolloutEngines, timeout_s: float | None = 120.0
    ) -> RecoveryReport:
        """Re-create the given groups' workers of lost nodes on spare nodes.

        The lost nodes are the layout's nodes (used or spare) Ray no longer lists alive.
        Core's ``replan`` maps each to a compatible spare (same accelerators; lowest rank
        first), as ``placement plan --lose`` would. Each train rank there is issued again
        on the spare (same class, arguments and environment: ``RANK``, ``LOCAL_RANK``,
        ``WORLD_SIZE``, visibility; a moved rank 0 holds a new ``MASTER_PORT`` and the
        survivors are told the new ``MASTER_ADDR``/``MASTER_PORT``). Each rollout engine
        with a GPU there is re-created whole: its size and GPU order are kept, its
        actors on other nodes are re-created too (an engine lives or dies whole), and
        its ``dist_init_addr`` is made anew from its first node. Survivors keep their
        processes and handles; the layout's roles, the train group's ranks and the
        engines' order follow the new seats.

        Pass every train group and rollout engine set running on the layout: workers of
        a group not passed stay lost.

        Args:
            *groups: The ``TrainGroup`` (s) and ``RolloutEngines`` made on this layout.
            timeout_s: Limit for the new workers to start (and, separately, their
                ``__init__``).

        Returns:
            Which ranks moved from which node to which spare, which engine actors were
            re-created on their own nodes, the re-announced master addresses and the
            seconds taken (empty when no node is lost).

        Raises:
            ArgumentError: something other than a train group or rollout engines of this
                layout, two groups of one role, or a killed group.
            NoSpareNodeError: a lost node has no compatible spare (or the layout was made
                without ``spare_nodes``); nothing was changed.
            WorkerStartError / WorkerStartTimeoutError: a re-created worker did not start.
            WorkerCallError: a survivor could not be told its new master address.
        """
        return recover_layout(self, groups, timeout_s=timeout_s)

    def remove(self) -> None:
        """Remove the placement group(s), spares' included; idempotent.

        Raises:
            ArgumentError: a layout made by hand with neither a cluster view nor a
                reservation (nothing here owns its group).
        """
        if self.reservation is None:
            raise ArgumentError(
                "layout: it holds no reservation (made by hand without cluster=); remove "
                "its group with group.remove(), or make it with create_placement_groups"
            )
        self.reservation.release()


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


def _fits(resources: Mapping[str, float], cpus_per_bundle: float, resource: str) -> int:
    fits = int(resources.get(resource, 0.0) + 1e-9)
    if cpus_per_bundle:
        fits = min(fits, int(resources.get("CPU", 0.0) / cpus_per_bundle + 1e-9))
    return fits


def _capacities(
    cluster: Cluster, cpus_per_bundle: float, resource: str, exclude: frozenset[int] = frozenset()
) -> tuple[list[int], list[int]]:
    """Per node rank, how many ``{resource: 1, "CPU": c}`` bundles fit now and ever (none
    on the ``exclude`` nodes: spares)."""
    available = available_per_node()
    now = [_fits(available.get(n.node_id, {}), cpus_per_bundle, resource) for n in cluster.nodes]
    ever = [_fits(total, cpus_per_bundle, resource) for total in node_totals(cluster)]
    now = [0 if rank in exclude else fits for rank, fits in enumerate(now)]
    ever = [0 if rank in exclude else fits for rank, fits in enumerate(ever)]
    return now, ever


def layout_resource(cluster: Cluster, accelerator: str | None) -> str:
    """The Ray resource of a layout's bundles: ``accelerator``'s, else the cluster's one type's.

    Raises:
        ArgumentError: ``accelerator`` is not a registered type, or it is None and the
            cluster's nodes have accelerators of several types (or none).
    """
    if accelerator is not None:
        if not isinstance(accelerator, str) or accelerator_kind(accelerator) is None:
            raise ArgumentError(
                f"accelerator: expected a registered accelerator type "
                f"({', '.join(registered_accelerators())}), got {accelerator!r}"
            )
        return ray_resource(accelerator)
    kinds = sorted({n.accelerator_type for n in cluster.nodes if n.accelerator_type})
    if len(kinds) != 1:
        raise ArgumentError(
            f"accelerator: the cluster's nodes have accelerators of types {kinds}; name the "
            "one the layout reserves (accelerator='nvidia', 'ascend', ...)"
        )
    return ray_resource(kinds[0])


def _pins(
    cluster: Cluster,
    cpus_per_bundle: float,
    engine_size: int,
    shape: Mapping[str, int],
    resource: str,
    exclude: frozenset[int] = frozenset(),
) -> tuple[list[int], bool]:
    """Node of each position so that engines keep to nodes, and whether that is dense.

    Planned over what is free now where that works (the group is placed at once), else
    over the nodes' totals (it waits for running work); an engine bigger than a node is
    always planned over the totals, as it takes whole nodes. Dense: filling nodes in order
    gives the same nodes, so Ray's own ``PACK`` may well place it without pins. The
    ``exclude`` nodes (spares) get no position.
    """
    now, ever = _capacities(cluster, cpus_per_bundle, resource, exclude)
    # A multi-node engine takes whole nodes: only the totals say what is whole.
    if engine_size <= max(ever, default=0):
        try:
            pins = _align(now, engine_size, shape, _domains(cluster))
            return pins, pins == _align(now, 1, shape)
        except EngineAlignmentError:
            pass
    pins = _align(ever, engine_size, shape, _domains(cluster))
    return pins, pins == _align(ever, 1, shape)


def _align(
    capacity: list[int], engine_size: int, shape: Mapping[str, int], domains: Domains = None
) -> list[int]:
    return align_engines(
        capacity,
        actors=shape["actors"],
        start=shape["start"],
        rollouts=shape["rollouts"],
        total=shape["total"],
        engine_size=engine_size,
        domains=domains,
    )


def _domains(cluster: Cluster) -> Domains:
    """Per node rank, its NVLink domain (its rank where it has none); None where no node
    names one."""
    if all(n.nvlink_domain is None for n in cluster.nodes):
        return None
    return [n.nvlink_domain if n.nvlink_domain is not None else n.rank for n in cluster.nodes]


def _check_engines(rollout: RoleBundles, engine_size: int, domains: Domains) -> None:
    """Each engine's bundles on one node, or on whole nodes of one engine only (and of one
    NVLink domain)."""
    for first in range(0, len(rollout), engine_size):
        nodes = rollout.node_ranks[first : first + engine_size]
        if domains is not None and len({domains[n] for n in nodes}) > 1:
            raise EngineAlignmentError(
                f"rollout_num_gpus_per_engine: engine {first // engine_size} of "
                f"{engine_size} GPUs landed on nodes {sorted(set(nodes))} of different "
                "NVLink domains; only with strategy 'PACK' or 'SPREAD' are bundles pinned "
                "so that each engine keeps to one domain",
                problems=[f"engine {first // engine_size} straddles NVLink domains"],
            )
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


def _check_cpus(cpus_per_bundle: object) -> float:
    if (
        isinstance(cpus_per_bundle, bool)
        or not isinstance(cpus_per_bundle, int | float)
        or not math.isfinite(cpus_per_bundle)
        or cpus_per_bundle < 0
    ):
        raise ArgumentError(
            f"cpus_per_bundle: expected a finite number >= 0, got {cpus_per_bundle!r}"
        )
    return float(cpus_per_bundle)


def _spare_ranks(value: object, cluster: Cluster, resource: str) -> frozenset[int]:
    """``spare_nodes`` checked: nodes of the cluster that hold the layout's accelerators."""
    if value is None or (isinstance(value, list | tuple) and not value):
        return frozenset()
    try:
        ranks = parse_rank_list(value, available=range(cluster.num_nodes), path="spare_nodes")
    except PlacementError as exc:
        raise ArgumentError(
            f"{exc} (expected a rank list such as '3' or '3-4', or a list of node ranks)"
        ) from None
    bare = [r for r in ranks if node_resource(cluster.node(r)) != resource]
    empty = [r for r in ranks if not cluster.node(r).accelerators]
    if bare or empty:
        rank = (empty or bare)[0]
        raise ArgumentError(
            f"spare_nodes: node {rank} holds no {resource} accelerators; a spare stands in "
            f"for a node of the layout, so it needs the same accelerators (got {value!r})"
        )
    return frozenset(ranks)


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
    accelerator: str | None = None,
    spare_nodes: str | int | Sequence[int | str] | None = None,
    share_cluster: bool = False,
    priority: int = 0,
    queue_timeout_s: float | None = 600.0,
) -> SlimeLayout:
    """slime's placement groups, ordered by (node rank, physical GPU).

    See docs/concepts/slime-layouts.md.

    Unlike slime, which slices its ordered bundles by position whatever the nodes, every
    bundle is pinned to a node chosen so that each rollout engine of
    ``rollout_num_gpus_per_engine`` GPUs keeps to one node (or spans whole nodes, of one
    NVLink domain where the nodes name domains); where no such choice exists, this fails
    before anything is reserved and names the engine sizes that would fit.

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
        accelerator: The accelerator type the bundles reserve (``nvidia``, ``ascend``,
            ...): each bundle asks for one device of its Ray resource (``GPU``, ``NPU``,
            ...). None: the one type the cluster's nodes have.
        spare_nodes: Nodes kept for takeover (a rank list such as ``"3-4"``, or node
            ranks): the layout uses none of their GPUs, and each is reserved whole in a
            placement group of its own; each used node's bundles are then a group of
            their own too (a lost node's bundles in a shared group could not be removed
            alone), so that :meth:`SlimeLayout.recover` can move a lost node's workers
            to a spare. Needs strategy ``PACK`` or ``SPREAD``.
        share_cluster: Share the Ray cluster with other jobs, as ``launch(...,
            share_cluster=True)`` does (docs/guides/sharing-a-cluster.md): the layout's
            GPUs per node (spares whole) are leased on free nodes, queueing when they are
            not free, and the layout is made on those nodes (renumbered ``0..n-1``; the
            spares are the last). :meth:`SlimeLayout.remove` ends the lease.
        priority: With ``share_cluster``: queue order (higher first, then arrival), >= 0.
        queue_timeout_s: With ``share_cluster``: the longest wait in the queue (None:
            forever).

    Returns:
        The layout: ``layout["actor"]``, ``layout["rollout"]`` (and ``layout["critic"]``)
        each hold the group, the ordered bundle indices, and each bundle's node rank and
        physical GPU index.

    Raises:
        ArgumentError: bad counts or flags, no single accelerator type to reserve, or
            bad ``spare_nodes`` (not node ranks of the cluster, a node without the
            layout's accelerators, or a strategy that cannot pin).
        InfeasiblePlacementGroupError: the cluster can never hold the group.
        EngineAlignmentError: it can, but not with every engine within a node (or whole
            nodes of one NVLink domain); the message lists the engine sizes that fit (and
            each domain's size).
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
    cpus = _check_cpus(cpus_per_bundle)
    if cluster is None:
        cluster = Cluster()
    resource = layout_resource(cluster, accelerator)
    spares = _spare_ranks(spare_nodes, cluster, resource)
    bundle = {resource: 1.0, "CPU": cpus} if cpus else {resource: 1.0}
    shape = {"actors": actors, "start": start, "rollouts": rollouts, "total": total}
    if share_cluster:  # several jobs on one cluster: lease, lay out on what is free
        where, _ = _pins(cluster, cpus, engine_size, shape, resource, spares)
        return share_layout(create_placement_groups, dict(locals()), where, spares)
    if spares:
        return _per_node_layout(
            cluster,
            _Ask(mode, shape, engine_size, use_critic, bundle, resource, strategy, timeout_s),
            spares,
        )
    bundles = [bundle] * total
    pins: list[int] | None = None
    pinnable = strategy in ("PACK", "SPREAD")
    if pinnable:
        check_feasible(bundles, node_totals(cluster), strategy=strategy)
        pins, dense = _pins(cluster, cpus, engine_size, shape, resource)
        if dense and not is_partial(cluster):  # a free view's groups keep to its nodes
            # Try Ray's own PACK first: Ray before ray-project/ray#55599 ignores pins.
            pins = None
    reservation = Reservation.reserve_whole(
        cluster, bundles, strategy=strategy, pin_to=pins, timeout_s=timeout_s
    )
    group = reservation.all_groups[0]
    slots = group.slots
    rollout = RoleBundles.from_slots("rollout", group.pg, slots[start : start + rollouts])
    try:
        _check_engines(rollout, engine_size, _domains(cluster))
    except EngineAlignmentError:
        reservation.release()
        if not pinnable or pins is not None:
            raise
        pins, _ = _pins(cluster, cpus, engine_size, shape, resource)
        reservation = Reservation.reserve_whole(
            cluster, bundles, strategy=strategy, pin_to=pins, timeout_s=timeout_s
        )
        group = reservation.all_groups[0]
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
        reservation=reservation,
    )


@dataclass(frozen=True, slots=True)
class _Ask:
    """What a layout asks for, once checked."""

    mode: str
    shape: Mapping[str, int]
    engine_size: int
    use_critic: bool
    bundle: Mapping[str, float]
    resource: str
    strategy: str
    timeout_s: float | None


def _per_node_layout(cluster: Cluster, ask: _Ask, spares: frozenset[int]) -> SlimeLayout:
    """The layout with spares: each used node's bundles and each spare in a group of its own."""
    if ask.strategy not in ("PACK", "SPREAD"):
        raise ArgumentError(
            f"strategy: a layout with spare_nodes pins each node's bundles in a group of its "
            f"own; expected 'PACK' or 'SPREAD', got {ask.strategy!r}"
        )
    shape, cpus = ask.shape, ask.bundle.get("CPU", 0.0)
    totals = [{} if rank in spares else t for rank, t in enumerate(node_totals(cluster))]
    check_feasible([ask.bundle] * shape["total"], totals, strategy=ask.strategy)
    pins, _ = _pins(cluster, cpus, ask.engine_size, shape, ask.resource, spares)
    reservation = Reservation.reserve(
        cluster,
        Counter(pins),
        sorted(spares),
        cpus_per_bundle=cpus,
        resource=ask.resource,
        timeout_s=ask.timeout_s,
    )
    groups = reservation.groups
    positions = [(g.pg, slot) for _, g in sorted(groups.items()) for slot in g.slots]
    first = groups[pins[0]]
    start, end, actors = shape["start"], shape["start"] + shape["rollouts"], shape["actors"]
    rollout = RoleBundles.from_positions("rollout", positions[start:end], first.pg)
    try:
        _check_engines(rollout, ask.engine_size, _domains(cluster))
    except EngineAlignmentError:
        reservation.release()
        raise
    return SlimeLayout(
        group=first,
        actor=RoleBundles.from_positions("actor", positions[:actors], first.pg),
        rollout=rollout,
        mode=ask.mode,
        critic=(
            RoleBundles.from_positions("critic", positions[:actors], first.pg)
            if ask.use_critic
            else None
        ),
        rollout_start=start,
        engine_size=ask.engine_size,
        cluster=cluster,
        reservation=reservation,
    )
