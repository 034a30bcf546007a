"""A plan from explicit per-process assignments.

A config's rules are one way to decide where processes run; a slime layout, an RLinf
strategy or a hand-written list are others. :func:`plan_from_assignments` turns any of
them (per component, per rank: a node rank and that node's accelerator ids) into the same
:class:`~placement_core.Plan` a config gives, so everything downstream (worker
environments, occupancy, launching) has one input.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from types import MappingProxyType
from typing import Any

from ._config import ClusterConfig, load_config
from ._errors import PlacementRuleError
from ._inventory import Inventory
from ._plan import Plan
from ._ranks import format_rank_list
from ._records import Placement

__all__ = ["Assignment", "plan_from_assignments"]

Assignment = tuple[int, Sequence[int]]
"""``(node rank, accelerator ids on that node)`` of one process; ``()``: no accelerator."""


def plan_from_assignments(
    assignments: Mapping[str, Sequence[Assignment]],
    inventory: Inventory,
    *,
    config: ClusterConfig | None = None,
    node_group: str = "cluster",
) -> Plan:
    """Build a plan from explicit assignments: per component, per rank, node and ids.

    Rank ``r`` of a component is its ``r``-th assignment. Each process sees exactly its own
    accelerators (isolated, ``LOCAL_RANK`` 0); ``local_rank`` / ``local_world_size`` count
    the component's processes on the same node and ``placement_node_rank`` numbers the
    component's nodes in order of first use, as a config's plan does. A process is on one
    node by construction (one node rank per assignment).

    >>> from placement_core import Inventory, plan_from_assignments
    >>> p = plan_from_assignments(
    ...     {"actor": [(0, (0, 1)), (1, (0, 1))], "rollout": [(1, (2,))]},
    ...     Inventory.uniform(2, 4),
    ... )
    >>> tuple((x.node_rank, x.hardware_ranks, x.local_rank) for x in p.components["actor"])
    ((0, (0, 1), 0), (1, (0, 1), 0))
    >>> p.env("rollout", 0)["CUDA_VISIBLE_DEVICES"]
    '2'

    Args:
        assignments: Component name -> ``[(node rank, accelerator ids), ...]`` in rank
            order; ids are node-local (``Accelerator.index``), ``()`` for a process that
            uses no accelerator.
        inventory: The nodes the ids refer to.
        config: The config whose node groups give env vars and interpreters; default: a
            config of ``inventory.num_nodes`` nodes with no node groups (its rules, one
            ``all`` per component, only name the components: the plan is marked
            ``assigned`` and never re-planned from them).
        node_group: The node group every process belongs to (``cluster``: all nodes).

    Returns:
        The plan (no warnings; sharing is the caller's decision).

    Raises:
        PlacementRuleError: an empty mapping or component, a malformed assignment, an
            unknown node, an accelerator id the node does not have, a repeated id in one
            process, a node outside ``node_group``, or a spare node of ``config``.
    """
    if not isinstance(assignments, Mapping) or not assignments:
        raise PlacementRuleError(
            "expected a non-empty mapping of component name -> [(node rank, ids), ...], "
            f"got {assignments!r}",
            path="assignments",
        )
    for name in assignments:
        if not isinstance(name, str) or not name:
            raise PlacementRuleError(
                f"expected non-empty component names, got {name!r}", path="assignments"
            )
    if config is None:
        rules = dict.fromkeys(assignments, "all")
        config = load_config(
            {"cluster": {"num_nodes": inventory.num_nodes, "component_placement": rules}}
        )
    components: dict[str, Sequence[Placement]] = {}
    for name, entries in assignments.items():
        components[name] = _placements(name, entries, inventory, config, node_group)
    return Plan(config, inventory, MappingProxyType(components), (), assigned=True)


def _placements(
    name: str,
    entries: Any,
    inventory: Inventory,
    config: ClusterConfig,
    node_group: str,
) -> Sequence[Placement]:
    path = f"assignments.{name}"
    if isinstance(entries, str | bytes) or not isinstance(entries, Sequence) or not entries:
        raise PlacementRuleError(
            f"expected a non-empty list of (node rank, accelerator ids), got {entries!r}",
            path=path,
        )
    checked = [_check(f"{path}[{rank}]", entry, inventory) for rank, entry in enumerate(entries)]
    counts: dict[int, int] = {}
    for node_rank, _ in checked:
        counts[node_rank] = counts.get(node_rank, 0) + 1
    order: dict[int, int] = {}
    seen: dict[int, int] = {}
    out = []
    spares = frozenset(config.spare_nodes)
    for rank, (node_rank, ids) in enumerate(checked):
        config.node_environment(node_group, node_rank)  # the node must be in the group
        if node_rank in spares:
            raise PlacementRuleError(
                f"node {node_rank} is a spare (cluster.spare_nodes "
                f"{format_rank_list(config.spare_nodes)}): no component may use it",
                path=f"{path}[{rank}]",
            )
        node = inventory.nodes[node_rank]
        types = {a.index: a.type for a in node.accelerators}
        local = seen.get(node_rank, 0)
        seen[node_rank] = local + 1
        out.append(
            Placement(
                rank=rank,
                node_rank=node_rank,
                node_id=node.node_id,
                placement_node_rank=order.setdefault(node_rank, len(order)),
                local_rank=local,
                local_world_size=counts[node_rank],
                hardware_ranks=ids,
                visible_accelerators=ids,
                local_accelerator_rank=ids[0] if ids else -1,
                accelerator_type=types[ids[0]] if ids else None,
                node_group=node_group,
                isolate_accelerator=True,
            )
        )
    return tuple(out)


def _check(path: str, entry: Any, inventory: Inventory) -> tuple[int, tuple[int, ...]]:
    shape = "a (node rank, accelerator ids) pair"
    if isinstance(entry, str | bytes) or not isinstance(entry, Sequence) or len(entry) != 2:
        raise PlacementRuleError(f"expected {shape}, got {entry!r}", path=path)
    node_rank, ids = entry
    if isinstance(node_rank, bool) or not isinstance(node_rank, int):
        raise PlacementRuleError(f"expected an int node rank, got {node_rank!r}", path=path)
    if not 0 <= node_rank < inventory.num_nodes:
        raise PlacementRuleError(
            f"node {node_rank} is not in the inventory (nodes 0..{inventory.num_nodes - 1})",
            path=path,
        )
    if isinstance(ids, str | bytes) or not isinstance(ids, Iterable):
        raise PlacementRuleError(f"expected a list of accelerator ids, got {ids!r}", path=path)
    ids = tuple(ids)
    known = inventory.nodes[node_rank].accelerator_ids
    bad = [i for i in ids if isinstance(i, bool) or not isinstance(i, int) or i not in known]
    if bad:
        raise PlacementRuleError(
            f"node {node_rank} has no accelerator {bad[0]!r} (its ids: {list(known)})",
            path=path,
        )
    if len(set(ids)) != len(ids):
        raise PlacementRuleError(f"accelerator ids repeat: {list(ids)}", path=path)
    return node_rank, ids
