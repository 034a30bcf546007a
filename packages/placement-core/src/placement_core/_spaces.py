"""Resource spaces: how a node group numbers its resources ``0 .. R-1``.

See docs/concepts/cluster-config.md#node-groups-and-their-resources.

A space is a sequence of :class:`SpaceRun` s, one per node and group, each holding that
node's resources of one kind in node-local order. Working in runs (not per resource)
keeps resolution linear in the number of processes placed.

- A group with ``hardware`` numbers that hardware, node by node in node-rank order.
- A group without it numbers its nodes' accelerators; a node without accelerators
  contributes nothing. When none of its nodes has accelerators it numbers its nodes.
- ``cluster``: every node, accelerator space if any node has accelerators.
- ``node``: every node, always the node space.
- Several groups concatenate in the listed order; a resource counted twice and node
  spaces mixed with accelerator/hardware spaces are errors.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING

from ._errors import InventoryError, PlacementRuleError
from ._inventory import Inventory, Node
from ._shown import shown

if TYPE_CHECKING:
    from ._config import ClusterConfig

__all__ = [
    "CLUSTER_GROUP",
    "NODE_GROUP",
    "ResourceSpace",
    "SpaceKind",
    "SpaceRun",
    "build_space",
    "group_labels",
    "node_runs",
]

CLUSTER_GROUP = "cluster"
NODE_GROUP = "node"


class SpaceKind(StrEnum):
    """What the resources of a run are."""

    ACCELERATOR = "accelerator"
    HARDWARE = "hardware"
    NODE = "node"


_NOUNS = {
    SpaceKind.ACCELERATOR: "accelerators",
    SpaceKind.HARDWARE: "hardware devices",
    SpaceKind.NODE: "nodes",
}


@dataclass(frozen=True, slots=True, eq=False)
class SpaceRun:
    """Consecutive resources of one node, numbered by one group.

    Attributes:
        start: The space rank of the run's first resource.
        node_rank: The node the resources are on.
        local_ids: Node-local ids of the resources (accelerator indices, hardware
            indices); ``(0,)`` for the single resource of a node run.
        group: Label of the node group that numbers them.
        kind: Accelerators, hardware, or the node itself.
        resource_type: The accelerator type (``nvidia``) or hardware type (``Franka``);
            None for node runs.
    """

    start: int
    node_rank: int
    local_ids: tuple[int, ...]
    group: str
    kind: SpaceKind
    resource_type: str | None

    def describe(self) -> str:
        """A short human description such as ``nvidia accelerators of node 3``."""
        if self.kind is SpaceKind.NODE:
            return f"node {self.node_rank}"
        return f"{self.resource_type} {self.kind.value} of node {self.node_rank}"


class ResourceSpace:
    """The resources of one or more node groups, numbered ``0 .. size-1``.

    Attributes:
        groups: The group labels, in concatenation order.
        runs: The space's runs, ascending by ``start``.
        size: The number of resources.
    """

    __slots__ = ("_ids", "_singles", "_starts", "groups", "runs", "size")

    def __init__(self, groups: tuple[str, ...], runs: Sequence[SpaceRun]) -> None:
        self.groups = groups
        self.runs = tuple(runs)
        self._starts = [run.start for run in self.runs]
        last = self.runs[-1] if self.runs else None
        self.size = last.start + len(last.local_ids) if last else 0
        self._ids: dict[tuple[int, ...], tuple[int, ...]] = {}
        self._singles: dict[tuple[int, int, int], list[tuple[int, ...]]] = {}

    def __repr__(self) -> str:
        return f"ResourceSpace(groups={self.groups!r}, size={self.size}, runs={len(self.runs)})"

    @property
    def is_node_space(self) -> bool:
        """Whether the resources are whole nodes."""
        return bool(self.runs) and self.runs[0].kind is SpaceKind.NODE

    def describe(self) -> str:
        """Name the space for error messages."""
        label = ",".join(self.groups)
        noun = "node group" if len(self.groups) == 1 else "node groups"
        kinds = {run.kind for run in self.runs}
        what = _NOUNS[kinds.pop()] if len(kinds) == 1 else "resources"
        return f"{noun} '{label}' ({self.size} {what})"

    def locate(self, resource: int) -> tuple[SpaceRun, int]:
        """The run holding a resource rank and the resource's offset in it.

        Raises:
            PlacementRuleError: The rank is outside ``0 .. size-1``.
        """
        if not 0 <= resource < self.size:
            valid = f"0..{self.size - 1}" if self.size else "none"
            raise PlacementRuleError(
                f"resource rank {resource} is out of range for {self.describe()}: "
                f"valid ranks are {valid}"
            )
        index = bisect_right(self._starts, resource) - 1
        run = self.runs[index]
        return run, resource - run.start

    def intern(self, ids: tuple[int, ...]) -> tuple[int, ...]:
        """One shared tuple per distinct id tuple, so placements share their tuples."""
        return self._ids.setdefault(ids, ids)

    def single_runs(
        self, first: int, last: int
    ) -> Iterator[tuple[SpaceRun, list[tuple[int, ...]]]]:
        """Resources ``first .. last`` as ``(run, [(local_id,), ...])`` per run, in order.

        The lists (and their one-id tuples) are shared by every caller of this space and
        by every run with the same ids: callers must not change them.
        """
        index = bisect_right(self._starts, first) - 1
        runs = self.runs
        position = first
        while position <= last:
            run = runs[index]
            begin = position - run.start
            end = min(len(run.local_ids), last - run.start + 1)
            key = (id(run.local_ids), begin, end)
            singles = self._singles.get(key)
            if singles is None:
                singles = self._singles[key] = [self.intern((i,)) for i in run.local_ids[begin:end]]
            yield run, singles
            position = run.start + end
            index += 1

    def packed(
        self,
        first: int,
        last: int,
        per_process: int,
        stride: int = 1,
        *,
        first_process: int = 0,
    ) -> list[tuple[int, SpaceRun, tuple[int, ...] | list[tuple[int, ...]]]]:
        """Packed-with-stride groups of resources ``first .. last``, as rule entries.

        See docs/concepts/strategies.md#packed.

        The range is cut into blocks of ``per_process * stride`` consecutive resources;
        in each block, process ``j < stride`` takes offsets ``j, j+stride, ...``.

        Returns:
            Per run, in process order: ``(count, run, [local_ids of each process on it])``
            (the list holds ``count`` id tuples; runs with the same ids share one list,
            which callers must not change).

        Raises:
            PlacementRuleError: A block crosses a node (or resource type) boundary; the
                message names the process (numbered from ``first_process``) and nodes.
        """
        block = per_process * stride
        self.locate(first)
        self.locate(last)
        out: list[tuple[int, SpaceRun, tuple[int, ...] | list[tuple[int, ...]]]] = []
        index = bisect_right(self._starts, first) - 1
        runs = self.runs
        intern = self.intern
        # Runs whose processes take the same ids share one list: a strided rule over 10,000
        # like nodes would otherwise keep 10,000 equal lists for the collector to walk.
        shared: dict[tuple[tuple[int, ...], ...], list[tuple[int, ...]]] = {}
        current: list[tuple[int, ...]] = []
        current_run: SpaceRun | None = None
        for number, start in enumerate(range(first, last + 1, block)):
            run = runs[index]
            while start >= run.start + len(run.local_ids):
                index += 1
                run = runs[index]
            offset = start - run.start
            if offset + block > len(run.local_ids):
                other, _ = self.locate(start + block - 1)
                raise PlacementRuleError(
                    _span_message(
                        first_process + number * stride, start, start + block - 1, run, other
                    )
                )
            if run is not current_run:
                if current_run is not None:
                    current = shared.setdefault(tuple(current), current)
                    out.append((len(current), current_run, current))
                current = []
                current_run = run
            ids = run.local_ids
            if stride == 1:
                current.append(intern(ids[offset : offset + block]))
            else:
                for j in range(stride):
                    current.append(intern(ids[offset + j : offset + block : stride]))
        if current_run is not None:
            current = shared.setdefault(tuple(current), current)
            out.append((len(current), current_run, current))
        return out


def _span_message(process: int, first: int, last: int, a: SpaceRun, b: SpaceRun) -> str:
    where = f"resources {first}-{last}"
    if a.node_rank != b.node_rank:
        return (
            f"process {process} would span nodes {a.node_rank} and {b.node_rank} ({where}); "
            f"a process must stay on one node"
        )
    return (
        f"process {process} would span resources of different types "
        f"({a.describe()} and {b.describe()}, {where})"
    )


def group_labels(node_group: str | Sequence[str] | None) -> tuple[str, ...]:
    """Normalise a ``node_group`` value (``"a800,4090"``, a list, None) to labels.

    Raises:
        PlacementRuleError: A label is empty or not a string.
    """
    if node_group is None:
        return (CLUSTER_GROUP,)
    items = node_group.split(",") if isinstance(node_group, str) else list(node_group)
    labels: list[str] = []
    for item in items:
        if not isinstance(item, str) or not item.strip():
            raise PlacementRuleError(
                "expected node group labels such as 'a800' or 'a800,4090', "
                f"got {shown(node_group)}",
                path="node_group",
            )
        labels.append(item.strip())
    return tuple(labels)


def build_space(
    inventory: Inventory,
    config: ClusterConfig | None,
    node_group: str | Sequence[str] | None,
    *,
    path: str | None = None,
) -> ResourceSpace:
    """The resource space of one node group or the concatenation of several.

    Args:
        inventory: The cluster's nodes, with hardware attached.
        config: The cluster config that defines user node groups; None allows only
            the reserved groups ``cluster`` and ``node``.
        node_group: A label, comma-separated labels, a list of labels, or None for
            ``cluster``.
        path: The YAML path used in error messages.

    Raises:
        PlacementRuleError: An unknown group, a group listed twice, a resource counted
            by two groups, or node spaces mixed with accelerator/hardware spaces.
    """
    labels = group_labels(node_group)
    if len(labels) == 1:
        return ResourceSpace(labels, _group_runs(inventory, config, labels[0], 0, path))
    seen: set[str] = set()
    runs: list[SpaceRun] = []
    claims: dict[tuple[int, SpaceKind, str | None], str] = {}
    node_labels: list[str] = []
    other_labels: list[str] = []
    for label in labels:
        if label in seen:
            raise PlacementRuleError(f"node group '{label}' is listed twice", path=path)
        seen.add(label)
        group_runs = _group_runs(
            inventory, config, label, len(runs) and runs[-1].start + len(runs[-1].local_ids), path
        )
        for run in group_runs:
            key = (run.node_rank, run.kind, (run.resource_type or "").casefold() or None)
            other = claims.setdefault(key, label)
            if other != label:
                raise PlacementRuleError(
                    f"node groups '{other}' and '{label}' both number the "
                    f"{run.describe()}: one resource would get two ranks",
                    path=path,
                )
        if group_runs:
            (node_labels if group_runs[0].kind is SpaceKind.NODE else other_labels).append(label)
        runs.extend(group_runs)
    if node_labels and other_labels:
        raise PlacementRuleError(
            f"cannot concatenate node spaces ({', '.join(node_labels)}) with accelerator or "
            f"hardware spaces ({', '.join(other_labels)}): node ranks and device ranks "
            f"would mix",
            path=path,
        )
    return ResourceSpace(labels, runs)


def _group_runs(
    inventory: Inventory,
    config: ClusterConfig | None,
    label: str,
    start: int,
    path: str | None,
) -> list[SpaceRun]:
    nodes = inventory.nodes
    if label == NODE_GROUP:
        return _node_runs(nodes, label, start)
    if label == CLUSTER_GROUP:
        members: Sequence[Node] = nodes
        hardware_type = None
    else:
        if config is None:
            raise PlacementRuleError(
                f"node group '{label}' needs a cluster config that defines it "
                f"(only 'cluster' and 'node' exist without one)",
                path=path,
            )
        group = config.group(label)
        members = [_node(inventory, rank, label) for rank in group.node_ranks]
        hardware_type = group.hardware.type if group.hardware is not None else None
    if hardware_type is not None:
        return _hardware_runs(members, label, hardware_type, start)
    if any(node.accelerators for node in members):
        return _accelerator_runs(members, label, start)
    return _node_runs(members, label, start)


def _node(inventory: Inventory, rank: int, label: str) -> Node:
    if not 0 <= rank < inventory.num_nodes:
        raise InventoryError(
            f"node group '{label}' names node {rank}, but the inventory has nodes "
            f"0..{inventory.num_nodes - 1}",
            path="inventory",
        )
    return inventory.nodes[rank]


def _accelerator_runs(nodes: Sequence[Node], label: str, start: int) -> list[SpaceRun]:
    runs: list[SpaceRun] = []
    by_tuple: dict[int, tuple[int, ...]] = {}
    shared: dict[tuple[int, ...], tuple[int, ...]] = {}
    for node in nodes:
        if not node.accelerators:
            continue
        ids = by_tuple.get(id(node.accelerators))
        if ids is None:
            ids = node.accelerator_ids
            ids = shared.setdefault(ids, ids)
            by_tuple[id(node.accelerators)] = ids
        runs.append(
            SpaceRun(start, node.rank, ids, label, SpaceKind.ACCELERATOR, node.accelerator_type)
        )
        start += len(ids)
    return runs


def _hardware_runs(
    nodes: Sequence[Node], label: str, hardware_type: str, start: int
) -> list[SpaceRun]:
    runs: list[SpaceRun] = []
    wanted = hardware_type.casefold()
    for node in nodes:
        ids = tuple(
            sorted(device.index for device in node.hardware if device.type.casefold() == wanted)
        )
        if ids:
            runs.append(SpaceRun(start, node.rank, ids, label, SpaceKind.HARDWARE, hardware_type))
            start += len(ids)
    return runs


_NODE_IDS = (0,)


def _node_runs(nodes: Sequence[Node], label: str, start: int) -> list[SpaceRun]:
    return [
        SpaceRun(start + i, node.rank, _NODE_IDS, label, SpaceKind.NODE, None)
        for i, node in enumerate(nodes)
    ]


def node_runs(
    inventory: Inventory, config: ClusterConfig | None, node_group: str | None
) -> dict[int, SpaceRun]:
    """Node runs of every node of a group, by node rank (for the node strategy).

    Unlike :func:`build_space` this gives the node space of any group, whatever its
    resources: the node strategy places processes on whole nodes.
    """
    label = group_labels(node_group)
    if len(label) != 1:
        raise PlacementRuleError(
            f"the node strategy takes one node group, got {shown(node_group)}", path="node_group"
        )
    name = label[0]
    if name in (NODE_GROUP, CLUSTER_GROUP):
        members: Sequence[Node] = inventory.nodes
    elif config is None:
        raise PlacementRuleError(
            f"node group '{name}' needs a cluster config that defines it", path="node_group"
        )
    else:
        members = [_node(inventory, rank, name) for rank in config.group(name).node_ranks]
    return {run.node_rank: run for run in _node_runs(members, name, 0)}
