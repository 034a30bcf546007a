"""NVLink domains in the plan: node order by domain, groups kept inside one domain.

See docs/concepts/nvlink-domains.md.

A node's domain is :attr:`~placement_core.Node.nvlink_domain`; a node without
one is a domain of its own. Three things use it:

- ``cluster.node_order: nvlink_domain`` renumbers the inventory so each domain's nodes
  are consecutive (:func:`order_by_nvlink_domain`);
- a rule ``all`` with ``nvlink_group: N`` is placed domain by domain, as many whole groups
  of ``N`` as each domain holds (:func:`domain_packed_rule`);
- every rule with ``nvlink_group`` is checked after placing (:func:`check_nvlink_groups`).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Collection, Iterable, Sequence
from operator import attrgetter
from typing import Any

from ._errors import PlacementRuleError
from ._inventory import Inventory, Node
from ._ranks import format_rank_list
from ._records import Placement, node_runs
from ._rules import Rule, parse_rule
from ._spaces import ResourceSpace

__all__ = [
    "check_nvlink_groups",
    "describe_domain",
    "describe_key",
    "domain_key",
    "domain_packed_rule",
    "order_by_nvlink_domain",
]

_MAX_SIZES_SHOWN = 12


def domain_key(node: Node) -> str | int:
    """What tells the node's domain apart: its name, or its rank when it has none."""
    return node.nvlink_domain if node.nvlink_domain is not None else node.rank


def describe_key(key: str | int) -> str:
    """A domain key as text: ``NVLink domain rack-a``, or ``node 5 (no NVLink domain)``."""
    return f"NVLink domain {key}" if isinstance(key, str) else f"node {key} (no NVLink domain)"


def describe_domain(node: Node) -> str:
    """``domain rack-a``, or ``no domain`` for a node that is a domain of its own."""
    return f"domain {node.nvlink_domain}" if node.nvlink_domain is not None else "no domain"


def order_by_nvlink_domain(inventory: Inventory) -> Inventory:
    """The inventory renumbered so that each NVLink domain's nodes are consecutive.

    Domains come in the order of their first node; inside a domain, nodes keep their
    order. A node without a domain is a domain of its own and stays where its rank puts
    it among the domains. Each node keeps its ``node_id`` (its identity); only ``rank``
    changes. Ordering an ordered inventory returns it unchanged.

    Args:
        inventory: The nodes, in the usual order.

    Returns:
        The renumbered inventory (the same object when nothing moves).
    """
    members: dict[str | int, list[Node]] = {}
    for node in inventory.nodes:
        members.setdefault(domain_key(node), []).append(node)
    ordered = [node for nodes in members.values() for node in nodes]
    if all(node.rank == rank for rank, node in enumerate(ordered)):
        return inventory
    # Every field but the rank, positionally: ten times faster than dataclasses.replace
    # on 100,000 nodes, and still every field a Node has.
    renumbered = []
    for rank, node in enumerate(ordered):
        values: list[Any] = list(_VALUES(node))
        values[_RANK] = rank
        renumbered.append(Node(*values))
    return Inventory(tuple(renumbered))


_FIELDS = tuple(f.name for f in dataclasses.fields(Node))
_VALUES = attrgetter(*_FIELDS)
_RANK = _FIELDS.index("rank")


def domain_packed_rule(
    rule: Rule,
    space: ResourceSpace,
    group: int | str,
    inventory: Inventory,
    *,
    spares: Collection[int] = frozenset(),
    degraded: Collection[str | int] = frozenset(),
) -> tuple[Rule, dict[str | int, int]]:
    """Rule ``all`` with ``nvlink_group: group``, placed domain by domain.

    Each stretch of the space whose resources lie in one domain gives as many whole
    groups of ``group`` resources (one process each) as it holds, from its start; the
    rest of the stretch is left free. Spare nodes are left out. Stretches of a
    ``degraded`` domain (see :mod:`placement_core._fabric_plan`) are left free too when
    a healthy stretch holds a group. A rule other than a plain ``all`` is returned as it
    is.

    Returns:
        The rule, and the degraded domains left free (domain key -> resources left, in
        node order).

    Raises:
        PlacementRuleError: No stretch holds one whole group (for ``group`` ``"all"``:
            the space spans more than one domain).
    """
    if len(rule.segments) != 1 or rule.segments[0].resources is not None:
        return rule, {}
    if rule.segments[0].processes is not None:
        return rule, {}
    stretches = _stretches(space, inventory, spares)
    if not isinstance(group, int):  # "all": one group of every resource, one domain
        if len(stretches) <= 1:
            return rule, {}
        largest = max(size for _, size, _ in stretches)
        raise PlacementRuleError(
            f"placement all with nvlink_group: all needs every resource of "
            f"{space.describe()} in one NVLink domain, but they lie in {len(stretches)} "
            f"domains and the largest holds {largest}: lower nvlink_group to at most "
            f"{largest}, or place the component on one domain's nodes",
            path=rule.path,
        )
    skipped: dict[str | int, int] = {}
    if degraded:
        healthy = [s for s in stretches if s[2] not in degraded]
        if any(size >= group for _, size, _ in healthy):
            for _, size, key in stretches:
                if key in degraded:
                    skipped[key] = skipped.get(key, 0) + size
            stretches = healthy
    segments = []
    for start, size, _ in stretches:
        used = size // group * group
        if used:
            segments.append(f"{start}-{start + used - 1}")
    if not segments:
        largest = max((size for _, size, _ in stretches), default=0)
        raise PlacementRuleError(
            f"placement all with nvlink_group: {group} needs {group} resources of one NVLink "
            f"domain for each group, but the largest domain of {space.describe()} holds "
            f"{largest}: lower nvlink_group to at most {largest}",
            path=rule.path,
        )
    return parse_rule(",".join(segments), path=rule.path), skipped


