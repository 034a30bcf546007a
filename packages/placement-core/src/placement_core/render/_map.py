"""The ``map`` view: a node x accelerator grid of who sits where.

Each cell lists the processes on one accelerator as ``<code><ranks>`` (``ac0-1`` = ranks
0 and 1 of the component coded ``ac``), joined by ``+`` when components share it, so
colocation is visible at a glance. With node snapshots, a ``!`` after a cell's ranks
marks processes whose accelerators meet only across sockets (link ``SYS``). Whole-node
processes and hardware devices (robots) are summarised per node in the last column, with
the settings a device reads on its node (``robot_ip from the node``). Runs of
consecutive nodes with the same layout are folded into their first and last node, and
the map stops after ``max_nodes`` rows.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from placement_core._inventory import Node
from placement_core._topology_plan import crosses_socket, inventory_has_topology

from ._domains import domain_bands, renumbered_note
from ._grid import CROSSING, Fold, component_codes, device_name, fold_nodes, occupants_label
from ._held import HELD, HeldBy, held_cells, held_per_node
from ._memory_text import memory_block
from ._text import (
    HardwareNumbers,
    align,
    from_node_note,
    hardware_numbers,
    node_kind,
    node_tag,
    spares_block,
    summary,
    warnings_block,
)

if TYPE_CHECKING:
    from placement_core._memory_check import MemoryReport
    from placement_core._plan import NodeOccupancy, Plan

__all__ = ["component_codes", "render_map"]

FREE = "."
Marked = frozenset[tuple[str, int]]


def _crossing(plan: Plan) -> Marked:
    """The ``(component, rank)`` of every process whose accelerators meet across sockets."""
    if not inventory_has_topology(plan.inventory):
        return frozenset()
    return frozenset(
        (name, p.rank)
        for name, placements in plan.components.items()
        for p in placements
        if crosses_socket(p.link)
    )


def _extras(
    node: Node, occupancy: NodeOccupancy, codes: dict[str, str], numbers: HardwareNumbers
) -> str:
    configs = {(d.type, d.index): d.config for d in node.hardware}
    parts = [
        f"{device_name(kind, index, occupancy.node_rank, numbers)}: "
        f"{occupants_label(occupants, codes) or FREE}"
        + from_node_note(configs.get((kind, index), {}))
        for (kind, index), occupants in sorted(occupancy.hardware.items())
    ]
    if occupancy.node:
        parts.append(f"node: {occupants_label(occupancy.node, codes)}")
    return "; ".join(parts)


def render_map(
    plan: Plan,
    *,
    max_nodes: int = 64,
    memory: MemoryReport | None = None,
    held_by: HeldBy | None = None,
) -> str:
    """Draw the plan as a node x accelerator grid.

    Args:
        plan: The plan to draw.
        max_nodes: Most node rows to print; a note says how many were left out.
        memory: A memory check (docs/concepts/will-it-fit.md): a last block gives each
            kind of GPU's peak phase against its capacity.
        held_by: ``(node rank, accelerator index) -> job name`` of accelerators other
            jobs hold on the plan's nodes: drawn ``#<job>`` in their index's place.

    Returns:
        The map, ending with a newline.

    Raises:
        PlacementRuleError: ``held_by`` names a node outside the plan, a bad job name or
            an accelerator the plan uses.
    """
    names = list(plan.components)
    codes = component_codes(names)
    occupancy = plan.occupancy()
    numbers = hardware_numbers(plan)
    marked = _crossing(plan)
    held = held_per_node(plan, held_by)
    nodes = plan.inventory.nodes
    width = max((len(held_cells(node, held.get(node.rank, {}))) for node in nodes), default=0)
    header = ("NODE", "ACCELERATORS", *(str(i) for i in range(width)), "NODE-LEVEL / HARDWARE")
    rows: list[tuple[str, ...]] = [header]
    notes: list[tuple[int, str]] = []  # (row index it follows, text)
    folded = fold_nodes(plan, max_nodes=max_nodes, held=held)
    bands = domain_bands(plan)
    banded: dict[int, str] = {}  # row index it follows -> the domain band
    for item in folded.items:
        if isinstance(item, Fold):
            notes.append((len(rows) - 1, item.text))
        else:
            if item in bands:
                banded[len(rows) - 1] = bands[item]
            row = _row(
                nodes[item], occupancy[item], width, codes, numbers, marked, held.get(item, {})
            )
            rows.append((row[0], row[1] + node_tag(plan, item), *row[2:]))
    lines = [f"map: {summary(plan)}", _legend(codes, bool(marked), bool(held))]
    renumbered = renumbered_note(plan)
    lines += [renumbered, ""] if renumbered else [""]
    aligned = align(rows)
    for index, line in enumerate(aligned):
        lines.append(line)
        lines += [f"{'⋮':<4}  {text}" for after, text in notes if after == index]
        if index in banded:
            lines.append(f"── {banded[index]} ──")
    if folded.not_shown:
        lines.append(
            f"... {folded.not_shown} more nodes not shown (--format table or json lists all)"
        )
    lines += spares_block(plan)
    lines += warnings_block(plan)
    lines += memory_block(memory)
    return "\n".join(lines) + "\n"


def _legend(codes: dict[str, str], crossing: bool, held: bool = False) -> str:
    pairs = "  ".join(f"{code}={name}" for name, code in codes.items())
    legend = f"legend: {pairs}  ('+' joins components sharing a device, '{FREE}' is free"
    if held:
        legend += f", '{HELD}<job>' is held by another job"
    if crossing:
        legend += f", '{CROSSING}' marks processes whose accelerators meet across sockets"
    return legend + ")"


def _row(
    node: Node,
    occupancy: NodeOccupancy,
    width: int,
    codes: dict[str, str],
    numbers: HardwareNumbers,
    marked: Marked,
    held: Mapping[int, str],
) -> tuple[str, ...]:
    cells = [
        f"{HELD}{cell.job}"
        if cell.job is not None
        else occupants_label(occupancy.accelerators.get(cell.index, ()), codes, marked) or FREE
        for cell in held_cells(node, held)
    ]
    cells += [""] * (width - len(cells))
    return (str(node.rank), node_kind(node), *cells, _extras(node, occupancy, codes, numbers))
