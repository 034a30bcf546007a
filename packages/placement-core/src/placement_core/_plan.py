"""A plan: every component's placements for a config and an inventory.

:func:`plan` parses each ``component_placement`` rule, resolves it against the resource
space of its node group(s) and builds the placement records. Worker environments and the
occupancy view are computed on demand, so planning a million processes stays fast.

Components may share accelerators: ``actor: all`` next to ``rollout: 0-1`` is the normal
time-shared colocation of RL frameworks (RLinf offloads one while the other runs), so it
is shown (:meth:`Plan.sharing`, the table's ``shares ... with`` line, ``+`` in the map)
but never warned about. The plan warns only about what is likely a mistake:

- two processes of different components whose accelerator sets **partly** overlap, each
  holding accelerators the other does not (a 2-GPU engine on ``1-2`` across two 2-GPU
  groups on ``0-1`` and ``2-3``): one parallel group then straddles two of the other's,
  which is usually an off-by-one in a range. One set inside the other (a strided rollout
  engine inside a trainer's tensor-parallel group, one-GPU processes under a multi-GPU
  one) is fine;
- a hardware device (a robot arm) driven by two components.

Neither is reported for components under one key (``actor,inference: 0-7``) or named
together in ``plan(..., colocate=[("actor", "rollout")])``.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from operator import attrgetter
from types import MappingProxyType
from typing import Any

from ._busy import busy_accelerators
from ._config import ClusterConfig, ComponentRule, load_config
from ._env import worker_env
from ._errors import (
    InventoryError,
    PlacementRuleError,
)
from ._fabric_plan import FabricHealth, check_fabric_health, fabric_health, fabric_policy
from ._inventory import Inventory
from ._limits import MAX_PROCESSES
from ._nvlink import (
    check_nvlink_groups,
    describe_key,
    domain_packed_rule,
    order_by_nvlink_domain,
)
from ._ranks import format_rank_list
from ._records import Placement, build_placements
from ._rules import Entry, Rule, parse_rule, resolve_rule
from ._scalars import is_int
from ._shown import shown
from ._sources import attach_hardware, explains_shortfalls, inventory_for
from ._spaces import ResourceSpace, SpaceKind, build_space
from ._spare_domains import resolve_spare_domains
from ._spares import Move, Spares, refuse_spares, spare_cover, without_spares
from ._topology_plan import TopologySolver
from ._vendors import accelerator_types, mixed_vendor_warnings, shared_whole_device_warnings

__all__ = ["NodeOccupancy", "Occupancy", "Occupant", "Plan", "plan"]

Occupant = tuple[str, int]
"""``(component, rank)`` of a process."""

_NODE_FACTOR = 1 << 24


@dataclass(frozen=True, slots=True)
class NodeOccupancy:
    """Who runs on one node.

    Attributes:
        node_rank: The node.
        accelerators: Per accelerator index of the node (every one, free ones with no
            occupant), the processes assigned to it.
        hardware: Per ``(hardware type, index)``, the processes assigned to it.
        node: Processes placed on the node as a whole (node placements).
    """

    node_rank: int
    accelerators: Mapping[int, tuple[Occupant, ...]]
    hardware: Mapping[tuple[str, int], tuple[Occupant, ...]]
    node: tuple[Occupant, ...]

    @property
    def shared_accelerators(self) -> tuple[int, ...]:
        """Indices of accelerators used by more than one component."""
        return tuple(
            index
            for index, occupants in self.accelerators.items()
            if len({component for component, _ in occupants}) > 1
        )


@dataclass(frozen=True, slots=True)
class Occupancy:
    """Per node, per accelerator: the ``(component, rank)`` pairs on it."""

    nodes: tuple[NodeOccupancy, ...]

    def __getitem__(self, node_rank: int) -> NodeOccupancy:
        return self.nodes[node_rank]

    def __len__(self) -> int:
        return len(self.nodes)


@dataclass(frozen=True, slots=True)
class Plan:
    """Every component's placements, plus warnings.

    Attributes:
        config: The cluster config planned.
        inventory: The nodes planned for (hardware attached).
        components: Component name -> placements in rank order; config order.
        warnings: Things that are allowed but probably unintended.
        assigned: True when built by
            :func:`~placement_core.plan_from_assignments` or
            :func:`~placement_core.replan`: the placements come from explicit
            assignments or moves, not from the config's rules, so the plan cannot be
            re-planned from its config.
        lost_nodes: Nodes lost so far (:func:`~placement_core.replan`): they hold no
            process; ascending.
        moves: How the processes of lost nodes moved to spares, by lost node.
    """

    config: ClusterConfig
    inventory: Inventory
    components: Mapping[str, Sequence[Placement]]
    warnings: tuple[str, ...] = ()
    assigned: bool = False
    lost_nodes: tuple[int, ...] = ()
    moves: tuple[Move, ...] = ()
    _cache: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    def __repr__(self) -> str:
        """A one-line summary: nodes, accelerators, processes per component, warnings.

        The full records are in ``components``; a plan of a million processes must not
        print them all.

        >>> from placement_core import Inventory
        >>> plan({"cluster": {"num_nodes": 2, "component_placement": {
        ...     "actor": "0-15", "rollout": "0-15:0-3"}}}, Inventory.uniform(2, 8))
        Plan(nodes=2, accelerators=16, components={'actor': 16, 'rollout': 4}, warnings=0)
        """
        accelerators = sum(len(node.accelerators) for node in self.inventory.nodes)
        counts = {name: len(placements) for name, placements in self.components.items()}
        return (
            f"Plan(nodes={self.inventory.num_nodes}, accelerators={accelerators}, "
            f"components={counts}, warnings={len(self.warnings)})"
        )

    def placements(self, component: str) -> Sequence[Placement]:
        """The placements of one component.

        Raises:
            PlacementRuleError: No such component.
        """
        try:
            return self.components[component]
        except KeyError:
            known = ", ".join(self.components) or "none"
            raise PlacementRuleError(
                f"no component is called {shown(component)}; components: {known}",
                path="component",
            ) from None

    def placement(self, component: str, rank: int) -> Placement:
        """The placement of one process.

        Raises:
            PlacementRuleError: No such component or rank.
        """
        placements = self.placements(component)
        if not is_int(rank) or not 0 <= rank < len(placements):
            raise PlacementRuleError(
                f"component {shown(component)} has ranks 0..{len(placements) - 1}, "
                f"got {shown(rank)}",
                path="rank",
            )
        return placements[rank]

    def master_addr(self, component: str) -> str:
        """Rank 0's node address (``Node.address``: its ip, else hostname, else node id)."""
        return self.inventory.nodes[self.placement(component, 0).node_rank].address

    def env(
        self,
        component: str,
        rank: int,
        *,
        master_addr: str | None = None,
        master_port: int | None = None,
    ) -> dict[str, str]:
        """The environment of one worker, built on demand.

        See docs/concepts/worker-environment.md.

        Args:
            component: The component name.
            rank: The process rank.
            master_addr: Overrides the default, rank 0's node address.
            master_port: Included as ``MASTER_PORT`` only when given.
        """
        placement = self.placement(component, rank)
        _, user_env = self.config.node_environment(placement.node_group, placement.node_rank)
        return worker_env(
            placement,
            world_size=len(self.components[component]),
            master_addr=master_addr or self.master_addr(component),
            master_port=master_port,
            user_env=user_env,
            hardware_configs=self.hardware_configs(component, rank),
            path=f"cluster.node_groups.{placement.node_group}.env_vars",
        )

    def hardware_configs(self, component: str, rank: int) -> tuple[Mapping[str, Any], ...]:
        """The config entries of the hardware devices one process drives (empty if none).

        In ``hardware_ranks`` order; :meth:`env` passes them on as
        ``PLACEMENT_HARDWARE_CONFIG``.
        """
        placement = self.placement(component, rank)
        if placement.hardware_type is None:
            return ()
        devices = {
            d.index: d.config
            for d in self.inventory.nodes[placement.node_rank].hardware
            if d.type == placement.hardware_type
        }
        return tuple(devices[index] for index in placement.hardware_ranks)

    def interpreter(self, component: str, rank: int) -> str | None:
        """The python interpreter of the placement's node group on its node, if any."""
        placement = self.placement(component, rank)
        interpreter, _ = self.config.node_environment(placement.node_group, placement.node_rank)
        return interpreter

    def __reduce__(self) -> tuple[Any, ...]:
        # MappingProxyType does not pickle; plans cross Ray process boundaries.
        components = dict(self.components)
        return (
            _rebuild_plan,
            (
                self.config,
                self.inventory,
                components,
                self.warnings,
                self.assigned,
                self.lost_nodes,
                self.moves,
                self._cache.get("fabric_health"),  # a live recovery's replan reads it
            ),
        )

    def _repr_html_(self) -> str:
        """The plan's picture in a notebook (Jupyter calls this)."""
        # Imported on demand: importing placement_core loads no renderer (the renderers
        # import this module for annotations only, so this makes no import circle).
        from .render._html import notebook_html

        return notebook_html(self)

    def occupancy(self) -> Occupancy:
        """Who sits on every accelerator, hardware device and node (computed once)."""
        cached = self._cache.get("occupancy")
        if cached is None:
            cached = _occupancy(self)
            self._cache["occupancy"] = cached
        return cached

    def spares(self) -> Spares:
        """The config's spare nodes and the used nodes each can take over (computed once).

        See docs/guides/node-loss.md. Empty when the config has no ``spare_nodes``.
        """
        cached = self._cache.get("spares")
        if cached is None:
            used: set[int] = set()
            if self.config.spare_nodes:
                for placements in self.components.values():
                    used.update(map(attrgetter("node_rank"), placements))
            cached = spare_cover(self.config, self.inventory, used)
            self._cache["spares"] = cached
        return cached

    def sharing(self) -> Mapping[str, tuple[str, ...]]:
        """Per component, the other components on any of its accelerators or devices.

        Components sharing a key (``actor,inference: 0-7``) count too; a component that
        shares nothing maps to ``()``. In config order; computed once.
        """
        cached = self._cache.get("sharing")
        if cached is None:
            order = {name: i for i, name in enumerate(self.components)}
            shared: dict[str, set[str]] = {name: set() for name in self.components}
            for node in self.occupancy().nodes:
                for occupants in (*node.accelerators.values(), *node.hardware.values()):
                    names = {component for component, _ in occupants}
                    if len(names) > 1:
                        for name in names:
                            shared[name] |= names - {name}
            cached = MappingProxyType(
                {
                    name: tuple(sorted(others, key=order.__getitem__))
                    for name, others in shared.items()
                }
            )
            self._cache["sharing"] = cached
        return cached


