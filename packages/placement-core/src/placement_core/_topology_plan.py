"""Topology-aware placement: regroup accelerators by link, state each process's link and CPUs.

A component rule's ``topology`` says how its multi-accelerator processes are formed on
each node from the accelerators the rule gives the component there:

- ``any`` (default): in index order, as the rule reads (no change).
- ``best``: the grouping whose worst pairwise link is the best the node offers
  (``_topology.best_groups``), ranks still in node order, the same processes per node.
- ``nvlink``: as ``best``, and every process must reach all its accelerators over
  NVLink; otherwise planning fails naming the node and the best link it has.

Topology only regroups the accelerators a rule already gives a component on a node;
it never moves a component onto other accelerators, so colocation and sharing between
components stay as written. With ``stride > 1`` the pairing is the point (each rollout
process holds one accelerator of each trainer shard), so ``best`` is refused there and
``nvlink`` only checks the strided groups.

Nodes with equal topology are solved once per plan (solutions are cached by the node's
link table and the accelerators involved).

Every placement on a node with topology also gets ``link``, ``numa_node`` and ``cpus``
(:func:`annotate`). The CPUs local to a process's accelerators (their snapshot
``cpu_affinity``) are split without overlap between the component's processes on the
node that have the same local CPUs, in local-rank order (``_topology.split_cpus``).
Different components are not split against each other: components sharing accelerators
(a colocated trainer and rollout) take turns on them, and so on their CPUs too.
Node-placed processes (agents, simulators, robot controllers) may ask for a NUMA node
(rule key ``numa_node``): they get the CPUs of that NUMA node (known from the node's
accelerators), split the same way.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import groupby
from operator import attrgetter

from ._errors import PlacementRuleError
from ._inventory import Inventory, Node
from ._ranks import format_rank_list, parse_rank_list
from ._records import Placement, Placements, Process
from ._rules import Entry
from ._spaces import SpaceKind
from ._topology import best_groups, link_score, split_cpus, worst_label
from ._vocab import TOPOLOGY_MODES, TopologyMode

__all__ = [
    "TOPOLOGY_MODES",
    "NodeLinks",
    "TopologyMode",
    "TopologySolver",
    "crosses_socket",
    "inventory_has_topology",
    "is_nvlink",
]


Pair = tuple[int, int]


def is_nvlink(label: str | None) -> bool:
    """Whether a link label is NVLink (``NV<n>``)."""
    return label is not None and label.startswith("NV") and link_score(label) > link_score("X")


def crosses_socket(label: str | None) -> bool:
    """Whether a link label means the accelerators meet across sockets (``SYS``)."""
    return label == "SYS"


def inventory_has_topology(inventory: Inventory) -> bool:
    """Whether any node carries snapshot details: links, NUMA or CPU affinity, busy state.

    Renderers show the link, NUMA and CPU columns (and keys) only then, so plans of
    inventories declared without snapshots print exactly as before.
    """
    seen: set[int] = set()
    for node in inventory.nodes:
        if node.links:
            return True
        if id(node.accelerators) in seen:
            continue
        seen.add(id(node.accelerators))
        if node.has_topology or any(
            a.processes or a.memory_used_bytes is not None for a in node.accelerators
        ):
            return True
    return False


@dataclass(frozen=True, slots=True, eq=False)
class NodeLinks:
    """What a node's snapshot says about its accelerators' links and CPUs.

    Attributes:
        key: Hashable identity of the topology (equal for nodes of one model).
        labels: Link label per pair ``(a, b)``, ``a < b``.
        scores: ``link_score`` of each label.
        numa: NUMA node per accelerator index (None when unknown).
        cpus: Local CPU ids per accelerator index (empty when unknown).
    """

    key: tuple[object, ...]
    labels: Mapping[Pair, str]
    scores: Mapping[Pair, int]
    numa: Mapping[int, int | None]
    cpus: Mapping[int, tuple[int, ...]]

    @classmethod
    def of(cls, node: Node, key: tuple[object, ...] | None = None) -> NodeLinks:
        """The node's topology (possibly empty: no links, no NUMA data)."""
        labels = {(a, b): label for a, b, label in node.links}
        numa = {a.index: a.numa_node for a in node.accelerators}
        cpus = {
            a.index: parse_rank_list(a.cpu_affinity) if a.cpu_affinity else ()
            for a in node.accelerators
        }
        scores = {pair: link_score(label) for pair, label in labels.items()}
        return cls(key or _key(node), labels, scores, numa, cpus)

    def numa_cpus(self, numa_node: int) -> tuple[int, ...]:
        """CPUs of a NUMA node: those local to its accelerators (empty when none)."""
        found: set[int] = set()
        for index, node in self.numa.items():
            if node == numa_node:
                found.update(self.cpus[index])
        return tuple(sorted(found))


