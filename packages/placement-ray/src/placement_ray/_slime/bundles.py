"""A slime role's bundles (``RoleBundles``) and where its workers sit (``role_seats``).

A leaf of ``_slime``: the layout makes these, the train group, the rollout engines and
recovery read them; it imports none of them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ray.util.placement_group import PlacementGroup

from placement_core import Placement
from placement_ray._placement_groups import BundleSlot
from placement_ray._request import Seat, seat_for

__all__ = ["RoleBundles", "role_seats"]


@dataclass(frozen=True, slots=True)
class RoleBundles:
    """One role's share of the layout's bundles, in rank order.

    Attributes:
        role: ``"actor"``, ``"critic"`` or ``"rollout"``.
        pg: The (shared) placement group. In a layout with spare nodes, where each node's
            bundles are a group of their own, the group of the role's first bundle (each
            bundle's group is in ``groups``).
        bundle_indices: Bundle index for rank 0, 1, ... (in its own group).
        node_ranks: Node rank of each of those bundles.
        node_ids: Ray node id of each of those bundles.
        gpu_ids: Physical GPU index (on its node) of each of those bundles.
        groups: In a layout with spare nodes, the placement group of each of those
            bundles (its node's group); empty where every bundle is in ``pg``.
    """

    role: str
    pg: PlacementGroup
    bundle_indices: tuple[int, ...]
    node_ranks: tuple[int, ...]
    node_ids: tuple[str, ...]
    gpu_ids: tuple[int, ...]
    groups: tuple[PlacementGroup, ...] = ()

    def __len__(self) -> int:
        return len(self.bundle_indices)

    def group_at(self, position: int) -> PlacementGroup:
        """The placement group holding the role's ``position``-th bundle."""
        return self.groups[position] if self.groups else self.pg

    @classmethod
    def from_slots(
        cls, role: str, pg: PlacementGroup, slots: tuple[BundleSlot, ...]
    ) -> RoleBundles:
        """The role's view of some ordered bundles of one group."""
        return cls(
            role=role,
            pg=pg,
            bundle_indices=tuple(s.index for s in slots),
            node_ranks=tuple(s.node_rank for s in slots),
            node_ids=tuple(s.node_id for s in slots),
            gpu_ids=tuple(s.gpu_id for s in slots),
        )

    @classmethod
    def from_positions(
        cls,
        role: str,
        positions: Sequence[tuple[PlacementGroup, BundleSlot]],
        default: PlacementGroup,
    ) -> RoleBundles:
        """The role's view of ordered ``(group, bundle)`` positions, each in its own node's
        group (``default``: the ``pg`` of a role without bundles)."""
        return cls(
            role=role,
            pg=positions[0][0] if positions else default,
            bundle_indices=tuple(s.index for _, s in positions),
            node_ranks=tuple(s.node_rank for _, s in positions),
            node_ids=tuple(s.node_id for _, s in positions),
            gpu_ids=tuple(s.gpu_id for _, s in positions),
            groups=tuple(pg for pg, _ in positions),
        )


def role_seats(bundles: RoleBundles) -> Callable[[Placement], Seat]:
    """Where a worker placed on the role's GPUs sits: the bundle of its first GPU, in the
    group holding its node's bundles."""
    held: dict[tuple[int, int], tuple[int, int]] = {}
    groups: dict[int, PlacementGroup] = {}
    for i, (index, node, gpu) in enumerate(
        zip(bundles.bundle_indices, bundles.node_ranks, bundles.gpu_ids, strict=True)
    ):
        held[(node, gpu)] = (gpu, index)
        groups.setdefault(node, bundles.group_at(i))

    def seat(placement: Placement) -> Seat:
        return seat_for(placement, groups.get(placement.node_rank, bundles.pg), held)

    return seat
