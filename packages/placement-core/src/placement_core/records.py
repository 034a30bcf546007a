"""The placement record and the fast path that builds many of them.

See docs/concepts/placement-records.md.

A :class:`Placement` is a frozen, slotted dataclass. Plans hold up to millions of them,
so :func:`build_placements` avoids the dataclass ``__init__`` (one
``object.__setattr__`` per field): it fills a layout-identical mutable twin and then
switches the object's class, builds the records of one node and group with ``map()``
over ``repeat()`` (no bytecode loop per record) and shares equal tuples between records.
On request (``pause_gc=True``) it also pauses the cyclic garbage collector while it
allocates (each collection would walk every record built so far); that touches the whole
process, so it is off by default.
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass, fields
from itertools import groupby, repeat
from operator import itemgetter

from .inventory import Inventory
from .rules import Entry
from .spaces import SpaceKind

__all__ = ["Placement", "build_placements", "gc_paused", "gc_paused_if"]


@dataclass(frozen=True, slots=True)
class Placement:
    """Where one process of a component runs.

    Attributes:
        rank: The process rank within its component, ``0 .. N-1``.
        node_rank: The node's rank in the cluster.
        node_id: The node's identity (Ray node id live; ``node-<rank>`` offline).
        placement_node_rank: Index of the node among the distinct nodes the component
            uses, in rank order.
        local_rank: Index of the process among the component's processes on its node.
        local_world_size: How many of the component's processes share its node.
        hardware_ranks: Node-local indices of the assigned resources (GPU ids, robot
            ids); empty for node placements.
        visible_accelerators: Node-local accelerator ids the process may see: its own
            when isolating an accelerator space, else all of the node's.
        local_accelerator_rank: The first assigned accelerator id; for node and
            hardware placements the node's first accelerator; -1 on a node without
            accelerators.
        accelerator_type: ``nvidia``, ``amd``, ``ascend``, ``intel``, ``musa``,
            ``kunlun``, ``gaudi`` or None when the process sees no accelerator.
        node_group: Label of the group the resource belongs to.
        isolate_accelerator: Whether the process's other devices are hidden.
        hardware_type: The hardware type (``Franka``) when ``hardware_ranks`` are
            hardware devices; None for accelerator and node placements.
        link: The worst link between the process's accelerators as ``nvidia-smi topo
            -m`` names it (``NV4``, ``PIX``, ``SYS``, ...); None for one accelerator or
            unknown topology.
        numa_node: The NUMA node of its accelerators (or the one it asked for); None when
            unknown or when its accelerators sit on different NUMA nodes.
        cpus: The CPUs it should run on, as a Linux CPU list (``0-11,96-107``): the CPUs
            local to its accelerators (or its NUMA node), split without overlap between
            the component's processes on the node that share them; None when unknown.
    """

    rank: int
    node_rank: int
    node_id: str
    placement_node_rank: int
    local_rank: int
    local_world_size: int
    hardware_ranks: tuple[int, ...]
    visible_accelerators: tuple[int, ...]
    local_accelerator_rank: int
    accelerator_type: str | None
    node_group: str
    isolate_accelerator: bool
    hardware_type: str | None = None
    link: str | None = None
    numa_node: int | None = None
    cpus: str | None = None

    @property
    def device_index(self) -> int:
        """The index of the first assigned accelerator inside the process (``LOCAL_RANK``).

        0 when isolating; otherwise the position of ``local_accelerator_rank`` among the
        visible accelerators (its id when a node's accelerators are numbered ``0..n-1``);
        -1 when the process has no accelerator.
        """
        if self.local_accelerator_rank < 0:
            return -1
        try:
            return self.visible_accelerators.index(self.local_accelerator_rank)
        except ValueError:
            return self.local_accelerator_rank


class _Twin:
    """Mutable, layout-identical twin of :class:`Placement`: fills the slots, then
    becomes a Placement (``__class__`` assignment is allowed between equal layouts)."""

    __slots__ = Placement.__slots__

    def __init__(
        self,
        rank: int,
        node_rank: int,
        node_id: str,
        placement_node_rank: int,
        local_rank: int,
        local_world_size: int,
        hardware_ranks: tuple[int, ...],
        visible_accelerators: tuple[int, ...],
        local_accelerator_rank: int,
        accelerator_type: str | None,
        node_group: str,
        isolate_accelerator: bool,
        hardware_type: str | None,
        link: str | None = None,
        numa_node: int | None = None,
        cpus: str | None = None,
    ) -> None:
        self.rank = rank
        self.node_rank = node_rank
        self.node_id = node_id
        self.placement_node_rank = placement_node_rank
        self.local_rank = local_rank
        self.local_world_size = local_world_size
        self.hardware_ranks = hardware_ranks
        self.visible_accelerators = visible_accelerators
        self.local_accelerator_rank = local_accelerator_rank
        self.accelerator_type = accelerator_type
        self.node_group = node_group
        self.isolate_accelerator = isolate_accelerator
        self.hardware_type = hardware_type
        self.link = link
        self.numa_node = numa_node
        self.cpus = cpus
        self.__class__ = Placement  # type: ignore[assignment]


if tuple(f.name for f in fields(Placement)) != Placement.__slots__:  # pragma: no cover
    raise RuntimeError("Placement's slots must follow its field order for the fast builder")


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector (if enabled) for a burst of allocations.

    Records hold no reference cycles, and a collection during the burst would walk every
    record built so far. On the way out the new objects are long-lived, so they go
    straight to the oldest generation (``gc.freeze()`` then ``gc.unfreeze()``: two O(1)
    list splices) instead of being walked again by the young generations' collections;
    this is skipped when the process uses ``gc.freeze()`` itself. Re-entrant (only the
    outermost pause acts), and restores the collector's previous state.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            if gc.get_freeze_count() == 0:
                gc.freeze()
                gc.unfreeze()
            gc.enable()


def gc_paused_if(pause: bool) -> AbstractContextManager[None]:
    """:func:`gc_paused` when ``pause`` is true, else a context that does nothing."""
    return gc_paused() if pause else nullcontext()


def _segments(
    batch: list[Entry],
) -> Iterator[tuple[int, tuple[int, ...] | list[tuple[int, ...]]]]:
    """Split a run's entries into ``(count, ids)`` (``count`` processes on one id tuple)
    and ``(n, [ids, ...])`` (n processes, one id tuple each) pieces, in order."""
    if len(batch) == 1:
        count, _, ids = batch[0]
        yield count, ids
        return
    singles: list[tuple[int, ...]] = []
    for count, _, ids in batch:
        if isinstance(ids, list):
            singles.extend(ids)
        elif count == 1:
            singles.append(ids)
        else:
            if singles:
                yield len(singles), singles
                singles = []
            yield count, ids
    if singles:
        yield len(singles), singles


def build_placements(
    entries: Sequence[Entry],
    inventory: Inventory,
    *,
    isolate_accelerator: bool = True,
    pause_gc: bool = False,
) -> tuple[Placement, ...]:
    """Turn resolved entries (rank order) into placement records.

    Args:
        entries: ``(count, run, local_ids)`` groups from rule resolution or a strategy.
        inventory: The nodes the runs refer to.
        isolate_accelerator: Whether accelerator placements hide the node's other
            accelerators.
        pause_gc: Build under :func:`gc_paused` (process-wide; see there).

    Returns:
        One placement per process, by rank; equal tuples are shared between records.
    """
    nodes = inventory.nodes
    # Consecutive entries on one run (one node and group) are built together.
    batches = [(run, list(batch)) for run, batch in groupby(entries, key=itemgetter(1))]
    counts: dict[int, int] = {}
    for run, batch in batches:
        counts[run.node_rank] = counts.get(run.node_rank, 0) + sum(e[0] for e in batch)
    placement_rank = {node_rank: i for i, node_rank in enumerate(counts)}
    next_local = dict.fromkeys(counts, 0)
    node_view: dict[int, tuple[str, tuple[int, ...], str | None, int]] = {}
    visible_ids: dict[int, tuple[int, ...]] = {}
    out: list[Placement] = []
    extend = out.extend
    make: Callable[..., Placement] = _Twin  # type: ignore[assignment]
    accelerator_kind = SpaceKind.ACCELERATOR
    hardware_kind = SpaceKind.HARDWARE
    empty: tuple[int, ...] = ()
    rank = 0
    with gc_paused_if(pause_gc):
        for run, batch in batches:
            node_rank = run.node_rank
            view = node_view.get(node_rank)
            if view is None:
                node = nodes[node_rank]
                # Nodes of a uniform inventory share one accelerators tuple: derive the
                # id tuple once per distinct tuple.
                all_ids = visible_ids.get(id(node.accelerators))
                if all_ids is None:
                    all_ids = node.accelerator_ids
                    visible_ids[id(node.accelerators)] = all_ids
                view = (node.node_id, all_ids, node.accelerator_type, all_ids[0] if all_ids else -1)
                node_view[node_rank] = view
            node_id, all_ids, accelerator_type, first_accelerator = view
            kind = run.kind
            isolate = isolate_accelerator and kind is accelerator_kind
            hardware_type = run.resource_type if kind is hardware_kind else None
            shown_type = accelerator_type if isolate or all_ids else None
            placement_node = placement_rank[node_rank]
            world = counts[node_rank]
            group = run.group
            # map() over repeat() builds records at C speed: no bytecode loop, no
            # per-record argument shuffling.
            for count, ids in _segments(batch):
                local = next_local[node_rank]
                next_local[node_rank] = local + count
                if isinstance(ids, list):  # one process per id tuple
                    hardware_ranks: Iterable[tuple[int, ...]] = ids
                    if kind is accelerator_kind:
                        visible: Iterable[tuple[int, ...]] = ids if isolate else repeat(all_ids)
                        local_accelerator: Iterable[int] = [i[0] for i in ids]
                    else:
                        hardware_ranks = ids if kind is hardware_kind else repeat(empty)
                        visible = repeat(all_ids)
                        local_accelerator = repeat(first_accelerator)
                else:  # ``count`` processes on one id tuple
                    if kind is accelerator_kind:
                        hardware_ranks = repeat(ids)
                        visible = repeat(ids if isolate else all_ids)
                        local_accelerator = repeat(ids[0])
                    else:
                        hardware_ranks = repeat(ids if kind is hardware_kind else empty)
                        visible = repeat(all_ids)
                        local_accelerator = repeat(first_accelerator)
                extend(
                    map(
                        make,
                        range(rank, rank + count),
                        repeat(node_rank, count),
                        repeat(node_id, count),
                        repeat(placement_node, count),
                        range(local, local + count),
                        repeat(world, count),
                        hardware_ranks,
                        visible,
                        local_accelerator,
                        repeat(shown_type, count),
                        repeat(group, count),
                        repeat(isolate, count),
                        repeat(hardware_type, count),
                    )
                )
                rank += count
    return tuple(out)
