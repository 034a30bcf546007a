"""The memory block of the table and map views: each kind of GPU's peak against its capacity."""

from __future__ import annotations

from typing import TYPE_CHECKING

from placement_core._memory_units import format_bytes
from placement_core._ranks import format_rank_list

from ._text import align, plural

if TYPE_CHECKING:
    from placement_core._memory_check import ComponentUse, GpuGroup, MemoryReport

__all__ = ["memory_block"]

#: Kinds of GPU listed; the rest are counted.
MAX_ROWS = 32


def _gpus(group: GpuGroup) -> tuple[str, str]:
    return format_rank_list(group.nodes), format_rank_list(group.indices)


def _state(use: ComponentUse) -> str:
    if use.active:
        return ""
    return " resident" if use.weights_and_optimizer or use.activations else " offloaded"


def memory_block(report: MemoryReport | None) -> list[str]:
    """Lines after a blank one: per kind of GPU (same capacity, same processes), its
    peak phase's bytes against its capacity, and per host over capacity its bytes;
    nothing without a report."""
    if report is None:
        return []
    verdict = "fits" if report.fits else "WILL NOT FIT"
    lines = ["", f"memory: {verdict} ({plural(len(report.groups), 'kind')} of GPU)"]
    rows: list[tuple[str, ...]] = [("NODES", "GPUS", "PEAK", "CAPACITY", "PHASE", "USE", "")]
    for group in report.groups[:MAX_ROWS]:
        peak = group.peak
        uses = ", ".join(
            f"{name} {format_bytes(use.bytes)}{_state(use)}"
            for name, use in peak.components.items()
        )
        rows.append(
            (
                *_gpus(group),
                format_bytes(peak.total_bytes),
                format_bytes(group.capacity_bytes),
                peak.name,
                uses,
                "ok" if group.fits else "OVER",
            )
        )
    lines += align(rows, indent="  ")
    if len(report.groups) > MAX_ROWS:
        lines.append(f"  ... and {len(report.groups) - MAX_ROWS} more kinds of GPU")
    for host in report.host_groups:
        if not host.fits and host.capacity_bytes is not None:
            lines.append(
                f"  node {format_rank_list(host.nodes)} host: {format_bytes(host.total_bytes)} "
                f"of {format_bytes(host.capacity_bytes)} OVER"
            )
    lines += [f"  note: {note}" for note in report.notes]
    return lines
