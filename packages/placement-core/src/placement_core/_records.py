"""The placement record and the fast path that builds many of them.

See docs/concepts/placement-records.md.

A :class:`Placement` is a frozen, slotted dataclass. Plans hold up to millions of
processes, so :func:`build_placements` builds no record at all: it returns
:class:`Placements`, one small segment per node and group (what every record of the
segment shares, and a list for what differs per process), and records are built when
read. Were the records built up front, each would be an object the cyclic garbage
collector tracks (every instance of a Python class is), and its collections would walk
them all again and again while a large plan is built: time would grow faster than the
plan. Reading builds each record with ``map()`` over ``repeat()`` (no bytecode loop per
record) through a layout-identical mutable twin whose class is then switched (no
``object.__setattr__`` per field), and equal tuples are shared between records.
"""

from __future__ import annotations

from array import array
from bisect import bisect_right
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, fields
from itertools import chain, groupby, islice, repeat
from operator import attrgetter, eq, itemgetter
from typing import Any, overload

from ._inventory import Inventory
from ._rules import Entry
from ._spaces import SpaceKind

__all__ = ["Placement", "Placements", "Process", "build_placements", "node_runs"]


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


def _segments(
    entries: Sequence[Entry], start: int, stop: int
) -> Iterator[tuple[int, tuple[int, ...] | list[tuple[int, ...]]]]:
    """Split one run's entries (``entries[start:stop]``) into ``(count, ids)`` (``count``
    processes on one id tuple) and ``(n, [ids, ...])`` (n processes, one id tuple each)
    pieces, in order."""
    if stop - start == 1:
        count, _, ids = entries[start]
        yield count, ids
        return
    singles: list[tuple[int, ...]] = []
    for index in range(start, stop):
        count, _, ids = entries[index]
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


#: One segment of records: ``(first rank, count, node_rank, node_id, placement node,
#: first local rank, local world size, hardware ranks, visible accelerators, local
#: accelerator rank, accelerator type, node group, isolate, hardware type)``. The three
#: per-process fields are a list (one value per process) or one value for all of them;
#: a local accelerator rank of None is the first of each process's hardware ranks.
_Segment = tuple[Any, ...]

Process = tuple[str | None, tuple[int, ...]]
"""A process as the topology annotations see it: ``(hardware type, hardware ranks)``."""
_FIELDS = 14
_PER_PROCESS = (7, 8, 9)
# Fields that are always ints (ranks, counts, node ranks, local ranks, sizes): kept in
# arrays, which the garbage collector does not track (lists of a million would be walked
# by every collection while young).
_INT_FIELDS = frozenset({0, 1, 2, 4, 5, 6})


def _new_columns() -> tuple[Any, ...]:
    return tuple(array("q") if i in _INT_FIELDS else [] for i in range(_FIELDS))


_FIRST = itemgetter(0)
_ANNOTATIONS = attrgetter("link", "numa_node", "cpus")
_KEPT = attrgetter(
    *(
        f.name
        for f in fields(Placement)
        if f.name not in {"node_rank", "node_id", "link", "numa_node", "cpus"}
    )
)


