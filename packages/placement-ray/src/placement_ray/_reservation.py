"""A job's reservation: its placement groups, what they hold, and their removal.

One object owns, for a launch or a slime layout, every placement group the job holds:

- one group per used node, pinned to it (a lost node takes only its own group along),
  or groups in the caller's own order (``ordered``): a slime layout without spares
  holds one group of every bundle, a verl pool one group per ``chunk`` ranks, an
  OpenRLHF group one bundle per rank;
- one group per spare node, pinned to it, one bundle per accelerator, until a recovery
  takes it over;
- the map from the plan's ``(node rank, GPU id)`` to the physical GPU and bundle held,
  which seats every worker;
- their removal: all or none while reserving, a lost node's groups on recovery, every
  group on shutdown (idempotent).

``launch``, recovery, warm spares, detach/attach, slime's layouts and the verl and
OpenRLHF drop-ins use it; no other module creates or removes a job's placement groups
(``tests/ray/test_placement_group_owners.py`` scans the sources for it).
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from placement_core import Placement

from ._cluster import Cluster
from ._placement_groups import (
    OrderedPlacementGroup,
    create_placement_group,
    held_slots,
    remove_groups,
    reserve_nodes,
)
from ._request import Seat, seat_for
from .errors import ArgumentError

__all__ = ["GroupAsk", "Reservation", "map_gpus"]

logger = logging.getLogger(__name__)


class Lease(Protocol):
    """A job's lease on a shared cluster (``_leases.SharedLease``), ended with the groups."""

    def release(self) -> None: ...


Key = tuple[int, int]
"""``(node rank, plan GPU id)``."""


@dataclass(frozen=True, slots=True)
class GroupAsk:
    """One group of a reservation in the caller's order (see ``create_placement_group``).

    Attributes:
        bundles: One resource mapping per bundle.
        pin_to: Per bundle, the node rank it must land on (None: anywhere), or None.
        strategy: ``PACK``, ``SPREAD``, ``STRICT_PACK`` or ``STRICT_SPREAD``.
        name: The group's name (empty: anonymous).
    """

    bundles: tuple[Mapping[str, float], ...]
    pin_to: tuple[int | None, ...] | None = None
    strategy: str = "PACK"
    name: str = ""


def map_gpus(
    planned: Iterable[tuple[int, int]], held: Iterable[tuple[int, int, int]]
) -> dict[tuple[int, int], tuple[int, int]]:
    """Map each planned ``(node, GPU id)`` onto a held ``(physical GPU, bundle index)``.

    Per node, the planned ids and the held GPUs are both sorted and paired in order, so
    the map is a bijection that keeps order (and is the identity where Ray holds exactly
    the planned GPUs, e.g. a whole node).

    Args:
        planned: The plan's GPUs, ``(node rank, id)``.
        held: The reserved bundles, ``(node rank, physical GPU id, bundle index)``.

    Raises:
        ArgumentError: a node holds a different number of GPUs than planned on it.
    """
    by_node: dict[int, list[int]] = defaultdict(list)
    for node, gpu in planned:
        by_node[node].append(gpu)
    slots: dict[int, list[tuple[int, int]]] = defaultdict(list)
    for node, physical, index in held:
        slots[node].append((physical, index))
    if {n: len(g) for n, g in by_node.items()} != {n: len(h) for n, h in slots.items()}:
        raise ArgumentError(
            "held bundles do not match the planned GPUs per node: planned "
            f"{ {n: len(g) for n, g in sorted(by_node.items())} }, held "
            f"{ {n: len(h) for n, h in sorted(slots.items())} }"
        )
    mapping: dict[tuple[int, int], tuple[int, int]] = {}
    for node, gpus in by_node.items():
        for gpu, pair in zip(sorted(gpus), sorted(slots[node]), strict=True):
            mapping[(node, gpu)] = pair
    return mapping


