"""Which node each bundle of a slime layout goes to, so that rollout engines stay in a node.

slime hands engine ``i`` the ordered bundles ``[i*k, (i+1)*k)`` of the rollout's slice, by
position. Left to ``PACK``, a 4-GPU trainer on 8-GPU nodes pushes every 8-GPU engine
across two nodes (tensor parallelism over the network). Here every bundle is given a node
up front: positions are filled node by node, and an engine that does not fit in what is
left of a node starts on the next node (the GPUs skipped are simply not reserved). An
engine bigger than any node takes whole nodes of one size, and, where nodes name their
NVLink domains, consecutive nodes of one domain (a node without a domain is a domain of its
own; docs/concepts/nvlink-domains.md). Since bundles end up ordered by (node rank, GPU),
the pinned group's positions are exactly the ones planned here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from placement_core import format_rank_list
from placement_ray.errors import EngineAlignmentError

__all__ = ["Domains", "align_engines", "describe_domains", "fitting_engine_sizes"]


Domains = Sequence[str | int] | None
"""Per node rank, what tells its NVLink domain apart (core's ``domain_key``), or None where
no node names one."""


@dataclass(slots=True)
class _Cursor:
    capacity: Sequence[int]
    domains: Domains = None
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
    nodes = _whole_nodes(cursor, size)
    if nodes is None:
        return False
    per_node = capacity[nodes.start]
    for n in nodes:
        pins.extend([n] * per_node)
    cursor.node, cursor.used = nodes.stop - 1, per_node
    return True


def _whole_nodes(cursor: _Cursor, size: int) -> range | None:
    """The consecutive whole nodes of one size (and one NVLink domain) that an engine of
    ``size`` GPUs takes from the cursor on, skipping to the next domain where the first
    ones would span two; None where there are none."""
    capacity, domains = cursor.capacity, cursor.domains
    while True:
        while cursor.node < len(capacity) and capacity[cursor.node] == 0:
            cursor.next_node()
        if cursor.node == len(capacity):
            return None
        per_node = capacity[cursor.node]
        nodes = range(cursor.node, cursor.node + size // per_node)
        if size % per_node or nodes.stop > len(capacity):
            return None
        if any(capacity[n] != per_node for n in nodes):
            return None
        if domains is None:
            return nodes
        other = next((n for n in nodes if domains[n] != domains[cursor.node]), None)
        if other is None:
            return nodes
        cursor.node, cursor.used = other, 0  # it would span two domains: start on the next


def _plan(
    capacity: Sequence[int], start: int, rollouts: int, total: int, size: int, domains: Domains
) -> list[int] | None:
    cursor = _Cursor(capacity, domains)
    pins: list[int] = []
    ok = _singles(cursor, pins, start)
    for _ in range(rollouts // size):
        ok = ok and _engine(cursor, pins, size)
    ok = ok and _singles(cursor, pins, total - start - rollouts)
    return pins if ok else None


def fitting_engine_sizes(
    capacity: Sequence[int],
    *,
    start: int,
    rollouts: int,
    total: int,
    domains: Domains = None,
) -> list[int]:
    """Engine sizes dividing ``rollouts`` whose engines would each keep to a node (or to
    whole nodes of one NVLink domain) here."""
    return [
        size
        for size in range(1, rollouts + 1)
        if rollouts % size == 0
        and _plan(capacity, start, rollouts, total, size, domains) is not None
    ]


def describe_domains(capacity: Sequence[int], domains: Sequence[str | int]) -> str:
    """The NVLink domains' sizes: ``rack-a: 8 GPUs on nodes 0-1, node 2 (no domain): 4 GPUs``."""
    members: dict[str | int, list[int]] = {}
    for node, key in enumerate(domains):
        members.setdefault(key, []).append(node)
    return ", ".join(
        f"{key}: {sum(capacity[n] for n in nodes)} GPUs on node"
        f"{'s' if len(nodes) > 1 else ''} {format_rank_list(nodes)}"
        if isinstance(key, str)
        else f"node {key} (no domain): {capacity[key]} GPUs"
        for key, nodes in members.items()
    )


def align_engines(
    capacity: Sequence[int],
    *,
    actors: int,
    start: int,
    rollouts: int,
    total: int,
    engine_size: int,
    domains: Domains = None,
) -> list[int]:
    """Per ordered position, the node rank its bundle is pinned to.

    Args:
        capacity: Per node rank, how many bundles it can hold.
        actors: The trainer's bundles (positions ``0..actors-1``).
        start: The rollout's first position.
        rollouts: The rollout's GPUs (positions ``start..start+rollouts-1``).
        total: Bundles in the group.
        engine_size: GPUs per rollout engine.
        domains: Per node rank, what tells its NVLink domain apart (a name, or the node's
            rank where it has none); an engine of several nodes then takes consecutive
            nodes of one domain. None: no node names a domain.

    Returns:
        ``total`` node ranks, non-decreasing: position p's bundle goes to node ``pins[p]``.

    Raises:
        EngineAlignmentError: the engines cannot each keep to one node or whole nodes;
            the message says which engine sizes would (and, with ``domains``, each
            domain's size).
    """
    if rollouts % engine_size:
        raise EngineAlignmentError(
            f"rollout_num_gpus_per_engine: {rollouts} rollout GPUs do not divide into "
            f"engines of {engine_size}",
            problems=[f"{rollouts} % {engine_size} != 0"],
        )
    pins = _plan(capacity, start, rollouts, total, engine_size, domains)
    if pins is not None:
        return pins
    sizes = fitting_engine_sizes(
        capacity, start=start, rollouts=rollouts, total=total, domains=domains
    )
    whole_nodes = _plan(capacity, start, rollouts, total, engine_size, None)
    if domains is not None and whole_nodes is not None:
        raise _domain_error(capacity, domains, engine_size, rollouts, sizes)
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


def _domain_error(
    capacity: Sequence[int],
    domains: Sequence[str | int],
    engine_size: int,
    rollouts: int,
    sizes: Sequence[int],
) -> EngineAlignmentError:
    """Engines that fit whole nodes, but not whole nodes of one NVLink domain."""
    fix = (
        f"engine sizes that fit: {', '.join(map(str, sizes))}"
        if sizes
        else "no engine size fits; add nodes or reserve fewer GPUs"
    )
    first: dict[str | int, int] = {}
    scattered = any(
        first.setdefault(key, node) != node and domains[node - 1] != key
        for node, key in enumerate(domains)
    )
    hint = (
        "; a domain's nodes are not consecutive in the node order: give the nodes "
        "node-rank labels domain by domain (docs/concepts/node-order.md)"
        if scattered
        else ""
    )
    return EngineAlignmentError(
        f"rollout_num_gpus_per_engine: {rollouts // engine_size} engines of {engine_size} "
        f"GPUs span several nodes and must each stay within one NVLink domain, but no "
        f"domain holds them in consecutive whole nodes here (NVLink domains: "
        f"{describe_domains(capacity, domains)}); {fix}{hint}",
        problems=[f"engines of {engine_size} GPUs straddle NVLink domains"],
        fitting_sizes=sizes,
    )