def _stretches(
    space: ResourceSpace, inventory: Inventory, spares: Collection[int]
) -> list[tuple[int, int, str | int]]:
    """``(first resource, count, domain key)`` of each maximal stretch of the space in
    one domain, spare nodes left out (they end a stretch)."""
    nodes = inventory.nodes
    out: list[tuple[int, int, str | int]] = []
    last: str | int | None = None
    for run in space.runs:
        if run.node_rank in spares:
            last = None
            continue
        key = domain_key(nodes[run.node_rank])
        if out and key == last:
            start, size, _ = out[-1]
            out[-1] = (start, size + len(run.local_ids), key)
        else:
            out.append((run.start, len(run.local_ids), key))
        last = key
    return out


def check_nvlink_groups(
    placements: Sequence[Placement],
    group: int | str,
    inventory: Inventory,
    *,
    names: str,
    path: str,
    ordered: bool,
) -> None:
    """Check that every ``group`` consecutive processes lie in one NVLink domain.

    Args:
        placements: The component's placements, in rank order.
        group: The rule's ``nvlink_group`` (``"all"``: every process).
        inventory: The nodes planned on.
        names: The component name(s), for the message.
        path: The YAML path of the rule's ``nvlink_group``.
        ordered: Whether the nodes are numbered by domain (``node_order:
            nvlink_domain``); when not, and numbering them so would move nodes, the
            message suggests it.

    Raises:
        PlacementRuleError: The group size does not divide the process count, or a group
            spans two domains (naming its ranks, nodes and domains, and the sizes that
            would fit).
    """
    count = len(placements)
    size = count if group == "all" else int(group)
    if count == 0 or size == 1:
        return
    nodes = inventory.nodes
    node_keys = [domain_key(node) for node in nodes]
    changes = _domain_changes(node_runs(placements), node_keys)
    if count % size:
        raise PlacementRuleError(
            f"nvlink_group: {size} does not divide the {count} processes of {names}: every "
            f"group must be whole; sizes that fit: {_fitting(count, changes)}",
            path=path,
        )
    bad = next((i for i in changes if i % size), None)
    if bad is None:
        return
    first = bad - bad % size
    members = placements[first : first + size]
    hint = ""
    if not ordered and order_by_nvlink_domain(inventory) is not inventory:
        hint = "; cluster.node_order: nvlink_domain numbers each domain's nodes consecutively"
    raise PlacementRuleError(
        f"processes {format_rank_list(range(first, first + size))} of {names} must share one "
        f"NVLink domain (nvlink_group: {group}), but they lie on {_where(members, nodes)}; "
        f"nvlink_group sizes that fit this placement: {_fitting(count, changes)}{hint}",
        path=path,
    )


def _domain_changes(runs: Iterable[tuple[int, int]], node_keys: Sequence[str | int]) -> list[int]:
    """The ranks whose process lies in another domain than the process before it."""
    changes: list[int] = []
    position, last = 0, None
    for node, count in runs:
        key = node_keys[node]
        if position and key != last:
            changes.append(position)
        last, position = key, position + count
    return changes


def _where(members: Sequence[Placement], nodes: Sequence[Node]) -> str:
    by_domain: dict[str | int, list[int]] = {}
    for p in members:
        ranks = by_domain.setdefault(domain_key(nodes[p.node_rank]), [])
        if not ranks or ranks[-1] != p.node_rank:
            ranks.append(p.node_rank)
    parts = []
    for ranks in by_domain.values():
        noun = "node" if len(ranks) == 1 else "nodes"
        parts.append(f"{noun} {format_rank_list(ranks)} ({describe_domain(nodes[ranks[0]])})")
    return " and ".join(parts)


def _fitting(count: int, changes: Sequence[int]) -> str:
    """The group sizes for which no group spans a domain change: divisors of a gcd."""
    common = math.gcd(count, *changes)
    small = [n for n in range(1, math.isqrt(common) + 1) if common % n == 0]
    sizes = sorted({*small, *(common // n for n in small)})
    shown = ", ".join(map(str, sizes[:_MAX_SIZES_SHOWN]))
    if len(sizes) > _MAX_SIZES_SHOWN:
        shown += f", ... {sizes[-1]}"
    return shown
