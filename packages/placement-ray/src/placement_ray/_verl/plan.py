"""Which node each rank of verl's resource pools sits on: a pure plan, checked up front.

verl describes a pool as ``process_on_nodes``: one count per node. The plan gives each
count a node (largest counts first, each on the first node in node order with the GPUs
and CPUs left; several counts may share a node that has room, as Ray's packing allows),
then lists the pool's ranks in node order. Every pool of a ``ResourcePoolManager`` is
planned together, so a job short of GPUs or CPUs anywhere is refused before anything is
reserved, naming the node and what it lacks.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from placement_ray.errors import ArgumentError, InfeasiblePlacementGroupError

__all__ = ["NodeRoom", "PoolPlan", "check_colocate_count", "check_counts", "plan_pools"]


@dataclass(frozen=True, slots=True)
class NodeRoom:
    """What one node offers the pools.

    Attributes:
        rank: The node's rank in the cluster's node order.
        gpus: Whole accelerators of the pools' resource on it.
        cpus: Its CPUs.
    """

    rank: int
    gpus: int
    cpus: float


@dataclass(frozen=True, slots=True)
class PoolPlan:
    """One pool's ranks, in order.

    Attributes:
        name: The pool's name.
        nodes: Node rank of rank 0, 1, ... (ascending: ranks follow node order).
        chunk: Bundles per placement group: verl's ``RayWorkerGroup`` takes rank ``r``
            from group ``r // chunk``, bundle ``r % chunk`` where ``chunk`` is the pool's
            first count (its ``store[0]``).
    """

    name: str
    nodes: tuple[int, ...]
    chunk: int

    @property
    def world_size(self) -> int:
        """The pool's number of ranks."""
        return len(self.nodes)

    def groups(self) -> list[tuple[int, ...]]:
        """Per placement group, the node of each of its used bundles (the last group may
        hold fewer than ``chunk``)."""
        return [self.nodes[i : i + self.chunk] for i in range(0, len(self.nodes), self.chunk)]


def check_counts(name: str, process_on_nodes: object) -> tuple[int, ...]:
    """A pool's ``process_on_nodes`` checked: a non-empty list of ints >= 1."""
    if isinstance(process_on_nodes, str | bytes) or not isinstance(process_on_nodes, Sequence):
        raise ArgumentError(
            f"{name}: expected a list of process counts per node such as [8, 8], "
            f"got {process_on_nodes!r}"
        )
    bad = [c for c in process_on_nodes if isinstance(c, bool) or not isinstance(c, int) or c < 1]
    if not process_on_nodes or bad:
        raise ArgumentError(
            f"{name}: expected a non-empty list of ints >= 1 (processes per node), "
            f"got {list(process_on_nodes)!r}"
        )
    return tuple(process_on_nodes)


def check_colocate_count(value: object) -> int:
    """``max_colocate_count`` checked: an int >= 1 (each bundle asks that many CPUs)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ArgumentError(
            "max_colocate_count: expected an int >= 1 (worker groups sharing each GPU; "
            f"each bundle asks that many CPUs), got {value!r}"
        )
    return value


def plan_pools(
    pools: Mapping[str, Sequence[int]],
    rooms: Sequence[NodeRoom],
    *,
    cpus_per_bundle: float,
    gpus_per_bundle: int = 1,
    resource: str = "GPU",
) -> dict[str, PoolPlan]:
    """Plan every pool on the nodes, or refuse before anything is reserved.

    Args:
        pools: Pool name -> ``process_on_nodes`` (already checked).
        rooms: The nodes the pools may use (spares left out), in node order.
        cpus_per_bundle: CPUs each rank's bundle asks (verl: ``max_colocate_count``).
        gpus_per_bundle: Accelerators each bundle asks (0 for a pool without GPUs).
        resource: The accelerators' Ray resource, for messages.

    Returns:
        Pool name -> its plan, in the order given.

    Raises:
        InfeasiblePlacementGroupError: a pool bigger than the cluster, or a count that no
            node has the GPUs or CPUs left for; the message names each node's shortfall.
    """
    _check_totals(pools, rooms, cpus_per_bundle, gpus_per_bundle, resource)
    free_gpus = {r.rank: r.gpus for r in rooms}
    free_cpus = {r.rank: r.cpus for r in rooms}
    plans: dict[str, PoolPlan] = {}
    for name, counts in pools.items():
        nodes: list[int] = []
        for count in sorted(counts, reverse=True):
            gpus, cpus = count * gpus_per_bundle, count * cpus_per_bundle
            rank = next(
                (
                    r.rank
                    for r in rooms
                    if free_gpus[r.rank] >= gpus and free_cpus[r.rank] + 1e-9 >= cpus
                ),
                None,
            )
            if rank is None:
                raise _no_node(name, count, rooms, free_gpus, free_cpus, cpus_per_bundle, resource)
            free_gpus[rank] -= gpus
            free_cpus[rank] -= cpus
            nodes.extend([rank] * count)
        plans[name] = PoolPlan(name=name, nodes=tuple(sorted(nodes)), chunk=counts[0])
    return plans


def _check_totals(
    pools: Mapping[str, Sequence[int]],
    rooms: Sequence[NodeRoom],
    cpus_per_bundle: float,
    gpus_per_bundle: int,
    resource: str,
) -> None:
    """A pool (or all pools) bigger than the cluster, said in the cluster's totals."""
    have_gpus = sum(r.gpus for r in rooms)
    have_cpus = sum(r.cpus for r in rooms)
    asked = sum(sum(c) for c in pools.values())
    problems = []
    if gpus_per_bundle and asked * gpus_per_bundle > have_gpus:
        problems.append(f"{asked * gpus_per_bundle} {resource} asked, the nodes have {have_gpus}")
    if asked * cpus_per_bundle > have_cpus + 1e-9:
        problems.append(
            f"{asked * cpus_per_bundle:g} CPUs asked ({asked} bundles x {cpus_per_bundle:g}), "
            f"the nodes have {have_cpus:g}"
        )
    if problems:
        spec = {name: list(c) for name, c in pools.items()}
        raise InfeasiblePlacementGroupError(
            f"resource_pool_spec {spec} is bigger than the cluster ({len(rooms)} usable nodes): "
            + "; ".join(problems),
            problems=problems,
        )


def _no_node(
    name: str,
    count: int,
    rooms: Sequence[NodeRoom],
    free_gpus: Mapping[int, int],
    free_cpus: Mapping[int, float],
    cpus_per_bundle: float,
    resource: str,
) -> InfeasiblePlacementGroupError:
    need_cpus = count * cpus_per_bundle
    lines = []
    for room in rooms:
        short = []
        if free_gpus[room.rank] < count:
            short.append(f"{count - free_gpus[room.rank]} {resource}")
        if free_cpus[room.rank] + 1e-9 < need_cpus:
            short.append(f"{need_cpus - free_cpus[room.rank]:g} CPUs")
        lines.append(
            f"node {room.rank}: {free_gpus[room.rank]} of {room.gpus} {resource} and "
            f"{free_cpus[room.rank]:g} of {room.cpus:g} CPUs left, short {' and '.join(short)}"
        )
    return InfeasiblePlacementGroupError(
        f"resource pool {name!r}: {count} processes on one node need {count} {resource} and "
        f"{need_cpus:g} CPUs ({count} x max_colocate_count {cpus_per_bundle:g}); no node has "
        "them (Ray would wait forever):\n" + "\n".join(f"  {line}" for line in lines),
        problems=lines,
    )
