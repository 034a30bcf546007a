"""Helpers shared by the text renderers."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from placement_core._checks import nodes
from placement_core._hardware import FROM_NODE_KEY
from placement_core._inventory import Node
from placement_core._ranks import format_rank_list
from placement_core._spaces import build_space

if TYPE_CHECKING:
    from placement_core._plan import Plan

HardwareNumbers = dict[tuple[int, str, int], int]
"""``(node rank, casefolded hardware type, node-local index)`` -> number in its group."""


def align(rows: Sequence[Sequence[str]], *, indent: str = "") -> list[str]:
    """Left-aligned columns separated by two spaces; trailing spaces trimmed."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return [
        (
            indent + "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True))
        ).rstrip()
        for row in rows
    ]


def ranks(values: Sequence[int]) -> str:
    """A rank list, or ``-`` for none."""
    return format_rank_list(values) or "-"


def hardware_numbers(plan: Plan) -> HardwareNumbers:
    """Every hardware device's number in its node group's space, as rules count it.

    A device's own index is node-local (the second robot of a node is 1); the group
    numbers its devices across its nodes, and that is what a rule such as ``0-1`` on the
    group names, so the views show it.
    """
    numbers: HardwareNumbers = {}
    for group in plan.config.node_groups:
        if group.hardware is None:
            continue
        for run in build_space(plan.inventory, plan.config, group.label).runs:
            kind = (run.resource_type or "").casefold()
            for offset, index in enumerate(run.local_ids):
                numbers[run.node_rank, kind, index] = run.start + offset
    return numbers


def node_kind(node: Node) -> str:
    """A node's accelerators in a few words: ``8x A800``, ``4x amd``, ``no accelerators``."""
    if not node.accelerators:
        return "no accelerators"
    first = node.accelerators[0]
    label = first.model or first.type
    return f"{len(node.accelerators)}x {label}"


def summary(plan: Plan) -> str:
    """One line: nodes, accelerators, components and processes of a plan."""
    nodes = plan.inventory.nodes
    accelerators = sum(len(node.accelerators) for node in nodes)
    processes = sum(len(placements) for placements in plan.components.values())
    return ", ".join(
        (
            plural(len(nodes), "node"),
            plural(accelerators, "accelerator"),
            plural(len(plan.components), "component"),
            plural(processes, "process"),
        )
    )


def plural(count: int, noun: str) -> str:
    """``1 node``, ``2 nodes``, ``3 processes``."""
    if count == 1:
        return f"1 {noun}"
    return f"{count} {noun}{'es' if noun.endswith('s') else 's'}"


def warnings_block(plan: Plan) -> list[str]:
    """The plan's warnings as lines, preceded by a blank line; none when there are none."""
    if not plan.warnings:
        return []
    return ["", *(f"warning: {warning}" for warning in plan.warnings)]


def from_node_note(config: Mapping[str, Any]) -> str:
    """`` (robot_ip from the node)`` for a device config that reads settings on its node."""
    fields = config.get(FROM_NODE_KEY) or {}
    return f" ({', '.join(fields)} from the node)" if fields else ""


def node_tag(plan: Plan, node_rank: int) -> str:
    """`` (spare)``, `` (lost: now node 16)`` or `` (spare: took over node 1)``; empty for
    other nodes. See docs/guides/node-loss.md."""
    for move in plan.moves:
        if move.lost == node_rank:
            return f" (lost: now node {move.spare})"
        if move.spare == node_rank:
            return f" (spare: took over node {move.lost})"
    if node_rank in plan.lost_nodes:
        return " (lost)"
    return " (spare)" if node_rank in plan.config.spare_nodes else ""


def spares_block(plan: Plan) -> list[str]:
    """The moves of lost nodes' processes and the spares, each line indented, after a
    blank line; none when the plan has neither."""
    lines: list[str] = []
    if plan.lost_nodes:
        lines += ["", f"lost nodes: {format_rank_list(plan.lost_nodes)}"]
        lines += [f"  {line}" for move in plan.moves for line in move.lines()]
        moved = {move.lost for move in plan.moves}
        idle = [rank for rank in plan.lost_nodes if rank not in moved]
        if idle:
            lines.append(f"  {nodes(idle)}: held no process, nothing moved")
    if plan.config.spare_nodes:
        lines += ["", f"spares: {format_rank_list(plan.config.spare_nodes)}"]
        lines += [f"  {line}" for line in plan.spares().lines()]
    return lines
