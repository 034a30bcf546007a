"""Placement strategies: packed (with stride), flexible and node.

See docs/concepts/strategies.md.

Each factory validates its arguments at once and returns a frozen strategy; the
strategy's :meth:`place` turns it into placements for an inventory (and, for user node
groups, the cluster config that defines them)::

    >>> from placement_core._inventory import Inventory
    >>> [p.hardware_ranks for p in packed(0, 7, per_process=2, stride=2).place(
    ...     Inventory.uniform(1, 8))]
    [(0, 2), (1, 3), (4, 6), (5, 7)]
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import TYPE_CHECKING

from ._errors import PlacementRuleError
from ._inventory import Inventory
from ._records import Placement, build_placements
from ._rules import Entry
from ._scalars import is_int
from ._sharing import shared_ranks
from ._shown import shown
from ._spaces import ResourceSpace, SpaceRun, build_space, group_labels, node_runs

if TYPE_CHECKING:
    from ._config import ClusterConfig

__all__ = [
    "Flexible",
    "NodeStrategy",
    "Packed",
    "StridedRollout",
    "flexible",
    "node",
    "packed",
    "strided_rollout",
]


def _check_int(value: object, name: str, minimum: int) -> int:
    if not is_int(value) or value < minimum:
        raise PlacementRuleError(f"expected an int >= {minimum}, got {shown(value)}", path=name)
    return value


def _is_list(value: object) -> bool:
    return isinstance(value, Sequence) and not isinstance(value, str | bytes)


def _space(
    target: Inventory | ResourceSpace,
    config: ClusterConfig | None,
    node_group: str | tuple[str, ...] | None,
) -> ResourceSpace:
    if isinstance(target, ResourceSpace):
        return target
    return build_space(target, config, node_group, path="node_group")


def _inventory(target: Inventory | ResourceSpace, inventory: Inventory | None) -> Inventory:
    if isinstance(target, Inventory):
        return target
    if inventory is None:
        raise PlacementRuleError(
            "placing on a ResourceSpace needs the inventory it was built from",
            path="inventory",
        )
    return inventory


@dataclass(frozen=True, slots=True)
class Packed:
    """Packed placement with stride; build it with :func:`packed`."""

    start: int
    end: int
    per_process: int = 1
    stride: int = 1
    node_group: str | tuple[str, ...] | None = None
    isolate_accelerator: bool = True

    def __post_init__(self) -> None:
        _check_int(self.start, "start", 0)
        _check_int(self.end, "end", 0)
        _check_int(self.per_process, "per_process", 1)
        _check_int(self.stride, "stride", 1)
        if self.end < self.start:
            raise PlacementRuleError(
                f"end {self.end} comes before start {self.start}: the range is inclusive "
                f"and must name at least one resource",
                path="end",
            )
        count = self.end - self.start + 1
        block = self.per_process * self.stride
        if count % block:
            raise PlacementRuleError(
                f"resources {self.start}-{self.end} ({count}) are not divisible into blocks "
                f"of per_process {self.per_process} x stride {self.stride} = {block}",
                path="end",
            )

    @property
    def num_processes(self) -> int:
        """How many processes the strategy places."""
        return (self.end - self.start + 1) // self.per_process

    def entries(self, space: ResourceSpace) -> list[Entry]:
        """Resolve against a space: ``(count, run, [local_ids, ...])`` per run, in rank order."""
        if self.end >= space.size:
            valid = f"0..{space.size - 1}" if space.size else "none"
            raise PlacementRuleError(
                f"resource {self.end} is out of range for {space.describe()}: valid ranks "
                f"are {valid}",
                path="end",
            )
        return space.packed(self.start, self.end, self.per_process, self.stride)

    def place(
        self,
        target: Inventory | ResourceSpace,
        config: ClusterConfig | None = None,
        *,
        inventory: Inventory | None = None,
    ) -> Sequence[Placement]:
        """The placements of this strategy.

        Args:
            target: The inventory (its space is built for ``node_group``) or a
                ready-made resource space.
            config: The cluster config that defines ``node_group`` (not needed for
                ``cluster`` and ``node``).
            inventory: The inventory, when ``target`` is a space.

        Raises:
            PlacementRuleError: A range out of the space, or a process that would span
                two nodes (the message names the process, the nodes and the span).
        """
        space = _space(target, config, self.node_group)
        return build_placements(
            self.entries(space),
            _inventory(target, inventory),
            isolate_accelerator=self.isolate_accelerator,
        )


def packed(
    start: int,
    end: int,
    per_process: int = 1,
    stride: int = 1,
    node_group: str | Sequence[str] | None = None,
    *,
    isolate_accelerator: bool = True,
) -> Packed:
    """Cut resources ``start..end`` (inclusive) into blocks of ``per_process * stride``.

    Inside a block, process ``j`` (``0 <= j < stride``) takes offsets ``j, j+stride,
    ...`` (``per_process`` of them); blocks proceed in order. ``stride > 1`` spreads
    rollout TP groups across a colocated trainer's shards (stride = trainer_tp /
    rollout_tp), see :func:`strided_rollout`.

    Args:
        start: First resource rank of the space.
        end: Last resource rank (inclusive).
        per_process: Resources per process (>= 1).
        stride: Distance between one process's resources inside a block (>= 1).
        node_group: Group label(s) whose space is used; None for ``cluster``.
        isolate_accelerator: Hide each process's other accelerators.

    Raises:
        PlacementRuleError: Bad arguments, or a count not divisible by
            ``per_process * stride``.
    """
    labels = None if node_group is None else group_labels(node_group)
    return Packed(start, end, per_process, stride, labels, isolate_accelerator)


@dataclass(frozen=True, slots=True)
class Flexible:
    """One explicit list of resource ranks per process; build it with :func:`flexible`."""

    resource_lists: tuple[tuple[int, ...], ...]
    node_group: str | tuple[str, ...] | None = None
    isolate_accelerator: bool = True

    def entries(self, space: ResourceSpace) -> list[Entry]:
        """Resolve against a space: one entry per process, ordered by first resource."""
        resolved: list[tuple[SpaceRun, tuple[int, ...]]] = []
        for i, resources in enumerate(self.resource_lists):
            run, _ = space.locate(resources[0])
            last_run, _ = space.locate(resources[-1])
            if last_run is not run:
                raise PlacementRuleError(
                    _flexible_span(i, resources, run, last_run), path=f"resource_lists[{i}]"
                )
            offsets = [r - run.start for r in resources]
            ids = tuple(run.local_ids[o] for o in offsets)
            resolved.append((run, space.intern(ids)))
        return [(1, run, ids) for run, ids in resolved]

    def place(
        self,
        target: Inventory | ResourceSpace,
        config: ClusterConfig | None = None,
        *,
        inventory: Inventory | None = None,
    ) -> Sequence[Placement]:
        """The placements of this strategy (see :meth:`Packed.place`)."""
        space = _space(target, config, self.node_group)
        return build_placements(
            self.entries(space),
            _inventory(target, inventory),
            isolate_accelerator=self.isolate_accelerator,
        )


def _flexible_span(index: int, resources: Sequence[int], a: SpaceRun, b: SpaceRun) -> str:
    if a.node_rank != b.node_rank:
        return (
            f"the process with resources {list(resources)} would span nodes "
            f"{a.node_rank} and {b.node_rank}; a process must stay on one node"
        )
    return (
        f"the process with resources {list(resources)} would span resources of "
        f"different types ({a.describe()} and {b.describe()})"
    )


def flexible(
    resource_lists: Sequence[Sequence[int]],
    node_group: str | Sequence[str] | None = None,
    *,
    isolate_accelerator: bool = True,
) -> Flexible:
    """One list of resource ranks per process.

    See docs/concepts/strategies.md#flexible.

    Each list is sorted (a copy: the caller's lists are never mutated); its resources
    must exist, be distinct, lie on one node and be of one type. Processes are ranked by
    their first resource (stable). Two processes may share a resource: colocation.

    Raises:
        PlacementRuleError: An empty outer or inner list, a non-int or negative rank, or
            a rank repeated inside one list.
    """
    if not _is_list(resource_lists):
        raise PlacementRuleError(
            f"expected a list of resource-rank lists, got {shown(resource_lists)}",
            path="resource_lists",
        )
    if not resource_lists:
        raise PlacementRuleError("expected at least one process", path="resource_lists")
    lists: list[tuple[int, ...]] = []
    for i, resources in enumerate(resource_lists):
        where = f"resource_lists[{i}]"
        if (
            not isinstance(resources, Sequence)
            or isinstance(resources, str | bytes)
            or not resources
        ):
            raise PlacementRuleError(
                f"expected a non-empty list of resource ranks, got {shown(resources)}", path=where
            )
        ranks = sorted(_check_int(r, where, 0) for r in resources)
        repeated = sorted({r for r, n in pairwise(ranks) if r == n})
        if repeated:
            raise PlacementRuleError(
                f"resource {repeated[0]} is listed twice for one process: {list(resources)}",
                path=where,
            )
        lists.append(tuple(ranks))
    order = sorted(range(len(lists)), key=lambda i: lists[i][0])
    labels = None if node_group is None else group_labels(node_group)
    return Flexible(tuple(lists[i] for i in order), labels, isolate_accelerator)


@dataclass(frozen=True, slots=True)
class NodeStrategy:
    """One process per listed node; build it with :func:`node`."""

    node_ranks: tuple[int, ...]
    node_group: str = "node"

    def entries(self, inventory: Inventory, config: ClusterConfig | None = None) -> list[Entry]:
        """``(count, run, ())`` per distinct node, in node order."""
        runs = node_runs(inventory, config, self.node_group)
        entries: list[Entry] = []
        for node_rank in self.node_ranks:
            run = runs.get(node_rank)
            if run is None:
                members = ", ".join(str(r) for r in sorted(runs)) or "none"
                raise PlacementRuleError(
                    f"node {node_rank} is not in node group '{self.node_group}' "
                    f"(its nodes: {members})",
                    path="node_ranks",
                )
            if entries and entries[-1][1] is run:
                entries[-1] = (entries[-1][0] + 1, run, ())
            else:
                entries.append((1, run, ()))
        return entries

    def place(
        self, inventory: Inventory, config: ClusterConfig | None = None
    ) -> Sequence[Placement]:
        """The placements: each process sees every accelerator of its node."""
        return build_placements(self.entries(inventory, config), inventory)


def node(node_ranks: Sequence[int] | int, node_group: str | None = None) -> NodeStrategy:
    """One process per entry of ``node_ranks``.

    See docs/concepts/strategies.md#node.

    Entries are cluster node ranks, sorted; repeats put several processes on a node.
    Each process sees all accelerators of its node (no isolation). ``node_group``
    (default ``node``: every node) selects whose env vars and interpreter apply; its
    nodes must include every entry.

    Raises:
        PlacementRuleError: An empty list, or a non-int or negative node rank.
    """
    items = [node_ranks] if isinstance(node_ranks, int) else node_ranks
    if not _is_list(items) or not items:
        raise PlacementRuleError(
            f"expected a non-empty list of node ranks, got {shown(node_ranks)}", path="node_ranks"
        )
    ranks = tuple(sorted(_check_int(r, "node_ranks", 0) for r in items))
    label = group_labels(node_group or "node")
    if len(label) != 1:
        raise PlacementRuleError(
            f"the node strategy takes one node group, got {shown(node_group)}", path="node_group"
        )
    return NodeStrategy(ranks, label[0])


@dataclass(frozen=True, slots=True)
class StridedRollout:
    """A strided rollout over a colocated trainer's accelerators.

    See docs/concepts/slime-layouts.md.

    Attributes:
        trainer_tp: Trainer tensor-parallel size.
        rollout_tp: Rollout tensor-parallel size (accelerators per rollout process).
        strategy: The packed strategy used (``per_process=rollout_tp``,
            ``stride=trainer_tp // rollout_tp``).
        placements: The rollout processes' placements.
        shared_with: Per rollout rank, the trainer ranks whose accelerators it uses.
    """

    trainer_tp: int
    rollout_tp: int
    strategy: Packed
    placements: Sequence[Placement]
    shared_with: tuple[tuple[int, ...], ...]

    @property
    def stride(self) -> int:
        """``trainer_tp // rollout_tp``."""
        return self.strategy.stride


def strided_rollout(
    trainer_tp: int,
    rollout_tp: int,
    inventory: Inventory,
    *,
    trainer: Sequence[Placement] | None = None,
    start: int = 0,
    end: int | None = None,
    node_group: str | Sequence[str] | None = None,
    config: ClusterConfig | None = None,
) -> StridedRollout:
    """Place rollout processes with stride ``trainer_tp / rollout_tp`` over a trainer.

    Each rollout process takes ``rollout_tp`` accelerators, one from each of
    ``rollout_tp`` consecutive shards of a trainer TP group, so weights sync over
    CUDA IPC on the same devices. The result reports, per rollout process, which
    trainer ranks share its accelerators (matched by UUID where the inventory knows it,
    else by node and index).

    Args:
        trainer_tp: Trainer tensor-parallel size (>= 1).
        rollout_tp: Rollout tensor-parallel size (>= 1, divides ``trainer_tp``).
        inventory: The nodes.
        trainer: The trainer's placements; None means one trainer process per
            accelerator of ``start..end``.
        start: First resource rank of the rollout (and default trainer) range.
        end: Last resource rank; None for the last of the space.
        node_group: Group label(s) of the space; None for ``cluster``.
        config: The cluster config defining ``node_group``.

    Raises:
        PlacementRuleError: ``trainer_tp`` is not a multiple of ``rollout_tp``, or the
            range does not divide or would make a process span nodes.
    """
    _check_int(trainer_tp, "trainer_tp", 1)
    _check_int(rollout_tp, "rollout_tp", 1)
    if trainer_tp % rollout_tp:
        raise PlacementRuleError(
            f"trainer_tp {trainer_tp} is not a multiple of rollout_tp {rollout_tp}: the "
            f"stride trainer_tp / rollout_tp must be an int",
            path="rollout_tp",
        )
    space = build_space(inventory, config, node_group, path="node_group")
    last = space.size - 1 if end is None else end
    strategy = packed(start, last, rollout_tp, trainer_tp // rollout_tp, node_group)
    placements = strategy.place(space, inventory=inventory)
    if trainer is None:
        trainer = packed(start, last, 1, 1, node_group).place(space, inventory=inventory)
    shared = shared_ranks(trainer, placements, inventory)
    return StridedRollout(trainer_tp, rollout_tp, strategy, placements, shared)