class Placements(Sequence[Placement]):
    """A component's placement records, in rank order, stored compactly and built when read.

    It behaves like a tuple of :class:`Placement` (indexing, slicing, iteration,
    ``len``, ``==`` with a tuple of the same records, hashing, pickling), but holds only
    one small segment per node and group, so a plan of a million processes makes no
    million objects for the garbage collector to walk. Each record read is a fresh
    :class:`Placement`, equal to any other read of it.
    """

    __slots__ = ("_annotations", "_columns", "_len")

    def __init__(self, segments: Iterable[_Segment] = ()) -> None:
        # One list per segment field rather than a tuple per segment: a few objects for
        # the collector to track, however many nodes.
        columns = _new_columns()
        appends = [column.append for column in columns]
        for segment in segments:
            for append, value in zip(appends, segment, strict=True):
                append(value)
        self._set(columns)

    @classmethod
    def _from_columns(cls, columns: tuple[list[Any], ...]) -> Placements:
        """Records from their segments' fields, one list per field (see ``_Segment``)."""
        if len(columns) != _FIELDS or len({len(c) for c in columns}) > 1:
            raise ValueError(f"expected {_FIELDS} columns of one length")
        placements = cls.__new__(cls)
        placements._set(columns)
        return placements

    def _set(self, columns: tuple[list[Any], ...]) -> None:
        self._columns = columns
        self._len: int = sum(columns[1])
        self._annotations: tuple[list[Any], list[Any], list[Any]] | None = None

    def _segment(self, index: int) -> _Segment:
        return tuple(column[index] for column in self._columns)

    def annotate(self, links: list[Any], numa: list[Any], cpus: list[Any]) -> None:
        """Set every record's ``link``, ``numa_node`` and ``cpus``.

        The planner does this once, while the records are fresh and not shared yet.

        Args:
            links: One ``link`` per record, in rank order.
            numa: One ``numa_node`` per record, in rank order.
            cpus: One ``cpus`` per record, in rank order.

        Raises:
            ValueError: A list does not have one value per record.
        """
        if not len(links) == len(numa) == len(cpus) == self._len:
            raise ValueError(f"expected {self._len} values of each annotation")
        self._annotations = (links, numa, cpus)

    def __len__(self) -> int:
        return self._len

    def with_moved(self, fresh: Mapping[int, Placement]) -> Placements:
        """A copy with the records at ``fresh``'s ranks replaced, as ``replan`` moves them.

        A replaced record may differ from the one it replaces only in its node
        (``node_rank``, ``node_id``) and its ``link``, ``numa_node`` and ``cpus``; the
        records of one stretch on a node are replaced together (a lost node's processes
        move together). Only the segments and annotations change: no record is built but
        the replaced ones.

        Raises:
            ValueError: a record differs in another field, or a stretch is replaced in part.
        """
        columns = tuple(column[:] for column in self._columns)  # arrays stay arrays
        starts, counts = columns[0], columns[1]
        for index in sorted({bisect_right(starts, rank) - 1 for rank in fresh}):
            stretch = [fresh.get(r) for r in range(starts[index], starts[index] + counts[index])]
            nodes = {(r.node_rank, r.node_id) for r in stretch if r is not None}
            if None in stretch or len(nodes) != 1:
                raise ValueError(f"records {starts[index]}.. must move together to one node")
            columns[2][index], columns[3][index] = nodes.pop()
        for rank, record in fresh.items():
            if _KEPT(self[rank]) != _KEPT(record):
                raise ValueError(f"record {rank} may change only its node and annotations")
        moved = Placements._from_columns(columns)
        if self._annotations is not None or any(map(_ANNOTATIONS, fresh.values())):
            base = self._annotations or ([None] * self._len,) * 3
            annotations = tuple(list(column) for column in base)
            for rank, record in fresh.items():
                for column, value in zip(annotations, _ANNOTATIONS(record), strict=True):
                    column[rank] = value
            moved._annotations = (annotations[0], annotations[1], annotations[2])
        return moved

    def node_runs(self) -> Iterator[tuple[int, int]]:
        """``(node rank, processes)`` of each stretch of records, in rank order (two
        stretches in a row may be on one node), read from the segments."""
        return zip(self._columns[2], self._columns[1], strict=True)

    def processes_by_node(self) -> Iterator[tuple[int, tuple[Process, ...]]]:
        """``(node rank, ((hardware type, hardware ranks), ...))``: each stretch of
        consecutive records on one node, one pair per process, read from the segments
        (no record is built)."""
        columns = self._columns
        current = -1
        processes: list[Process] = []
        for count, node, hardware, kind in zip(
            columns[1], columns[2], columns[7], columns[13], strict=True
        ):
            if node != current and processes:
                yield current, tuple(processes)
                processes = []
            current = node
            if isinstance(hardware, list):
                processes += [(kind, ids) for ids in hardware]
            else:
                processes += ((kind, hardware),) * count
        if processes:
            yield current, tuple(processes)

    def __iter__(self) -> Iterator[Placement]:
        segments = map(self._segment, range(len(self._columns[0])))
        return chain.from_iterable(map(self._records, segments))

    def _records(self, segment: _Segment) -> Iterator[Placement]:
        start, count = segment[0], segment[1]
        columns: list[Iterable[Any]] = [range(start, start + count)]
        for i, value in enumerate(segment[2:], 2):
            if i in _PER_PROCESS and isinstance(value, list):
                columns.append(value)
            elif i == 5:
                columns.append(range(value, value + count))
            elif i == 9 and value is None:
                columns.append(map(_FIRST, segment[7]))
            else:
                columns.append(repeat(value, count))
        if self._annotations is not None:
            columns += [islice(column, start, start + count) for column in self._annotations]
        return map(_MAKE, *columns)

    @overload
    def __getitem__(self, index: int) -> Placement: ...
    @overload
    def __getitem__(self, index: slice) -> tuple[Placement, ...]: ...
    def __getitem__(self, index: int | slice) -> Placement | tuple[Placement, ...]:
        if isinstance(index, slice):
            return tuple(self)[index]
        rank = index + self._len if index < 0 else index
        if not 0 <= rank < self._len:
            raise IndexError("placement index out of range")
        segment = self._segment(bisect_right(self._columns[0], rank) - 1)
        offset = rank - segment[0]
        values = [
            value[offset] if i in _PER_PROCESS and isinstance(value, list) else value
            for i, value in enumerate(segment[2:], 2)
        ]
        values[3] += offset  # local rank
        if values[7] is None:
            values[7] = values[5][0]  # the first of its accelerators
        extra = [column[rank] for column in self._annotations or ()]
        return _MAKE(rank, *values, *extra)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Placements | tuple):
            return len(self) == len(other) and all(map(eq, self, other))
        return NotImplemented

    def __hash__(self) -> int:
        return hash(tuple(self))

    def __add__(self, other: object) -> tuple[Placement, ...]:
        if isinstance(other, Placements | tuple):
            return (*self, *other)
        return NotImplemented

    def __radd__(self, other: object) -> tuple[Placement, ...]:
        if isinstance(other, tuple):
            return (*other, *self)
        return NotImplemented

    def __repr__(self) -> str:
        return repr(tuple(self))

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild, (self._columns, self._annotations, self._len))


