"""slime's layout: one placement group of 1-GPU bundles, sliced per role.

See docs/concepts/slime-layouts.md.

| mode                    | bundles                        | rollout starts at |
|-------------------------|--------------------------------|-------------------|
| disaggregated (default) | actor_gpus + rollout_gpus      | actor_gpus        |
| colocate                | max(actor_gpus, rollout_gpus)  | 0                 |
| debug_train_only        | actor_gpus                     | (no rollout)      |
| debug_rollout_only      | rollout_gpus                   | 0                 |

``actor_gpus = actor_num_nodes * actor_num_gpus_per_node``. Bundles are ordered by
(node rank, physical GPU index), so rank r of the actor role sits in the r-th bundle and
nodes that share an IP are never interleaved (slime sorts by IP and GPU id, which does).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ray.util.placement_group import PlacementGroup

from placement_ray._cluster import Cluster
from placement_ray._placement_groups import (
    BundleSlot,
    OrderedPlacementGroup,
    create_placement_group,
)
from placement_ray.errors import ArgumentError, UnknownRoleError

__all__ = ["RoleBundles", "SlimeLayout", "create_placement_groups", "slime_bundle_counts"]


@dataclass(frozen=True, slots=True)
class RoleBundles:
    """One role's share of the placement group, in rank order.

    Attributes:
        role: ``"actor"`` or ``"rollout"``.
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
    """What ``create_placement_groups`` returns: the group and both roles' slices.

    Index it like slime's dict: ``layout["actor"]``, ``layout["rollout"]``.
    """

    group: OrderedPlacementGroup
    actor: RoleBundles
    rollout: RoleBundles
    mode: str

    def __getitem__(self, role: str) -> RoleBundles:
        if role == "actor":
            return self.actor
        if role == "rollout":
            return self.rollout
        raise UnknownRoleError(f"role: unknown role {role!r}; expected 'actor' or 'rollout'")

    def remove(self) -> None:
        """Remove the placement group."""
        self.group.remove()


def _count(name: str, value: object, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ArgumentError(f"{name}: expected an int >= {minimum}, got {value!r}")
    return value


def slime_bundle_counts(
    actor_num_nodes: int,
    actor_num_gpus_per_node: int,
    rollout_num_gpus: int,
    *,
    colocate: bool = False,
    debug_train_only: bool = False,
    debug_rollout_only: bool = False,
) -> tuple[str, int, int, int, int]:
    """The mode table of docs/concepts/slime-layouts.md as numbers, without a cluster.

    Returns:
        ``(mode, num_bundles, actor_count, rollout_start, rollout_count)``.

    Raises:
        ArgumentError: a count that is not an int, both debug flags, or a mode that would
            reserve no GPU at all.
    """
    actor_gpus = _count("actor_num_nodes", actor_num_nodes, 0) * _count(
        "actor_num_gpus_per_node", actor_num_gpus_per_node, 0
    )
    rollout_gpus = _count("rollout_num_gpus", rollout_num_gpus, 0)
    if debug_train_only and debug_rollout_only:
        raise ArgumentError(
            "debug_train_only and debug_rollout_only: at most one may be set, got both"
        )
    if debug_train_only:
        mode, total, actors, start, rollouts = "debug_train_only", actor_gpus, actor_gpus, 0, 0
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


def create_placement_groups(
    actor_num_nodes: int,
    actor_num_gpus_per_node: int,
    rollout_num_gpus: int,
    *,
    colocate: bool = False,
    debug_train_only: bool = False,
    debug_rollout_only: bool = False,
    cluster: Cluster | None = None,
    cpus_per_bundle: float = 1.0,
    strategy: str = "PACK",
    timeout_s: float | None = 60.0,
) -> SlimeLayout:
    """slime's placement groups, ordered by (node rank, physical GPU).

    See docs/concepts/slime-layouts.md.

    Args:
        actor_num_nodes: Trainer nodes.
        actor_num_gpus_per_node: Trainer GPUs per node.
        rollout_num_gpus: GPUs of all rollout engines together.
        colocate: Trainer and rollout share GPUs (rollout starts at bundle 0).
        debug_train_only: Only the trainer's bundles; no rollout.
        debug_rollout_only: Only the rollout's bundles; no trainer.
        cluster: The job's cluster view (default: ``Cluster()``, attaching to the job).
        cpus_per_bundle: CPUs in each ``{"GPU": 1, "CPU": c}`` bundle.
        strategy: Placement-group strategy.
        timeout_s: Limit for placing the group (None: wait forever).

    Returns:
        The layout: ``layout["actor"]`` and ``layout["rollout"]`` each hold the group, the
        ordered bundle indices, and each bundle's node rank and physical GPU index.

    Raises:
        ArgumentError: bad counts or flags.
        InfeasiblePlacementGroupError: the cluster can never hold the group.
        PlacementGroupTimeoutError: it was not placed in time (and was removed).
    """
    mode, total, actors, start, rollouts = slime_bundle_counts(
        actor_num_nodes,
        actor_num_gpus_per_node,
        rollout_num_gpus,
        colocate=colocate,
        debug_train_only=debug_train_only,
        debug_rollout_only=debug_rollout_only,
    )
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
    group = create_placement_group(
        cluster, [bundle] * total, strategy=strategy, timeout_s=timeout_s
    )
    slots = group.slots
    return SlimeLayout(
        group=group,
        actor=RoleBundles.from_slots("actor", group.pg, slots[:actors]),
        rollout=RoleBundles.from_slots("rollout", group.pg, slots[start : start + rollouts]),
        mode=mode,
    )
