"""Warnings about accelerator vendors that do not agree (a leaf of the planner).

A component whose processes run on accelerators of two vendors (NVIDIA GPUs on some
nodes, Ascend NPUs on others) is allowed, since each process sees its own vendor's
devices, but one collective group cannot span both, so the plan says so.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ._ranks import format_rank_list
from ._records import Placement

__all__ = ["mixed_vendor_warnings"]


def mixed_vendor_warnings(components: Mapping[str, Sequence[Placement]]) -> list[str]:
    """One warning per component whose processes use accelerators of several types."""
    warnings = []
    for name, placements in components.items():
        nodes: dict[str, set[int]] = {}
        for p in placements:
            if p.accelerator_type is not None and p.hardware_ranks:
                nodes.setdefault(p.accelerator_type, set()).add(p.node_rank)
        if len(nodes) < 2:
            continue
        listed = "; ".join(
            f"{kind} on node(s) {format_rank_list(sorted(ranks))}"
            for kind, ranks in sorted(nodes.items())
        )
        warnings.append(
            f"{name!r} runs on accelerators of {len(nodes)} vendors ({listed}): one "
            "collective group (NCCL, HCCL) cannot span them; give each vendor's nodes a "
            "component of its own unless that is what you mean"
        )
    return warnings