def _rebuild_plan(
    config: ClusterConfig,
    inventory: Inventory,
    components: dict[str, Sequence[Placement]],
    warnings: tuple[str, ...],
    assigned: bool = False,
    lost_nodes: tuple[int, ...] = (),
    moves: tuple[Move, ...] = (),
    health: FabricHealth | None = None,
) -> Plan:
    rebuilt = Plan(
        config, inventory, MappingProxyType(components), warnings, assigned, lost_nodes, moves
    )
    if health is not None:
        rebuilt._cache["fabric_health"] = health
    return rebuilt


@explains_shortfalls
def plan(
    config: ClusterConfig | Mapping[str, Any] | str | os.PathLike[str],
    inventory: Inventory | None = None,
    *,
    colocate: Iterable[Iterable[str]] = (),
    max_processes: int = MAX_PROCESSES,
) -> Plan:
    """Plan every component of a config.

    Args:
        config: A loaded config, or anything :func:`~placement_core.load_config`
            accepts (a path, a YAML string, a mapping).
        inventory: The nodes; None builds it from the config
            (:func:`~placement_core.inventory_for`). Hardware from the config's
            node groups is attached either way.
        colocate: Groups of component names allowed to share accelerators.
        max_processes: The most processes the plan may make, all components together
            (default :data:`~placement_core._limits.MAX_PROCESSES`, ten million). Counts
            are computed from the rules before any record is built, so a typo such as
            ``0:0-99999999`` fails at once.

    Returns:
        The plan.

    Raises:
        ConfigError: The config is invalid or sets a reserved env var.
        InventoryError: The inventory does not have ``num_nodes`` nodes.
        PlacementSyntaxError: A rule does not parse.
        PlacementRuleError: A rule cannot be placed (the message names the rule's path),
            or the plan would make more than ``max_processes`` processes (the message
            says how many).
    """
    if not is_int(max_processes) or max_processes < 1:
        raise PlacementRuleError(
            f"max_processes must be an int >= 1, got {shown(max_processes)}", path="max_processes"
        )
    if not isinstance(config, ClusterConfig):
        config = load_config(config)
    if inventory is None:
        inventory = inventory_for(config)
    if inventory.num_nodes != config.num_nodes:
        raise InventoryError(
            f"the inventory has {inventory.num_nodes} node(s) but the config declares "
            f"num_nodes: {config.num_nodes}; plan with an inventory of exactly that many nodes",
            path="cluster.num_nodes",
        )
    if config.node_order == "nvlink_domain":
        inventory = order_by_nvlink_domain(inventory)
    config = resolve_spare_domains(config, inventory)
    inventory = attach_hardware(inventory, config)
    spaces: dict[tuple[str, ...], ResourceSpace] = {}
    components: dict[str, Sequence[Placement]] = {}
    resolved: list[tuple[ComponentRule, ResourceSpace, list[Entry]]] = []
    health = fabric_health(inventory)
    policy = fabric_policy(config)
    warnings: list[str] = [*inventory.shortfalls, *inventory.warnings]
    left_free: dict[str, int] = {}  # rule key -> resources of degraded domains left free
    parsed = {
        key: _prepare_rule(key, rule, config, inventory, spaces, health, warnings, left_free)
        for key, rule in config.component_placement.items()
    }
    _check_process_count(parsed, max_processes)
    solver = TopologySolver(inventory)
    for key, rule in config.component_placement.items():
        parsed_rule, space = parsed[key]
        entries = resolve_rule(parsed_rule, space, stride=rule.stride)
        base = f"cluster.component_placement.{key}"
        if config.spare_nodes:
            used = list(dict.fromkeys(run.node_rank for _, run, _ in entries))
            refuse_spares(config, space, used, f"{base}.placement")
        entries, placements = _with_topology(
            base, rule, space, entries, inventory, solver, warnings
        )
        unused = space.size - len(placements) - left_free.get(key, 0)
        if parsed_rule.source != rule.placement and unused > 0:
            warnings.append(
                f"{_names(rule)}: placement {rule.placement} with nvlink_group: "
                f"{rule.nvlink_group} leaves {unused} resource(s) "
                f"of {space.describe()} free: the rest of their NVLink domain holds no "
                "whole group"
            )
        if rule.nvlink_group is not None:
            check_nvlink_groups(
                placements,
                rule.nvlink_group,
                inventory,
                names=_names(rule),
                path=f"cluster.component_placement.{key}.nvlink_group",
                ordered=config.node_order == "nvlink_domain",
            )
        unhealthy = check_fabric_health(
            health, policy, placements, names=_names(rule), path=f"{base}.placement"
        )
        if unhealthy is not None:
            warnings.append(unhealthy)
        for name in rule.names:
            components[name] = placements
        resolved.append((rule, space, entries))
    warnings += _sharing_warnings(resolved, colocate)
    warnings += [busy.describe() for busy in busy_accelerators(inventory, components)]
    types = accelerator_types(inventory)
    warnings += mixed_vendor_warnings(components, types)
    warnings += shared_whole_device_warnings(components, types)
    planned = Plan(config, inventory, MappingProxyType(components), tuple(warnings))
    planned._cache["fabric_health"] = health  # replan's spare choice reads it again
    return planned


