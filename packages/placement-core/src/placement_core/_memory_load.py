"""Who is on each GPU and node, counted from a plan's compact records.

Read from the records' segments (:class:`~placement_core._records.Placements`) without
building a record, so counting 10,000 nodes x 8 GPUs costs a pass over a few segments
per node, not over every process.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence

from ._records import Placement, Placements

__all__ = ["GpuKey", "gpu_processes"]

GpuKey = tuple[int, int]
"""``(node rank, accelerator index)``."""


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


def gpu_processes(
    components: Mapping[str, Sequence[Placement]], names: Collection[str]
) -> dict[GpuKey, dict[str, int]]:
    """Per GPU any of ``names`` uses: how many processes of each are on it.

    A process spanning several GPUs counts once on each.
    """
    gpus: dict[GpuKey, dict[str, int]] = {}
    for name in names:
        for count, node, ids in _segments(components.get(name, ())):
            if isinstance(ids, list):
                for one in ids:
                    for index in one:
                        slot = gpus.setdefault((node, index), {})
                        slot[name] = slot.get(name, 0) + 1
            else:
                assert isinstance(ids, tuple)
                for index in ids:
                    slot = gpus.setdefault((node, index), {})
                    slot[name] = slot.get(name, 0) + count
    return gpus
