"""Which node each bundle of a slime layout goes to, so that rollout engines stay in a node.

slime hands engine ``i`` the ordered bundles ``[i*k, (i+1)*k)`` of the rollout's slice, by
position. Left to ``PACK``, a 4-GPU trainer on 8-GPU nodes pushes every 8-GPU engine
across two nodes (tensor parallelism over the network). Here every bundle is given a node
up front: positions are filled node by node, and an engine that does not fit in what is
left of a node starts on the next node (the GPUs skipped are simply not reserved). An
engine bigger than any node takes whole nodes of one size. Since bundles end up ordered
by (node rank, GPU), the pinned group's positions are exactly the ones planned here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from placement_ray.errors import EngineAlignmentError

__all__ = ["align_engines", "fitting_engine_sizes"]


@dataclass(slots=True)
class _Cursor:
    capacity: Sequence[int]
    node: int = 0
    used: int = 0

    def next_node(self) -> None:
        self.node += 1
        self.used = 0

    def place(self, pins: list[int], count: int) -> None:
        pins.extend([self.node] * count)
        self.used += count


def _singles(cursor: _Cursor, pins: list[int], count: int) -> bool:
    for _ in range(count):
        while cursor.node < len(cursor.capacity) and cursor.used >= cursor.capacity[cursor.node]:
            cursor.next_node()
        if cursor.node == len(cursor.capacity):
            return False
        cursor.place(pins, 1)
    return True


def _engine(cursor: _Cursor, pins: list[int], size: int) -> bool:
    capacity = cursor.capacity
    if size <= max(capacity, default=0):
        while cursor.node < len(capacity) and capacity[cursor.node] - cursor.used < size:
            cursor.next_node()
        if cursor.node == len(capacity):
            return False
        cursor.place(pins, size)
        return True
    if cursor.used:
        cursor.next_node()
    while cursor.node < len(capacity) and capacity[cursor.node] == 0:
        cursor.next_node()
    if cursor.node == len(capacity):
        return False
    per_node = capacity[cursor.node]
    span = size // per_node
    nodes = range(cursor.node, cursor.node + span)
    if size % per_node or nodes.stop > len(capacity):
        return False
    if any(capacity[n] != per_node for n in nodes):
        return False
    for n in nodes:
        pins.extend([n] * per_node)
    cursor.node, cursor.used = nodes.stop - 1, per_node
    return True


def _plan(
    capacity: Sequence[int], start: int, rollouts: int, total: int, size: int
) -> list[int] | None:
    cursor = _Cursor(capacity)
    pins: list[int] = []
    ok = _singles(cursor, pins, start)
    for _ in range(rollouts // size):
        ok = ok and _engine(cursor, pins, size)
    ok = ok and _singles(cursor, pins, total - start - rollouts)
    return pins if ok else None


def fitting_engine_sizes(
    capacity: Sequence[int], *, start: int, rollouts: int, total: int
) -> list[int]:
    """Engine sizes dividing ``rollouts`` whose engines would each keep to a node here."""
    return [
        size
        for size in range(1, rollouts + 1)
        if rollouts % size == 0 and _plan(capacity, start, rollouts, total, size) is not None
    ]


def align_engines(
    capacity: Sequence[int],
    *,
    actors: int,
    start: int,
    rollouts: int,
    total: int,
    engine_size: int,
) -> list[int]:
    """Per ordered position, the node rank its bundle is pinned to.

    Args:
        capacity: Per node rank, how many bundles it can hold.
        actors: The trainer's bundles (positions ``0..actors-1``).
        start: The rollout's first position.
        rollouts: The rollout's GPUs (positions ``start..start+rollouts-1``).
        total: Bundles in the group.
        engine_size: GPUs per rollout engine.

    Returns:
        ``total`` node ranks, non-decreasing: position p's bundle goes to node ``pins[p]``.

    Raises:
        EngineAlignmentError: the engines cannot each keep to one node or whole nodes;
            the message says which engine sizes would.
    """
    if rollouts % engine_size:
        raise EngineAlignmentError(
            f"rollout_num_gpus_per_engine: {rollouts} rollout GPUs do not divide into "
            f"engines of {engine_size}",
            problems=[f"{rollouts} % {engine_size} != 0"],
        )
    pins = _plan(capacity, start, rollouts, total, engine_size)
    if pins is not None:
        return pins
    sizes = fitting_engine_sizes(capacity, start=start, rollouts=rollouts, total=total)
    nodes = ", ".join(f"node {n}: {c}" for n, c in enumerate(capacity))
    fix = (
        f"engine sizes that fit: {', '.join(map(str, sizes))}"
        if sizes
        else "no engine size fits; add nodes or reserve fewer GPUs"
    )
    trainer = f"the trainer's {actors} GPUs come first, " if start else ""
    raise EngineAlignmentError(
        f"rollout_num_gpus_per_engine: {rollouts // engine_size} engines of {engine_size} GPUs "
        f"cannot each stay within one node (or span whole nodes) on this cluster ({trainer}"
        f"GPUs per node: {nodes}); {fix}",
        problems=[f"engines of {engine_size} GPUs straddle nodes"],
        fitting_sizes=sizes,
    )
