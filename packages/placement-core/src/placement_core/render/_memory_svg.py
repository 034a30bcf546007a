"""The memory panel of the SVG and HTML views: a stacked bar per GPU per phase.

GPUs with the same capacity and the same processes (one :class:`GpuGroup`) share a row;
each phase is a bar whose segments are the components' bytes, in the components'
colours (hatched where past the palette), with the capacity drawn as a line and every
segment's bytes on hover.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from placement_core._memory_units import format_bytes
from placement_core._ranks import format_rank_list

from ._svg_base import CHAR_W, HATCH_ID, PAD, Swatch, xml_escape
from ._svg_base import number as n

if TYPE_CHECKING:
    from placement_core._memory_check import GpuGroup, MemoryReport, PhaseUse

__all__ = ["memory_panel"]

BAR_H = 14
BAR_GAP = 4
LABEL_W = 40 * CHAR_W
#: Kinds of GPU drawn; the rest are counted in a note.
MAX_GROUPS = 24


def _gpus(group: GpuGroup) -> str:
    return f"node {format_rank_list(group.nodes)} GPU {format_rank_list(group.indices)}"


def _bar(
    phase: PhaseUse,
    group: GpuGroup,
    swatches: Mapping[str, Swatch],
    x: float,
    y: float,
    scale: float,
) -> list[str]:
    out = [
        f'<text class="m" x="{n(x - 6)}" y="{n(y + BAR_H - 3)}" text-anchor="end">'
        f"{xml_escape(phase.name)}</text>"
    ]
    left = x
    for name, use in phase.components.items():
        width = use.bytes * scale
        swatch = swatches[name]
        state = "active" if use.active else "resident" if use.weights_and_optimizer else "offloaded"
        tip = (
            f"{_gpus(group)}, phase {phase.name}: {name} {state} {format_bytes(use.bytes)} "
            f"(weights and optimizer {format_bytes(use.weights_and_optimizer)}, activations "
            f"{format_bytes(use.activations)}, other {format_bytes(use.other)})"
        )
        fill = f' fill="url(#{HATCH_ID})"' if swatch.hatched else ""
        opacity = "" if use.active else ' fill-opacity="0.45"'
        out.append(
            f'<g class="tip memseg"><rect class="f{swatch.key[1:]}" x="{n(left)}" y="{n(y)}" '
            f'width="{n(width)}" height="{BAR_H}"{opacity}/>'
            + (
                f'<rect x="{n(left)}" y="{n(y)}" width="{n(width)}" height="{BAR_H}"{fill}/>'
                if fill
                else ""
            )
            + f"<title>{xml_escape(tip)}</title></g>"
        )
        left += width
    verdict = "fits" if phase.fits else "OVER"
    out.append(
        f'<text class="{"m" if phase.fits else "w"}" x="{n(left + 6)}" y="{n(y + BAR_H - 3)}">'
        f"{format_bytes(phase.total_bytes)} {verdict}</text>"
    )
    return out


def memory_panel(
    report: MemoryReport, swatches: Mapping[str, Swatch], y: float, width: float
) -> tuple[list[str], float]:
    """The panel from height ``y``, ``width`` wide: its elements and the height used."""
    top = y
    verdict = "fits" if report.fits else "WILL NOT FIT"
    out = [
        '<g class="memory">',
        f'<text class="h" x="{PAD}" y="{n(y + 14)}">MEMORY: {verdict} (bars: bytes per GPU per '
        "phase; the line: capacity)</text>",
    ]
    y += 24
    x = PAD + LABEL_W
    room = max(width - x - PAD - 14 * CHAR_W, 120.0)
    biggest = max(
        (max(g.capacity_bytes, *(p.total_bytes for p in g.phases)) for g in report.groups),
        default=1,
    )
    scale = room / max(biggest, 1)
    for group in report.groups[:MAX_GROUPS]:
        label = f"{_gpus(group)}: {format_bytes(group.capacity_bytes)}"
        out.append(f'<text x="{PAD}" y="{n(y + BAR_H - 3)}">{xml_escape(label)}</text>')
        y += BAR_H + BAR_GAP
        start = y
        for phase in group.phases:
            out += _bar(phase, group, swatches, x, y, scale)
            y += BAR_H + BAR_GAP
        line = x + group.usable_bytes * scale
        out.append(
            f'<line class="d" x1="{n(line)}" y1="{n(start - 2)}" x2="{n(line)}" y2="{n(y - 2)}">'
            f"<title>capacity {format_bytes(group.usable_bytes)}</title></line>"
        )
        y += 6
    if len(report.groups) > MAX_GROUPS:
        more = len(report.groups) - MAX_GROUPS
        out.append(f'<text class="m" x="{PAD}" y="{n(y + 12)}">... {more} more kinds of GPU</text>')
        y += 18
    out.append("</g>")
    return out, y - top