def _key(node: Node) -> tuple[object, ...]:
    return (node.links, tuple((a.index, a.numa_node, a.cpu_affinity) for a in node.accelerators))


_Annotations = tuple[list[str | None], list[int | None], list[str | None]]


def _slot_setter(name: str) -> Callable[[Placement, object], None]:
    """The slot's own setter: fills a frozen record's field without ``__setattr__``."""
    setter: Callable[[Placement, object], None] = Placement.__dict__[name].__set__
    return setter


_SET_LINK = _slot_setter("link")
_SET_NUMA = _slot_setter("numa_node")
_SET_CPUS = _slot_setter("cpus")
_PROCESS = attrgetter("hardware_type", "hardware_ranks")


class TopologySolver:
    """Per-plan caches: node topologies and solutions, shared by nodes of one model."""

    def __init__(self, inventory: Inventory) -> None:
        self.inventory = inventory
        self._links: dict[tuple[int, int], tuple[Node, NodeLinks | None]] = {}
        self._by_key: dict[tuple[object, ...], NodeLinks] = {}
        self._groups: dict[tuple[object, ...], tuple[tuple[int, ...], ...]] = {}
        self._annotations: dict[tuple[object, ...], _Annotations] = {}
        seen: set[int] = set()
        self.active = False
        for node in inventory.nodes:
            if node.links or id(node.accelerators) not in seen:
                seen.add(id(node.accelerators))
                if node.has_topology:
                    self.active = True
                    break

    def links(self, node_rank: int) -> NodeLinks | None:
        """The topology of a node, or None when its snapshot said nothing about it."""
        node = self.inventory.nodes[node_rank]
        # Nodes often share these tuples (uniform inventories): skip re-reading them.
        # The cache holds the node, so the ids stay unique.
        ident = (id(node.links), id(node.accelerators))
        cached = self._links.get(ident)
        if cached is not None:
            return cached[1]
        found: NodeLinks | None = None
        if node.has_topology:
            key = _key(node)
            found = self._by_key.get(key)
            if found is None:
                found = self._by_key[key] = NodeLinks.of(node, key)
        self._links[ident] = (node, found)
        return found

    # ------------------------------------------------------------------ regrouping

    def regroup(
        self, entries: list[Entry], mode: TopologyMode, *, strided: bool, path: str
    ) -> tuple[list[Entry], list[int]]:
        """Apply a rule's topology mode to its resolved entries.

        Returns:
            The entries (regrouped under ``best`` / ``nvlink``), and the ranks of nodes
            whose multi-accelerator processes could not be regrouped for want of link
            information (``best`` keeps their index order).

        Raises:
            PlacementRuleError: ``nvlink`` on a node where some process cannot have
                NVLink between all its accelerators, or without link information.
        """
        if mode == "any":
            return entries, []
        out: list[Entry] = []
        blind: list[int] = []
        for entry in entries:
            count, run, ids = entry
            if (
                run.kind is not SpaceKind.ACCELERATOR
                or not isinstance(ids, list)
                or len(ids[0]) < 2
            ):
                out.append(entry)
                continue
            links = self.links(run.node_rank)
            if links is None or not links.labels:
                if mode == "nvlink":
                    raise PlacementRuleError(
                        f"topology: nvlink needs the links between node {run.node_rank}'s "
                        f"accelerators, but its inventory has none (plan with its node "
                        f"snapshot: placement plan --inventory)",
                        path=path,
                    )
                blind.append(run.node_rank)
                out.append(entry)
                continue
            groups = ids if strided else self._best(links, ids)
            if mode == "nvlink":
                _require_nvlink(run.node_rank, ids, groups, links, strided, path)
            out.append((count, run, list(groups)))
        return out, sorted(set(blind))

    def _best(self, links: NodeLinks, ids: list[tuple[int, ...]]) -> tuple[tuple[int, ...], ...]:
        members = tuple(sorted(i for group in ids for i in group))
        size = len(ids[0])
        key = (links.key, members, size)
        groups = self._groups.get(key)
        if groups is None:
            groups = best_groups(members, size, links.scores)
            self._groups[key] = groups
        return groups

    # ------------------------------------------------------------------ annotating

    def annotate(
        self,
        placements: Sequence[Placement],
        *,
        numa_node: int | None,
        path: str,
        whole_nodes: bool = False,
    ) -> list[int]:
        """Fill ``link``, ``numa_node`` and ``cpus`` of fresh placements, node by node.

        Args:
            placements: One component's placements, just built (not yet shared).
            numa_node: The NUMA node node-placed processes asked for, or None.
            path: YAML path of the rule, for errors.
            whole_nodes: Every placement is a node placement (a node space).

        Returns:
            Ranks of nodes where ``numa_node`` was asked but nothing is known about the
            node's NUMA layout (the processes there get no CPUs).

        Raises:
            PlacementRuleError: ``numa_node`` names a NUMA node the node's snapshot does
                not show.
        """
        by_node = _processes_by_node(placements)
        if not self.active:
            if numa_node is None:
                return []
            return sorted({node_rank for node_rank, _ in by_node})
        unknown: list[int] = []
        links_out: list[str | None] = []
        numa_out: list[int | None] = []
        cpus_out: list[str | None] = []
        # A component's placements visit each node once, in rank order.
        for node_rank, on_node in by_node:
            links = self.links(node_rank)
            if links is None:
                if numa_node is not None:
                    unknown.append(node_rank)
                nothing = [None] * len(on_node)
                links_out += nothing
                numa_out += nothing
                cpus_out += nothing
                continue
            # Whole-node processes differ only in number; others by their devices.
            shape = len(on_node) if whole_nodes else on_node
            key = (id(links), numa_node, shape)
            values = self._annotations.get(key)
            if values is None:
                values = _annotations(on_node, links, numa_node, node_rank, path)
                self._annotations[key] = values
            links_out += values[0]
            numa_out += values[1]
            cpus_out += values[2]
        # The records are fresh and not shared yet.
        if isinstance(placements, Placements):
            placements.annotate(links_out, numa_out, cpus_out)
        else:  # built records: fill their slots at C speed
            deque(map(_SET_LINK, placements, links_out), maxlen=0)
            deque(map(_SET_NUMA, placements, numa_out), maxlen=0)
            deque(map(_SET_CPUS, placements, cpus_out), maxlen=0)
        return unknown


