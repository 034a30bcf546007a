"""Who is on each GPU, counted per kind of node from a plan's compact records.

Read from the records' segments (:class:`~placement_core._records.Placements`) without
building a record. Nodes whose segments, accelerators and host memory are alike form one
kind, counted once: a 10,000-node plan costs a pass over a few segments per node and a
handful of per-GPU counts, not one count per GPU.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass

from ._inventory import Inventory
from ._records import Placement, Placements

__all__ = ["NodeKind", "node_kinds"]

_Segment = tuple[str, int, tuple[int, ...] | tuple[tuple[int, ...], ...], bool]


@dataclass(frozen=True, slots=True)
class NodeKind:
    """Nodes with the same processes on the same GPUs, the same accelerators and the same
    host memory.

    Attributes:
        nodes: Their ranks, ascending.
        gpus: Per accelerator index any component with an entry uses: the number of
            processes of each component on it (a process on several GPUs counts on each).
    """

    nodes: tuple[int, ...]
    gpus: Mapping[int, Mapping[str, int]]


def _segments(placements: Sequence[Placement]) -> Iterable[tuple[int, int, object]]:
    """``(count, node rank, ids)`` per stretch of accelerator placements: ``count``
    processes on the one tuple ``ids``, or one process per tuple of the list ``ids``."""
    if isinstance(placements, Placements):
        columns = placements._columns
        for count, node, ids, kind in zip(
            columns[1], columns[2], columns[7], columns[13], strict=True
        ):
            if kind is None and ids:
                yield count, node, ids
        return
    for p in placements:
        if p.hardware_type is None and p.hardware_ranks:
            yield 1, p.node_rank, p.hardware_ranks


def _gpus(segments: Iterable[_Segment]) -> dict[int, dict[str, int]]:
    gpus: dict[int, dict[str, int]] = {}
    for name, count, ids, each in segments:
        for one in ids if each else (ids,):
            assert isinstance(one, tuple)
            for index in one:
                assert isinstance(index, int)
                slot = gpus.setdefault(index, {})
                slot[name] = slot.get(name, 0) + (1 if each else count)
    return gpus


def node_kinds(
    components: Mapping[str, Sequence[Placement]], names: Collection[str], inventory: Inventory
) -> list[NodeKind]:
    """The kinds of node that hold processes of ``names`` on their accelerators."""
    by_node: dict[int, list[_Segment]] = {}
    for name in names:
        for count, node, ids in _segments(components.get(name, ())):
            if isinstance(ids, list):
                by_node.setdefault(node, []).append((name, count, tuple(ids), True))
            else:
                assert isinstance(ids, tuple)
                by_node.setdefault(node, []).append((name, count, ids, False))
    nodes = inventory.nodes
    kinds: dict[tuple[object, ...], list[int]] = {}
    for node, segments in by_node.items():
        record = nodes[node]
        key = (id(record.accelerators), record.host_memory_bytes, *segments)
        kinds.setdefault(key, []).append(node)
    return [
        NodeKind(tuple(sorted(members)), _gpus(key[2:]))  # type: ignore[arg-type]
        for key, members in kinds.items()
    ]