def node_runs(placements: Sequence[Placement]) -> Iterable[tuple[int, int]]:
    """``(node rank, processes)`` of each stretch of consecutive processes on one node,
    without building records where the placements are stored compactly."""
    if isinstance(placements, Placements):
        return placements.node_runs()
    return ((node, len(list(run))) for node, run in groupby(p.node_rank for p in placements))


def _rebuild(
    columns: tuple[list[Any], ...],
    annotations: tuple[list[Any], list[Any], list[Any]] | None,
    length: int,
) -> Placements:
    placements = Placements()
    placements._columns, placements._annotations, placements._len = columns, annotations, length
    return placements


_MAKE: Callable[..., Placement] = _Twin  # type: ignore[assignment]


def build_placements(
    entries: Sequence[Entry],
    inventory: Inventory,
    *,
    isolate_accelerator: bool = True,
) -> Placements:
    """Turn resolved entries (rank order) into placement records.

    Args:
        entries: ``(count, run, local_ids)`` groups from rule resolution or a strategy.
        inventory: The nodes the runs refer to.
        isolate_accelerator: Whether accelerator placements hide the node's other
            accelerators.

    Returns:
        One placement per process, by rank, stored compactly (records are built when
        read); equal tuples are shared between records.
    """
    counts: dict[int, int] = {}
    for count, run, _ in entries:
        counts[run.node_rank] = counts.get(run.node_rank, 0) + count
    placement_rank = {node_rank: i for i, node_rank in enumerate(counts)}
    next_local = dict.fromkeys(counts, 0)
    kinds: dict[int, tuple[tuple[int, ...], str | None, int]] = {}
    columns = _new_columns()
    (
        ranks,
        sizes,
        node_ranks,
        node_ids,
        placement_nodes,
        locals_,
        world_sizes,
        hardware_ranks,
        visibles,
        firsts,
        types,
        groups,
        isolates,
        hardware_types,
    ) = (column.append for column in columns)
    rank = 0
    # Consecutive entries on one run (one node and group) are built together.
    for start, stop in _run_spans(entries):
        run = entries[start][1]
        node_rank = run.node_rank
        node_id, all_ids, accelerator_type, first_accelerator = _node_view(
            kinds, inventory, node_rank
        )
        kind = run.kind
        isolate = isolate_accelerator and kind is SpaceKind.ACCELERATOR
        hardware_type = run.resource_type if kind is SpaceKind.HARDWARE else None
        shown_type = accelerator_type if isolate or all_ids else None
        for count, ids in _segments(entries, start, stop):
            local = next_local[node_rank]
            next_local[node_rank] = local + count
            hardware, visible, first = _devices(kind, ids, isolate, all_ids, first_accelerator)
            ranks(rank)
            sizes(count)
            node_ranks(node_rank)
            node_ids(node_id)
            placement_nodes(placement_rank[node_rank])
            locals_(local)
            world_sizes(counts[node_rank])
            hardware_ranks(hardware)
            visibles(visible)
            firsts(first)
            types(shown_type)
            groups(run.group)
            isolates(isolate)
            hardware_types(hardware_type)
            rank += count
    return Placements._from_columns(columns)