def _prepare_rule(
    key: str,
    rule: ComponentRule,
    config: ClusterConfig,
    inventory: Inventory,
    spaces: dict[tuple[str, ...], ResourceSpace],
    health: FabricHealth,
    warnings: list[str],
    left_free: dict[str, int],
) -> tuple[Rule, ResourceSpace]:
    """The parsed rule and the resource space it is resolved against (a warning for each
    degraded NVLink domain an ``all`` with ``nvlink_group`` leaves free)."""
    base = f"cluster.component_placement.{key}"
    parsed = parse_rule(rule.placement, path=f"{base}.placement")
    space = spaces.get(rule.node_groups)
    if space is None:
        try:
            space = build_space(inventory, config, rule.node_groups, path=f"{base}.node_group")
        except (PlacementRuleError, InventoryError) as error:
            raise error.with_path(f"{base}.node_group") from None
        spaces[rule.node_groups] = space
    if config.spare_nodes and any(s.resources is None for s in parsed.segments):
        space = without_spares(space, config.spare_nodes)  # `all`: every usable resource
    if rule.nvlink_group == "all" or (isinstance(rule.nvlink_group, int) and rule.nvlink_group > 1):
        spares = frozenset(config.spare_nodes)
        parsed, skipped = domain_packed_rule(
            parsed,
            space,
            rule.nvlink_group,
            inventory,
            spares=spares,
            degraded=health.domains.keys(),
        )
        warnings += [
            f"{_names(rule)}: placement all with nvlink_group: {rule.nvlink_group} leaves "
            f"{describe_key(k)} free: its fabric is degraded "
            f"({health.describe_domain(k)})"
            for k in skipped
        ]
        kept = sum(len(run.local_ids) for run in space.runs if run.node_rank in spares)
        left_free[key] = sum(skipped.values()) + kept
    return parsed, space