def _require_nvlink(
    node_rank: int,
    ids: list[tuple[int, ...]],
    groups: Iterable[tuple[int, ...]],
    links: NodeLinks,
    strided: bool,
    path: str,
) -> None:
    for group in groups:
        label = worst_label(group, links.labels)
        if is_nvlink(label):
            continue
        members = format_rank_list(sorted(i for g in ids for i in g))
        if strided:
            raise PlacementRuleError(
                f"topology: nvlink: on node {node_rank} the strided process on accelerators "
                f"{list(group)} reaches them over {label or 'an unknown link'}, not NVLink",
                path=path,
            )
        raise PlacementRuleError(
            f"topology: nvlink: node {node_rank} cannot give every process of {len(group)} "
            f"accelerators NVLink between all of them: the best grouping of its accelerators "
            f"{members} still joins {list(group)} over {label or 'an unknown link'}",
            path=path,
        )


def _processes_by_node(
    placements: Sequence[Placement],
) -> Iterable[tuple[int, tuple[Process, ...]]]:
    """Each node's processes, ``(hardware type, hardware ranks)``, without building records
    where the placements are stored compactly."""
    if isinstance(placements, Placements):
        return placements.processes_by_node()
    return (
        (node_rank, tuple(map(_PROCESS, group)))
        for node_rank, group in groupby(placements, key=attrgetter("node_rank"))
    )


def _local(ids: tuple[int, ...], links: NodeLinks) -> tuple[int | None, tuple[int, ...]]:
    numas = {links.numa.get(i) for i in ids}
    numa = numas.pop() if len(numas) == 1 else None
    cpus: set[int] = set()
    for i in ids:
        cpus.update(links.cpus.get(i, ()))
    return numa, tuple(sorted(cpus))


def _annotations(
    placements: Sequence[Process],
    links: NodeLinks,
    numa_node: int | None,
    node_rank: int,
    path: str,
) -> _Annotations:
    labels: list[str | None] = []
    numas: list[int | None] = []
    local: list[tuple[int, ...]] = []
    for hardware_type, hardware_ranks in placements:
        if hardware_type is None and hardware_ranks:
            labels.append(worst_label(hardware_ranks, links.labels))
            numa, cpus = _local(hardware_ranks, links)
        elif numa_node is not None:
            numa, cpus = numa_node, links.numa_cpus(numa_node)
            if not cpus:
                known = sorted({n for n in links.numa.values() if n is not None})
                raise PlacementRuleError(
                    f"numa_node {numa_node}: node {node_rank}'s snapshot shows no CPUs of "
                    f"NUMA node {numa_node} (NUMA nodes with CPUs known there: "
                    f"{format_rank_list(known) or 'none'})",
                    path=path,
                )
            labels.append(None)
        else:
            labels.append(None)
            numa, cpus = None, ()
        numas.append(numa)
        local.append(cpus)
    shares: list[str | None] = [None] * len(placements)
    sharing: dict[tuple[int, ...], list[int]] = {}
    for position, cpus in enumerate(local):
        if cpus:
            sharing.setdefault(cpus, []).append(position)
    for cpus, positions in sharing.items():
        for position, share in zip(positions, split_cpus(cpus, len(positions)), strict=True):
            shares[position] = format_rank_list(share)
    return labels, numas, shares
