"""The ``map`` view: a node x accelerator grid of who sits where.

Each cell lists the processes on one accelerator as ``<code><ranks>`` (``ac0-1`` = ranks
0 and 1 of the component coded ``ac``), joined by ``+`` when components share it, so
colocation is visible at a glance. Whole-node processes and hardware devices (robots) are
summarised per node in the last column. Runs of consecutive nodes with the same layout
are folded into their first and last node, and the map stops after ``max_nodes`` rows.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from placement_core._plan import NodeOccupancy, Plan
from placement_core.inventory import Node
from placement_core.ranks import format_rank_list

from ._text import HardwareNumbers, align, hardware_numbers, node_kind, summary, warnings_block

__all__ = ["component_codes", "render_map"]

FREE = "."


def component_codes(names: Sequence[str]) -> dict[str, str]:
    """Short, unique codes for component names: the shortest unique prefix of each.

    >>> component_codes(["actor", "agent", "rollout"])
    {'actor': 'ac', 'agent': 'ag', 'rollout': 'r'}
    """
    codes: dict[str, str] = {}
    for name in names:
        for length in range(1, len(name) + 1):
            prefix = name[:length]
            if all(other == name or other[:length] != prefix for other in names):
                break
        else:
            prefix = name
        # A code ending in a digit would run into the rank numbers that follow it.
        codes[name] = prefix + ":" if prefix[-1:].isdigit() else prefix
    return codes


def _occupants(occupants: Iterable[tuple[str, int]], codes: dict[str, str]) -> str:
    by_component: dict[str, list[int]] = {}
    for component, rank in occupants:
        by_component.setdefault(component, []).append(rank)
    return "+".join(
        codes[component] + format_rank_list(sorted(ranks))
        for component, ranks in by_component.items()
    )


def _shape(node: Node, occupancy: NodeOccupancy) -> tuple[object, ...]:
    """What a node's row looks like, ignoring the rank numbers."""
    cells = tuple(
        tuple(dict.fromkeys(c for c, _ in occupancy.accelerators.get(a.index, ())))
        for a in node.accelerators
    )
    hardware = tuple(
        (key, tuple(dict.fromkeys(c for c, _ in occupants)))
        for key, occupants in sorted(occupancy.hardware.items())
    )
    node_level = tuple(dict.fromkeys(c for c, _ in occupancy.node))
    return node_kind(node), cells, hardware, node_level


def _extras(occupancy: NodeOccupancy, codes: dict[str, str], numbers: HardwareNumbers) -> str:
    parts = [
        f"{kind} #{numbers[occupancy.node_rank, kind.casefold(), index]}: "
        f"{_occupants(occupants, codes) or FREE}"
        for (kind, index), occupants in sorted(occupancy.hardware.items())
    ]
    if occupancy.node:
        parts.append(f"node: {_occupants(occupancy.node, codes)}")
    return "; ".join(parts)


def render_map(plan: Plan, *, max_nodes: int = 64) -> str:
    """Draw the plan as a node x accelerator grid.

    Args:
        plan: The plan to draw.
        max_nodes: Most node rows to print; a note says how many were left out.

    Returns:
        The map, ending with a newline.
    """
    names = list(plan.components)
    codes = component_codes(names)
    occupancy = plan.occupancy()
    numbers = hardware_numbers(plan)
    nodes = plan.inventory.nodes
    width = max((len(node.accelerators) for node in nodes), default=0)
    header = ("NODE", "ACCELERATORS", *(str(i) for i in range(width)), "NODE-LEVEL / HARDWARE")
    rows: list[tuple[str, ...]] = [header]
    notes: list[tuple[int, str]] = []  # (row index it follows, text)
    shown = 0
    i = 0
    while i < len(nodes) and shown < max_nodes:
        shape = _shape(nodes[i], occupancy[i])
        end = i
        while end + 1 < len(nodes) and _shape(nodes[end + 1], occupancy[end + 1]) == shape:
            end += 1
        rows.append(_row(nodes[i], occupancy[i], width, codes, numbers))
        shown += 1
        if end - i >= 2:
            notes.append((len(rows) - 1, f"nodes {i + 1}-{end - 1}: same layout, ranks continue"))
        if end > i and shown < max_nodes:
            rows.append(_row(nodes[end], occupancy[end], width, codes, numbers))
            shown += 1
        elif end > i:
            end = i
        i = end + 1
    lines = [f"map: {summary(plan)}", _legend(codes), ""]
    aligned = align(rows)
    for index, line in enumerate(aligned):
        lines.append(line)
        lines += [f"{'⋮':<4}  {text}" for after, text in notes if after == index]
    if i < len(nodes):
        lines.append(
            f"... {len(nodes) - i} more nodes not shown (--format table or json lists all)"
        )
    lines += warnings_block(plan)
    return "\n".join(lines) + "\n"


def _legend(codes: dict[str, str]) -> str:
    pairs = "  ".join(f"{code}={name}" for name, code in codes.items())
    return f"legend: {pairs}  ('+' joins components sharing a device, '{FREE}' is free)"


def _row(
    node: Node,
    occupancy: NodeOccupancy,
    width: int,
    codes: dict[str, str],
    numbers: HardwareNumbers,
) -> tuple[str, ...]:
    cells = [
        _occupants(occupancy.accelerators.get(a.index, ()), codes) or FREE
        for a in node.accelerators
    ]
    cells += [""] * (width - len(cells))
    return (str(node.rank), node_kind(node), *cells, _extras(occupancy, codes, numbers))
