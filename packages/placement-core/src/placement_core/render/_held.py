"""Accelerators held by other jobs, greyed out in the plan views with the job's name.

On a cluster shared by several jobs, a job's plan covers the accelerators it was given;
the others on its nodes belong to other jobs. The views take them as ``held_by``:
``(node rank, accelerator index) -> job name``. A held accelerator is drawn in its
index's place on the node's row (added to the row when the plan's inventory leaves it
out, as a plan made on the free accelerators does), greyed out, labelled with the job
and listed in the legend. It must not be one the plan uses.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from placement_core._errors import PlacementRuleError
from placement_core._scalars import is_int
from placement_core._shown import shown

if TYPE_CHECKING:
    from placement_core._inventory import Accelerator, Node
    from placement_core._plan import Plan

__all__ = ["HELD", "HeldBy", "HeldCell", "held_cells", "held_per_node"]

#: The text map's mark of an accelerator held by another job: ``#<job>``.
HELD = "#"

#: ``(node rank, accelerator index) -> the name of the job holding it``.
HeldBy = Mapping[tuple[int, int], str]


@dataclass(frozen=True, slots=True)
class HeldCell:
    """One cell of a node's row: its accelerator index, the plan's record of it (None
    when the plan's inventory leaves it out) and the job holding it (None: the plan's)."""

    index: int
    accelerator: Accelerator | None
    job: str | None


def held_per_node(plan: Plan, held_by: HeldBy | None) -> dict[int, dict[int, str]]:
    """``held_by`` checked and grouped: node rank -> accelerator index -> job.

    Raises:
        PlacementRuleError: a key that is not ``(node rank, index)`` of the plan, a job
            name that is not a non-empty string, or an accelerator the plan uses.
    """
    if held_by is None:
        return {}
    if not isinstance(held_by, Mapping):
        raise PlacementRuleError(
            f"expected (node rank, accelerator index) -> job name, got {shown(held_by)}",
            path="held_by",
        )
    count = plan.inventory.num_nodes
    occupancy = plan.occupancy()
    out: dict[int, dict[int, str]] = {}
    for key, job in held_by.items():
        if (
            not isinstance(key, tuple)
            or len(key) != 2
            or not all(is_int(k) for k in key)
            or not 0 <= key[0] < count
            or key[1] < 0
        ):
            raise PlacementRuleError(
                f"expected keys (node rank 0-{count - 1}, accelerator index >= 0), got "
                f"{shown(key)}",
                path="held_by",
            )
        if not isinstance(job, str) or not job.strip():
            raise PlacementRuleError(
                f"expected a job name for {key}, got {shown(job)}", path="held_by"
            )
        if occupancy[key[0]].accelerators.get(key[1]):
            raise PlacementRuleError(
                f"node {key[0]} accelerator {key[1]} runs this plan's processes; it cannot "
                f"be held by job {job!r} as well",
                path="held_by",
            )
        out.setdefault(key[0], {})[key[1]] = job
    return out


def held_cells(node: Node, held: Mapping[int, str]) -> list[HeldCell]:
    """The cells of a node's row in index order: its accelerators and those held."""
    records = {a.index: a for a in node.accelerators}
    return [
        HeldCell(index, records.get(index), held.get(index))
        for index in sorted(records.keys() | held.keys())
    ]