class Reservation:
    """A job's placement groups (used nodes, spares), its GPU map, and their removal.

    Attributes:
        cluster: The job's cluster view (its share ledger forgets removed groups).
        groups: Used node rank -> the group pinned to it.
        spares: Spare node rank -> the group reserving every accelerator of it.
        ordered: Groups in the caller's order, not one per node (a layout's one group of
            every bundle, a verl pool's groups, an OpenRLHF group); else empty.
        slots: ``(node rank, plan GPU id) -> (physical GPU id, bundle index)`` held.
        lease: On a shared cluster, the job's lease of these accelerators in the
            cluster's ledger (``_leases.SharedLease``), ended with the groups; else None.
    """

    __slots__ = ("_removed", "cluster", "groups", "lease", "ordered", "slots", "spares")

    def __init__(
        self,
        cluster: Cluster,
        groups: Mapping[int, OrderedPlacementGroup] | None = None,
        spares: Mapping[int, OrderedPlacementGroup] | None = None,
        *,
        slots: Mapping[Key, tuple[int, int]] | None = None,
        gpu_map: Mapping[Key, int] | None = None,
        ordered: Iterable[OrderedPlacementGroup] = (),
    ) -> None:
        self.cluster = cluster
        self.groups = dict(groups or {})
        self.spares = dict(spares or {})
        self.ordered = list(ordered)
        self.slots = dict(slots or {})
        if gpu_map is not None and slots is None:
            self.slots = self._slots_of(gpu_map)
        self._removed = False
        self.lease: Lease | None = None

    def _slots_of(self, gpu_map: Mapping[Key, int]) -> dict[Key, tuple[int, int]]:
        """The bundle of each mapped GPU, read from its node's group."""
        out: dict[Key, tuple[int, int]] = {}
        for (node, gpu), physical in gpu_map.items():
            slots = self.groups[node].slots if node in self.groups else ()
            index = next((s.index for s in slots if s.gpu_id == physical), -1)
            out[(node, gpu)] = (physical, index)
        return out

    # ------------------------------------------------------------------ reserving
    @classmethod
    def reserve(
        cls,
        cluster: Cluster,
        counts: Mapping[int, int],
        spares: Iterable[int] = (),
        *,
        planned: Sequence[Key] | None = None,
        cpus_per_bundle: float = 0,
        resource: str | None = None,
        timeout_s: float | None = 60.0,
        name: str = "",
        lifetime: str | None = None,
    ) -> Reservation:
        """One group per used node (``counts[rank]`` one-accelerator bundles), then one per
        spare (every accelerator of it; a spare without any gets none); all or none.

        Args:
            cluster: The job's cluster view.
            counts: Used node rank -> bundles to reserve there.
            spares: The spare nodes' ranks.
            planned: The plan's GPUs ``(node rank, id)``, mapped onto the held ones.
            cpus_per_bundle: CPUs in each bundle.
            resource: The Ray resource of the bundles; None: each node's own.
            timeout_s: Limit for the used nodes' groups, and again for the spares'.
            name: Name the groups ``<name>/node-<rank>`` and ``<name>/spare-<rank>``.
            lifetime: None (dies with the driver) or ``"detached"``.

        Raises:
            InfeasiblePlacementGroupError / PlacementGroupTimeoutError: nothing is kept.
            ArgumentError: the held GPUs do not match ``planned``; nothing is kept.
        """

        def held(wanted: Mapping[int, int], kind: str) -> dict[int, OrderedPlacementGroup]:
            return reserve_nodes(
                cluster,
                wanted,
                cpus_per_bundle=cpus_per_bundle,
                resource=resource,
                timeout_s=timeout_s,
                name=name,
                kind=kind,
                lifetime=lifetime,
            )

        made = cls(cluster)
        try:
            made.groups = held(counts, "node")
            if planned is not None:
                made.slots = made._map(planned)
            made.spares = held({r: len(cluster.node(r).accelerators) for r in spares}, "spare")
        except BaseException:
            made.release()
            raise
        return made

    @classmethod
    def reserve_whole(
        cls,
        cluster: Cluster,
        bundles: Sequence[Mapping[str, float]],
        *,
        strategy: str,
        pin_to: Sequence[int | None] | None,
        timeout_s: float | None,
    ) -> Reservation:
        """One group of every bundle (a slime layout without spares); see
        ``create_placement_group``."""
        pins = None if pin_to is None else tuple(pin_to)
        ask = GroupAsk(tuple(bundles), pins, strategy)
        return cls.reserve_ordered(cluster, [ask], timeout_s=timeout_s)

    @classmethod
    def reserve_ordered(
        cls,
        cluster: Cluster,
        asks: Iterable[GroupAsk],
        *,
        lifetime: str | None = None,
        timeout_s: float | None = 60.0,
        check: bool = True,
        always_probe: bool = False,
    ) -> Reservation:
        """The asked groups one after the other, kept in that order (``ordered``); all or
        none.

        Args:
            cluster: The job's cluster view.
            asks: The groups, in the order the caller indexes them.
            lifetime: None (dies with the driver) or ``"detached"``.
            timeout_s: Limit for each group (None: wait forever).
            check: Check each group's feasibility first (off where an autoscaler adds
                nodes).
            always_probe: Probe every GPU bundle for its physical GPU.

        Raises:
            InfeasiblePlacementGroupError / PlacementGroupTimeoutError / ClusterError /
                ProbeError: as ``create_placement_group``; nothing is kept.
        """
        made = cls(cluster)
        try:
            for ask in asks:
                made.ordered.append(
                    create_placement_group(
                        cluster,
                        ask.bundles,
                        strategy=ask.strategy,
                        pin_to=None if ask.pin_to is None else list(ask.pin_to),
                        name=ask.name,
                        lifetime=lifetime,
                        timeout_s=timeout_s,
                        check=check,
                        always_probe=always_probe,
                    )
                )
        except BaseException:
            made.release()
            raise
        return made

    def _map(self, planned: Sequence[Key]) -> dict[Key, tuple[int, int]]:
        held = [(s.node_rank, s.gpu_id, s.index) for g in self.groups.values() for s in g.slots]
        mapping = map_gpus(planned, held)
        moved = sorted(k for k, (physical, _) in mapping.items() if k[1] != physical)
        if moved:
            logger.info(
                "Ray reserved other physical GPUs than the plan's ids on %d GPU(s) (partial "
                "nodes); workers see the reserved ones, e.g. node %d GPU %d -> %d",
                len(moved),
                moved[0][0],
                moved[0][1],
                mapping[moved[0]][0],
            )
        return mapping

    # ------------------------------------------------------------------ reading
    @property
    def gpu_map(self) -> dict[Key, int]:
        """``(node rank, plan GPU id) -> physical GPU id`` held."""
        return {key: physical for key, (physical, _) in self.slots.items()}

    @property
    def all_groups(self) -> tuple[OrderedPlacementGroup, ...]:
        """Every group held: the ordered ones, then each used node's, then each spare's."""
        return (
            *self.ordered,
            *(g for _, g in sorted(self.groups.items())),
            *(g for _, g in sorted(self.spares.items())),
        )

    @property
    def removed(self) -> bool:
        """Whether :meth:`release` ran."""
        return self._removed

    def seat(self, placement: Placement) -> Seat:
        """Where a placement's worker sits: its node's group and the GPUs held for it."""
        group = self.groups.get(placement.node_rank)
        return seat_for(placement, group.pg if group is not None else None, self.slots)

    def spare_seat(self, placement: Placement, spare: int) -> Seat:
        """Where a placement moved onto spare ``spare`` sits, in the spare's group."""
        group = self.spares.get(spare)
        return seat_for(placement, None if group is None else group.pg, held_slots(group))

    # ------------------------------------------------------------------ changing
    def drop(self, ranks: Iterable[int]) -> list[OrderedPlacementGroup]:
        """Remove the groups of lost nodes (used or spare); their GPUs leave the map."""
        lost = set(ranks)
        gone = [self.groups.pop(r) for r in sorted(lost) if r in self.groups]
        gone += [self.spares.pop(r) for r in sorted(lost) if r in self.spares]
        remove_groups(self.cluster, gone)
        self.slots = {k: v for k, v in self.slots.items() if k[0] not in lost}
        return gone

    def take_spares(self, spares: Iterable[int]) -> None:
        """The spares' groups become used groups, holding the same GPU ids."""
        for spare in spares:
            taken = self.spares.pop(spare, None)
            if taken is None:
                continue
            self.groups[spare] = taken
            self.slots.update({(spare, s.gpu_id): (s.gpu_id, s.index) for s in taken.slots})

    def add_nodes(
        self,
        counts: Mapping[int, int],
        planned: Sequence[Key],
        *,
        timeout_s: float | None,
        name: str = "",
    ) -> dict[int, OrderedPlacementGroup]:
        """Hold more nodes of the job's view (recovery onto free capacity): a group pinned
        to each, its GPUs mapped onto the ``planned`` ids; all or none.

        Args:
            counts: Node rank (in the job's view) -> how many accelerators to hold.
            planned: ``(node rank, plan GPU id)`` of the new nodes' planned GPUs.
            timeout_s: Limit for each group.
            name: The groups' name prefix.

        Returns:
            Node rank -> its new group.
        """
        made = reserve_nodes(self.cluster, counts, timeout_s=timeout_s, name=name)
        held = [(s.node_rank, s.gpu_id, s.index) for g in made.values() for s in g.slots]
        self.groups.update(made)
        self.slots.update(map_gpus(planned, held))
        return made

    def release(self) -> None:
        """Remove every group held (spares too); idempotent."""
        if self._removed:
            return
        self._removed = True
        remove_groups(self.cluster, self.all_groups)
        if self.lease is not None:  # share_cluster: the queue's next waiter may start
            self.lease.release()
