"""Will it fit: every GPU in every phase, and every host, against its capacity.

See docs/concepts/will-it-fit.md.

Components on one GPU time-share it: each phase one of them is active and the others
stay resident (their memory counts) or are offloaded (``offload: true``: only their
per-process overhead stays). Declared phases (``memory.phases``) make components active
together. GPUs with the same capacity and the same processes on them are checked once
(a 10,000-node plan has a handful of kinds of GPU), so the check stays linear and cheap.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field

from ._errors import InventoryError
from ._inventory import Inventory
from ._memory_config import MemorySpec
from ._memory_figures import Figures, component_figures
from ._memory_gpus import gpu_capacity
from ._memory_load import NodeKind, node_kinds
from ._plan import Plan
from ._ranks import format_rank_list

GpuKey = tuple[int, int]
"""``(node rank, accelerator index)``."""

__all__ = [
    "ComponentUse",
    "GpuGroup",
    "GpuUse",
    "Headroom",
    "HostGroup",
    "HostUse",
    "MemoryReport",
    "PhaseUse",
    "check_spec",
]


@dataclass(frozen=True, slots=True)
class Headroom:
    """A margin kept free on every GPU: ``percent`` of its capacity, or ``bytes``."""

    bytes: int = 0
    percent: float = 0.0

    def usable(self, capacity: int) -> int:
        """The capacity less the margin."""
        return capacity - self.bytes - int(capacity * self.percent / 100)


@dataclass(frozen=True, slots=True)
class ComponentUse:
    """One component on one GPU in one phase (all its processes there together)."""

    active: bool
    bytes: int
    weights_and_optimizer: int
    activations: int
    other: int

    def to_dict(self) -> dict[str, object]:
        return {
            "active": self.active,
            "bytes": self.bytes,
            "weights_and_optimizer": self.weights_and_optimizer,
            "activations": self.activations,
            "other": self.other,
        }


@dataclass(frozen=True, slots=True)
class PhaseUse:
    """One phase on one GPU: its components' bytes, their total and the verdict."""

    name: str
    total_bytes: int
    fits: bool
    components: Mapping[str, ComponentUse]


@dataclass(frozen=True, slots=True)
class GpuGroup:
    """GPUs with the same capacity and the same processes: one verdict for all of them.

    Attributes:
        nodes: The nodes, ascending.
        indices: The accelerator indices on each of them, ascending.
        capacity_bytes: Each one's memory.
        usable_bytes: The capacity less the headroom.
        phases: Each phase in which a component on them is active.
    """

    nodes: tuple[int, ...]
    indices: tuple[int, ...]
    capacity_bytes: int
    usable_bytes: int
    phases: tuple[PhaseUse, ...]

    @property
    def members(self) -> tuple[GpuKey, ...]:
        """``(node rank, accelerator index)`` of each GPU, in node order."""
        return tuple((node, index) for node in self.nodes for index in self.indices)

    @property
    def count(self) -> int:
        """How many GPUs the group holds."""
        return len(self.nodes) * len(self.indices)

    @property
    def fits(self) -> bool:
        return all(phase.fits for phase in self.phases)

    @property
    def peak(self) -> PhaseUse:
        """The phase that uses the most memory."""
        return max(self.phases, key=lambda phase: phase.total_bytes)


@dataclass(frozen=True, slots=True)
class GpuUse:
    """One GPU's verdict (a view of its group)."""

    node_rank: int
    accelerator: int
    group: GpuGroup

    def to_dict(self) -> dict[str, object]:
        return {
            "node_rank": self.node_rank,
            "accelerator": self.accelerator,
            "capacity_bytes": self.group.capacity_bytes,
            "fits": self.group.fits,
            "phases": {
                phase.name: {
                    "total_bytes": phase.total_bytes,
                    "fits": phase.fits,
                    "components": {n: u.to_dict() for n, u in phase.components.items()},
                }
                for phase in self.group.phases
            },
        }


@dataclass(frozen=True, slots=True)
class HostGroup:
    """Nodes whose hosts hold the same bytes of the same components, against the same
    capacity (None when unknown: then it is not checked)."""

    nodes: tuple[int, ...]
    capacity_bytes: int | None
    total_bytes: int
    components: Mapping[str, int]

    @property
    def fits(self) -> bool:
        return self.capacity_bytes is None or self.total_bytes <= self.capacity_bytes


@dataclass(frozen=True, slots=True)
class HostUse:
    """One node's host memory: what its components keep there, against its capacity
    (None when unknown: then it is not checked)."""

    node_rank: int
    capacity_bytes: int | None
    total_bytes: int
    components: Mapping[str, int]

    @property
    def fits(self) -> bool:
        return self.capacity_bytes is None or self.total_bytes <= self.capacity_bytes

    def to_dict(self) -> dict[str, object]:
        return {
            "node_rank": self.node_rank,
            "capacity_bytes": self.capacity_bytes,
            "total_bytes": self.total_bytes,
            "fits": self.fits,
            "components": {name: {"bytes": size} for name, size in self.components.items()},
        }