def _run_spans(entries: Sequence[Entry]) -> Iterator[tuple[int, int]]:
    """``(start, stop)`` of each stretch of consecutive entries on one run."""
    start, last = 0, None
    for index, (_, run, _) in enumerate(entries):
        if run is not last:
            if index:
                yield start, index
            start, last = index, run
    if entries:
        yield start, len(entries)


def _node_view(
    kinds: dict[int, tuple[tuple[int, ...], str | None, int]],
    inventory: Inventory,
    node_rank: int,
) -> tuple[str, tuple[int, ...], str | None, int]:
    """``(node id, accelerator ids, accelerator type, first accelerator)`` of a node."""
    node = inventory.nodes[node_rank]
    # Nodes of a uniform inventory share one accelerators tuple: derive what depends on
    # it once per distinct tuple (and keep nothing per node for the collector to walk).
    kind = kinds.get(id(node.accelerators))
    if kind is None:
        ids = node.accelerator_ids
        kind = kinds[id(node.accelerators)] = (
            ids,
            node.accelerator_type,
            ids[0] if ids else -1,
        )
    return (node.node_id, *kind)


def _devices(
    kind: SpaceKind,
    ids: tuple[int, ...] | list[tuple[int, ...]],
    isolate: bool,
    all_ids: tuple[int, ...],
    first_accelerator: int,
) -> tuple[Any, Any, Any]:
    """``(hardware ranks, visible accelerators, local accelerator rank)`` of a segment:
    each a list with one value per process, or one value for all of them."""
    empty: tuple[int, ...] = ()
    if isinstance(ids, list):  # one process per id tuple
        if kind is SpaceKind.ACCELERATOR:  # None: the first of each process's ids
            return ids, ids if isolate else all_ids, None
        return ids if kind is SpaceKind.HARDWARE else empty, all_ids, first_accelerator
    if kind is SpaceKind.ACCELERATOR:  # ``count`` processes on one id tuple
        return ids, ids if isolate else all_ids, ids[0]
    return ids if kind is SpaceKind.HARDWARE else empty, all_ids, first_accelerator