def _check_process_count(
    parsed: Mapping[str, tuple[Rule, ResourceSpace]], max_processes: int
) -> None:
    """Refuse a plan of more than ``max_processes`` processes before building any."""
    # A rule's count is known from its text, or is its space's size for a lone `all`.
    counts = {
        key: rule.num_processes if rule.num_processes is not None else space.size
        for key, (rule, space) in parsed.items()
    }
    total = sum(counts.values())
    if total <= max_processes:
        return
    largest = sorted(counts.items(), key=lambda item: -item[1])[:3]
    shown_counts = ", ".join(f"{shown(key)}: {count:,}" for key, count in largest)
    raise PlacementRuleError(
        f"the plan would make {total:,} processes ({shown_counts}), more than "
        f"max_processes={max_processes:,}: check the rules for a typo, or raise the limit "
        "with plan(..., max_processes=N) or placement plan --max-processes N",
        path="cluster.component_placement",
    )


def _with_topology(
    base: str,
    rule: ComponentRule,
    space: ResourceSpace,
    entries: list[Entry],
    inventory: Inventory,
    solver: TopologySolver,
    warnings: list[str],
) -> tuple[list[Entry], Sequence[Placement]]:
    """Regroup by the rule's ``topology``, build the records, fill link and CPUs."""
    kinds = {run.kind for run in space.runs}
    if rule.topology != "any" and kinds != {SpaceKind.ACCELERATOR}:
        raise PlacementRuleError(
            f"topology: {rule.topology} groups accelerators, but {space.describe()} "
            "holds none to group; leave topology out (any) for this rule",
            path=f"{base}.topology",
        )
    if rule.numa_node is not None and SpaceKind.ACCELERATOR in kinds:
        raise PlacementRuleError(
            f"numa_node is for node and hardware placements; processes on "
            f"{space.describe()} get the CPUs local to their accelerators",
            path=f"{base}.numa_node",
        )
    entries, blind = solver.regroup(
        entries, rule.topology, strided=rule.stride > 1, path=f"{base}.topology"
    )
    if blind:
        warnings.append(
            f"{_names(rule)}: topology: {rule.topology} has no link information for "
            f"node(s) {format_rank_list(blind)} (no node snapshot): their accelerators "
            "keep index order"
        )
    placements = build_placements(entries, inventory)
    if SpaceKind.ACCELERATOR not in kinds and rule.numa_node is None:
        return entries, placements  # nothing to say about links or CPUs
    unknown = solver.annotate(
        placements,
        numa_node=rule.numa_node,
        path=f"{base}.numa_node",
        whole_nodes=space.is_node_space,
    )
    if unknown:
        warnings.append(
            f"{_names(rule)}: numa_node {rule.numa_node}: nothing is known about the NUMA "
            f"layout of node(s) {format_rank_list(unknown)} (no node snapshot): their "
            "processes get no CPU set"
        )
    return entries, placements