@dataclass(frozen=True, slots=True)
class MemoryReport:
    """The memory check of a plan.

    Attributes:
        groups: The GPUs, grouped by capacity and occupants, in node order of their first.
        host_groups: The hosts any component keeps memory on, grouped alike.
        spec: The ``memory:`` section checked.
        notes: What the check could not count (a component without an entry, a host of
            unknown size).
    """

    groups: tuple[GpuGroup, ...]
    host_groups: tuple[HostGroup, ...]
    spec: MemorySpec
    notes: tuple[str, ...] = ()

    @property
    def fits(self) -> bool:
        return all(g.fits for g in self.groups) and all(h.fits for h in self.host_groups)

    @property
    def hosts(self) -> tuple[HostUse, ...]:
        """Per node any component keeps host memory on, by node."""
        uses = [
            HostUse(node, g.capacity_bytes, g.total_bytes, g.components)
            for g in self.host_groups
            for node in g.nodes
        ]
        return tuple(sorted(uses, key=lambda use: use.node_rank))

    def gpus(self) -> Iterator[GpuUse]:
        """Every GPU a component with an entry uses, by node and index."""
        members = sorted((key, i) for i, group in enumerate(self.groups) for key in group.members)
        for (node, index), i in members:
            yield GpuUse(node, index, self.groups[i])

    def to_dict(self) -> dict[str, object]:
        """The JSON contract: ``{fits, gpus: [...], hosts: [...]}``."""
        return {
            "fits": self.fits,
            "gpus": [gpu.to_dict() for gpu in self.gpus()],
            "hosts": [host.to_dict() for host in self.hosts],
        }


def _phases(spec: MemorySpec) -> tuple[tuple[str, frozenset[str]], ...]:
    named = {member for _, members in spec.phases for member in members}
    declared = tuple((name, frozenset(members)) for name, members in spec.phases)
    alone = tuple((name, frozenset((name,))) for name in spec.components if name not in named)
    return declared + alone


def _phase(
    name: str,
    active: frozenset[str],
    occupants: Sequence[tuple[str, int]],
    figures: Mapping[str, Figures],
    spec: MemorySpec,
    usable: int,
) -> PhaseUse:
    uses: dict[str, ComponentUse] = {}
    for component, count in occupants:
        f, on = figures[component], component in active
        if on or not spec.components[component].entry.offload:
            use = ComponentUse(
                on,
                f.resident * count,
                f.weights_and_optimizer * count,
                f.activations * count,
                f.other * count,
            )
        else:
            use = ComponentUse(False, f.other * count, 0, 0, f.other * count)
        uses[component] = use
    total = sum(use.bytes for use in uses.values())
    return PhaseUse(name, total, total <= usable, uses)


def _capacity(inventory: Inventory, node: int, index: int) -> int:
    accelerator = next((a for a in inventory.nodes[node].accelerators if a.index == index), None)
    capacity = None if accelerator is None else gpu_capacity(accelerator)
    if capacity is None:
        model = None if accelerator is None else accelerator.model
        raise InventoryError(
            f"memory: the capacity of node {node}'s accelerator {index} is unknown (no "
            f"memory_bytes from a node snapshot or the inventory: entry, and model "
            f"{model!r} is not a known GPU): give inventory accelerators memory_bytes or a "
            "model such as H100, or plan with node snapshots (--inventory)",
            path="inventory",
        )
    return capacity


@dataclass(slots=True)
class _Sizes:
    """Per component: its GPUs in the plan, and the most of them on one node."""

    gpus: dict[str, int] = field(default_factory=dict)
    per_node: dict[str, int] = field(default_factory=dict)

    @classmethod
    def of(cls, kinds: Sequence[NodeKind]) -> _Sizes:
        sizes = cls()
        for kind in kinds:
            here: dict[str, int] = {}
            for slot in kind.gpus.values():
                for name in slot:
                    here[name] = here.get(name, 0) + 1
            for name, count in here.items():
                sizes.gpus[name] = sizes.gpus.get(name, 0) + count * len(kind.nodes)
                sizes.per_node[name] = max(sizes.per_node.get(name, 0), count)
        return sizes


