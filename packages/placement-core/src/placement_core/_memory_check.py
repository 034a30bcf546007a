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
from ._memory_load import GpuKey, gpu_processes
from ._memory_units import format_bytes
from ._plan import Plan
from ._ranks import format_rank_list

__all__ = [
    "ComponentUse",
    "GpuGroup",
    "GpuUse",
    "Headroom",
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
        members: ``(node rank, accelerator index)`` of each, in node order.
        capacity_bytes: Each one's memory.
        usable_bytes: The capacity less the headroom.
        phases: Each phase in which a component on them is active.
    """

    members: tuple[GpuKey, ...]
    capacity_bytes: int
    usable_bytes: int
    phases: tuple[PhaseUse, ...]

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
        hosts: Per node any component keeps host memory on.
        spec: The ``memory:`` section checked.
        notes: What the check could not count (a component without an entry, a host of
            unknown size).
    """

    groups: tuple[GpuGroup, ...]
    hosts: tuple[HostUse, ...]
    spec: MemorySpec
    notes: tuple[str, ...] = ()
    _by_gpu: dict[GpuKey, GpuGroup] = field(default_factory=dict, repr=False, compare=False)

    @property
    def fits(self) -> bool:
        return all(g.fits for g in self.groups) and all(h.fits for h in self.hosts)

    def gpus(self) -> Iterator[GpuUse]:
        """Every GPU a component with an entry uses, by node and index."""
        members = sorted((key, i) for i, group in enumerate(self.groups) for key in group.members)
        for (node, index), i in members:
            yield GpuUse(node, index, self.groups[i])

    def group_of(self, node_rank: int, index: int) -> GpuGroup | None:
        """The group of one GPU, or None when no component with an entry uses it."""
        if not self._by_gpu:
            self._by_gpu.update((m, g) for g in self.groups for m in g.members)
        return self._by_gpu.get((node_rank, index))

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


def _capacity(inventory: Inventory, key: GpuKey, cache: dict[int, dict[int, int | None]]) -> int:
    node = inventory.nodes[key[0]]
    table = cache.get(id(node.accelerators))
    if table is None:
        table = cache[id(node.accelerators)] = {a.index: gpu_capacity(a) for a in node.accelerators}
    capacity = table.get(key[1])
    if capacity is None:
        model = next((a.model for a in node.accelerators if a.index == key[1]), None)
        raise InventoryError(
            f"memory: the capacity of node {key[0]}'s accelerator {key[1]} is unknown (no "
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
    def of(cls, loads: Mapping[GpuKey, Mapping[str, int]]) -> _Sizes:
        sizes = cls()
        nodes: dict[tuple[str, int], int] = {}
        for (node, _), slot in loads.items():
            for name in slot:
                sizes.gpus[name] = sizes.gpus.get(name, 0) + 1
                nodes[name, node] = nodes.get((name, node), 0) + 1
        for (name, _), count in nodes.items():
            sizes.per_node[name] = max(sizes.per_node.get(name, 0), count)
        return sizes


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
    headroom = headroom or Headroom()
    loads = gpu_processes(plan.components, spec.components)
    sizes = _Sizes.of(loads)
    phases = _phases(spec)
    capacities: dict[int, dict[int, int | None]] = {}
    cache: dict[tuple[str, int], Figures] = {}
    grouped: dict[tuple[int, tuple[tuple[str, int], ...]], list[GpuKey]] = {}
    for key, slot in loads.items():
        signature = (_capacity(plan.inventory, key, capacities), tuple(slot.items()))
        grouped.setdefault(signature, []).append(key)
    groups = []
    for (capacity, occupants), members in grouped.items():
        figures = {
            name: component_figures(
                spec.components[name],
                capacity=capacity,
                gpus=sizes.gpus[name],
                gpus_per_node=sizes.per_node[name],
                cache=cache,
            )
            for name, _ in occupants
        }
        usable = headroom.usable(capacity)
        here = {name for name, _ in occupants}
        uses = tuple(
            _phase(name, active & here, occupants, figures, spec, usable)
            for name, active in phases
            if active & here
        )
        groups.append(GpuGroup(tuple(sorted(members)), capacity, usable, uses))
    groups.sort(key=lambda g: g.members[0])
    hosts = _hosts(plan.inventory, loads, spec, cache)
    return MemoryReport(tuple(groups), hosts, spec, _notes(plan, spec, hosts))


def _hosts(
    inventory: Inventory,
    loads: Mapping[GpuKey, Mapping[str, int]],
    spec: MemorySpec,
    cache: Mapping[tuple[str, int], Figures],
) -> tuple[HostUse, ...]:
    figures = {name: f for (name, _), f in cache.items()}
    per_node: dict[int, dict[str, int]] = {}
    for (node, _), slot in loads.items():
        counts = per_node.setdefault(node, {})
        for name, count in slot.items():
            counts[name] = counts.get(name, 0) + count
    hosts = []
    for node, counts in sorted(per_node.items()):
        components: dict[str, int] = {}
        for name, count in counts.items():
            f = figures[name]
            offloaded = f.offloaded_to_host * count if spec.components[name].entry.offload else 0
            if f.host_per_node + offloaded:
                components[name] = f.host_per_node + offloaded
        if components:
            capacity = inventory.nodes[node].host_memory_bytes
            hosts.append(HostUse(node, capacity, sum(components.values()), components))
    return tuple(hosts)


def _notes(plan: Plan, spec: MemorySpec, hosts: Sequence[HostUse]) -> tuple[str, ...]:
    notes = list(spec.notes)
    missing = [name for name in plan.components if name not in spec.components]
    if missing:
        notes.append(
            f"memory: {', '.join(missing)} {'has' if len(missing) == 1 else 'have'} no entry: "
            "not counted"
        )
    unknown = [host.node_rank for host in hosts if host.capacity_bytes is None]
    if unknown:
        notes.append(
            f"memory: host memory of node {format_rank_list(unknown)} unknown: host use not "
            "checked (node snapshots carry it; inventory: entries take host_memory_bytes)"
        )
    return tuple(notes)


def describe_group(group: GpuGroup) -> str:
    """A one-line summary: ``peak 43.0 GiB of 79.6 GiB (phase actor)``."""
    peak = group.peak
    return (
        f"peak {format_bytes(peak.total_bytes)} of {format_bytes(group.capacity_bytes)} "
        f"(phase {peak.name})"
    )