def _groups(entries: Sequence[Entry]) -> dict[int, tuple[int, ...]]:
    """Per accelerator key, the sorted accelerator keys of a multi-accelerator process on
    it (tuples of ints, which the garbage collector stops tracking; sets it never does)."""
    groups: dict[int, tuple[int, ...]] = {}
    for _, run, ids in entries:
        if run.kind is not SpaceKind.ACCELERATOR:
            continue
        base = run.node_rank * _NODE_FACTOR
        for group in ids if isinstance(ids, list) else (ids,):
            if len(group) > 1:
                keys = tuple([base + i for i in group])
                if any(a > b for a, b in pairwise(keys)):
                    keys = tuple(sorted(keys))
                groups.update(dict.fromkeys(keys, keys))
    return groups


def _lazy_groups(
    made: dict[int, dict[int, tuple[int, ...]]], index: int, entries: Sequence[Entry]
) -> dict[int, tuple[int, ...]]:
    """``_groups`` of a component's entries, made once (kept in ``made`` by index)."""
    groups = made.get(index)
    if groups is None:
        groups = made[index] = _groups(entries)
    return groups


def _devices(entries: Sequence[Entry]) -> set[tuple[int, str, int]]:
    hardware: set[tuple[int, str, int]] = set()
    for _, run, ids in entries:
        if run.kind is SpaceKind.HARDWARE:
            kind = run.resource_type or ""
            for group in ids if isinstance(ids, list) else (ids,):
                hardware.update((run.node_rank, kind, i) for i in group)
    return hardware