@dataclass(slots=True)
class _Checker:
    """The figures and phases of one check, each computed once."""

    plan: Plan
    spec: MemorySpec
    headroom: Headroom
    sizes: _Sizes
    phases: tuple[tuple[str, frozenset[str]], ...]
    figures: dict[tuple[str, int], Figures] = field(default_factory=dict)
    verdicts: dict[tuple[int, tuple[tuple[str, int], ...]], tuple[int, tuple[PhaseUse, ...]]] = (
        field(default_factory=dict)
    )

    def figure(self, name: str, capacity: int) -> Figures:
        return component_figures(
            self.spec.components[name],
            capacity=capacity,
            gpus=self.sizes.gpus[name],
            gpus_per_node=self.sizes.per_node[name],
            cache=self.figures,
        )

    def verdict(
        self, capacity: int, occupants: tuple[tuple[str, int], ...]
    ) -> tuple[int, tuple[PhaseUse, ...]]:
        """``(usable bytes, phases)`` of a GPU of ``capacity`` holding ``occupants``."""
        key = (capacity, occupants)
        if key not in self.verdicts:
            figures = {name: self.figure(name, capacity) for name, _ in occupants}
            usable = self.headroom.usable(capacity)
            here = {name for name, _ in occupants}
            uses = tuple(
                _phase(name, active & here, occupants, figures, self.spec, usable)
                for name, active in self.phases
                if active & here
            )
            self.verdicts[key] = (usable, uses)
        return self.verdicts[key]

    def host(self, kind: NodeKind, capacity: int | None) -> HostGroup | None:
        counts: dict[str, int] = {}
        for index, slot in kind.gpus.items():
            size = _capacity(self.plan.inventory, kind.nodes[0], index)
            for name, count in slot.items():
                counts[name] = counts.get(name, 0) + count
                self.figure(name, size)
        components: dict[str, int] = {}
        for name, count in counts.items():
            f = next(f for (n, _), f in self.figures.items() if n == name)
            offloaded = (
                f.offloaded_to_host * count if self.spec.components[name].entry.offload else 0
            )
            if f.host_per_node + offloaded:
                components[name] = f.host_per_node + offloaded
        if not components:
            return None
        return HostGroup(kind.nodes, capacity, sum(components.values()), components)


def check_spec(plan: Plan, spec: MemorySpec, *, headroom: Headroom | None = None) -> MemoryReport:
    """Check every GPU in every phase, and every host, of ``plan`` against its capacity.

    Args:
        plan: The plan.
        spec: The job's ``memory:`` section (:func:`~placement_core._memory_config.load_memory`).
        headroom: A margin kept free on every GPU.

    Returns:
        The report; ``report.fits`` is the verdict.

    Raises:
        InventoryError: A GPU's capacity is unknown.
        ConfigError: A trainer's sizes do not fit its GPUs (path ``memory.NAME``).
    """
    kinds = node_kinds(plan.components, spec.components, plan.inventory)
    checker = _Checker(plan, spec, headroom or Headroom(), _Sizes.of(kinds), _phases(spec))
    grouped: dict[tuple[int, tuple[tuple[str, int], ...], tuple[int, ...]], list[int]] = {}
    hosts = []
    for kind in kinds:
        on_node: dict[tuple[int, tuple[tuple[str, int], ...]], list[int]] = {}
        for index, slot in sorted(kind.gpus.items()):
            capacity = _capacity(plan.inventory, kind.nodes[0], index)
            on_node.setdefault((capacity, tuple(slot.items())), []).append(index)
        for (capacity, occupants), on in on_node.items():
            grouped.setdefault((capacity, occupants, tuple(on)), []).extend(kind.nodes)
        host = checker.host(kind, plan.inventory.nodes[kind.nodes[0]].host_memory_bytes)
        if host is not None:
            hosts.append(host)
    groups = []
    for (capacity, occupants, indices), nodes in grouped.items():
        usable, phases = checker.verdict(capacity, occupants)
        groups.append(GpuGroup(tuple(sorted(nodes)), indices, capacity, usable, phases))
    groups.sort(key=lambda g: (g.nodes[0], g.indices[0]))
    hosts.sort(key=lambda h: h.nodes[0])
    return MemoryReport(tuple(groups), tuple(hosts), spec, _notes(plan, spec, hosts))


def _notes(plan: Plan, spec: MemorySpec, hosts: Sequence[HostGroup]) -> tuple[str, ...]:
    notes = list(spec.notes)
    missing = [name for name in plan.components if name not in spec.components]
    if missing:
        notes.append(
            f"memory: {', '.join(missing)} {'has' if len(missing) == 1 else 'have'} no entry: "
            "not counted"
        )
    unknown = sorted(node for host in hosts if host.capacity_bytes is None for node in host.nodes)
    if unknown:
        notes.append(
            f"memory: host memory of node {format_rank_list(unknown)} unknown: host use not "
            "checked (node snapshots carry it; inventory: entries take host_memory_bytes)"
        )
    return tuple(notes)
