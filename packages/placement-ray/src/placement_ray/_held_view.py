"""A shared job's plan views with the accelerators other jobs hold on its nodes.

``Launch.plan_view`` draws the job's plan (core's map, SVG or HTML) with ``held_by``:
every accelerator of the job's nodes that another job's lease holds, named by that job.
The ledger records physical accelerators; the plan names its own GPU ids, which Ray may
have mapped onto other physical ones (``Launch.gpu_map``): a held accelerator whose
index is one of the plan's ids is drawn in the place of the physical GPU the job holds
under another id, so no cell is claimed twice.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from placement_core.render import render_html, render_map, render_svg

from ._leases import lease_table
from .errors import ArgumentError

if TYPE_CHECKING:
    from ._launch import Launch

__all__ = ["VIEWS", "held_by_others", "in_plan_ids", "plan_view"]

VIEWS = ("map", "svg", "html")


def in_plan_ids(
    held: Mapping[tuple[int, int], str], gpu_map: Mapping[tuple[int, int], int]
) -> dict[tuple[int, int], str]:
    """``held`` (by physical index) moved into the plan's ids where they collide.

    Per node, the plan's ids the job holds under another physical GPU and the physical
    GPUs it holds under another id are paired in order; a held index among the first
    takes the place of its pair.
    """
    out: dict[tuple[int, int], str] = {}
    for (node, index), job in held.items():
        ids = {g for (n, g) in gpu_map if n == node}
        physical = {p for (n, _), p in gpu_map.items() if n == node}
        if index in ids:
            swap = dict(zip(sorted(ids - physical), sorted(physical - ids), strict=True))
            index = swap.get(index, index)
        out[(node, index)] = job
    return out


def held_by_others(job: Launch) -> dict[tuple[int, int], str]:
    """``(node rank, accelerator) -> job`` of what other jobs' leases hold on the job's
    nodes, in the plan's ids; empty for a job that does not share its cluster."""
    lease = job.reservation.lease
    if lease is None:
        return {}
    ranks = {n.node_id: n.rank for n in job.cluster.nodes}
    mine = getattr(lease, "job", None)
    held = {
        (ranks[r.node_id], r.accelerator): r.job
        for r in lease_table(job.cluster)["leases"]
        if r.job != mine and r.node_id in ranks
    }
    return in_plan_ids(held, job.gpu_map)


def plan_view(job: Launch, view: str = "map") -> str:
    """The job's plan as core's ``map``, ``svg`` or ``html`` view, other jobs' GPUs
    greyed out with their names.

    Raises:
        ArgumentError: an unknown view.
    """
    if view not in VIEWS:
        raise ArgumentError(f"view: expected one of {list(VIEWS)}, got {view!r}")
    held = held_by_others(job)
    if view == "svg":
        return render_svg(job.plan, held_by=held)
    if view == "html":
        return render_html(job.plan, held_by=held)
    return render_map(job.plan, held_by=held)