def _straddle(
    a: dict[int, tuple[int, ...]], b: dict[int, tuple[int, ...]]
) -> tuple[tuple[int, ...], tuple[int, ...]] | None:
    """A pair of partly overlapping process sets of a and b, if any."""
    small, large = (a, b) if len(a) <= len(b) else (b, a)
    for key, group in small.items():
        other = large.get(key)
        if other is None or other == group:
            continue
        if not (set(group).issubset(other) or set(other).issubset(group)):
            return (group, other) if small is a else (other, group)
    return None


def _sharing_warnings(
    resolved: Sequence[tuple[ComponentRule, ResourceSpace, list[Entry]]],
    colocate: Iterable[Iterable[str]],
) -> list[str]:
    declared = [frozenset(group) for group in colocate]
    groups: dict[int, dict[int, tuple[int, ...]]] = {}
    devices: dict[int, set[tuple[int, str, int]]] = {}
    warnings: list[str] = []
    for i, (rule_a, space_a, entries_a) in enumerate(resolved):
        for j in range(i + 1, len(resolved)):
            rule_b, space_b, entries_b = resolved[j]
            if space_a.is_node_space or space_b.is_node_space:
                continue
            if any(group & set(rule_a.names) and group & set(rule_b.names) for group in declared):
                continue
            for index, entries in ((i, entries_a), (j, entries_b)):
                if index not in devices:
                    devices[index] = _devices(entries)
            # Only processes of several accelerators on both sides can straddle: each
            # side's groups are made when the other side has some.
            pair = None
            if _lazy_groups(groups, i, entries_a):
                pair = _straddle(groups[i], _lazy_groups(groups, j, entries_b))
            if pair is not None:
                warnings.append(
                    f"components {_names(rule_a)} and {_names(rule_b)} have processes whose "
                    f"accelerators partly overlap ({_where(set(pair[0]))} and "
                    f"{_where(set(pair[1]))}): each holds accelerators the other does not, "
                    "usually an off-by-one in a range; if intended, pass colocate=[...] to "
                    "plan()"
                )
            shared_hw = devices[i] & devices[j]
            if shared_hw:
                first = min(shared_hw)
                warnings.append(
                    f"components {_names(rule_a)} and {_names(rule_b)} both drive "
                    f"{len(shared_hw)} hardware device(s) (first: {first[1]} {first[2]} on "
                    f"node {first[0]}); if intended, place them under one key "
                    f"('{rule_a.key},{rule_b.key}') or pass colocate=[...] to plan()"
                )
    return warnings


def _names(rule: ComponentRule) -> str:
    return "/".join(repr(name) for name in rule.names)


def _where(keys: set[int], limit: int = 3) -> str:
    by_node: dict[int, list[int]] = {}
    for key in sorted(keys):
        node_rank, index = divmod(key, _NODE_FACTOR)
        if node_rank not in by_node and len(by_node) == limit:
            break
        by_node.setdefault(node_rank, []).append(index)
    shown = "; ".join(
        f"node {node_rank} accelerators {format_rank_list(ids)}"
        for node_rank, ids in by_node.items()
    )
    more = len({key // _NODE_FACTOR for key in keys}) - len(by_node)
    return shown + (f"; and {more} more node(s)" if more > 0 else "")


def _occupancy(result: Plan) -> Occupancy:
    accelerators: list[dict[int, list[Occupant]]] = [
        {a.index: [] for a in node.accelerators} for node in result.inventory.nodes
    ]
    hardware: list[dict[tuple[str, int], list[Occupant]]] = [
        {(d.type, d.index): [] for d in node.hardware} for node in result.inventory.nodes
    ]
    whole: list[list[Occupant]] = [[] for _ in result.inventory.nodes]
    for component, placements in result.components.items():
        for p in placements:
            if not p.hardware_ranks:
                whole[p.node_rank].append((component, p.rank))
            elif p.hardware_type is None:
                slots = accelerators[p.node_rank]
                for index in p.hardware_ranks:
                    slots.setdefault(index, []).append((component, p.rank))
            else:
                devices = hardware[p.node_rank]
                for index in p.hardware_ranks:
                    devices.setdefault((p.hardware_type, index), []).append((component, p.rank))
    return Occupancy(
        tuple(
            NodeOccupancy(
                node.rank,
                {i: tuple(o) for i, o in accelerators[node.rank].items()},
                {k: tuple(o) for k, o in hardware[node.rank].items()},
                tuple(whole[node.rank]),
            )
            for node in result.inventory.nodes
        )
    )
