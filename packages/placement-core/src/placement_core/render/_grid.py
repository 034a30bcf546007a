"""The node x accelerator grid the map, SVG and HTML views draw: labels and folding.

Consecutive nodes whose rows look the same (the same components on the same devices,
rank numbers aside) are folded: only the first and last of such a run are drawn, with a
:class:`Fold` between them naming the nodes left out.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from placement_core._inventory import Node
from placement_core._ranks import format_rank_list

from ._text import HardwareNumbers, node_kind, node_tag

if TYPE_CHECKING:
    from placement_core._plan import NodeOccupancy, Plan

__all__ = [
    "CROSSING",
    "Fold",
    "Folded",
    "component_codes",
    "device_name",
    "fold_nodes",
    "node_shape",
    "occupants_label",
]


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


#: Marks processes whose accelerators meet only across sockets (link ``SYS``).
CROSSING = "!"


def occupants_label(
    occupants: Iterable[tuple[str, int]],
    codes: dict[str, str],
    marked: frozenset[tuple[str, int]] = frozenset(),
) -> str:
    """``ac0-1+r0``: each component's code and rank list, joined by ``+``; empty if none.

    A component's ranks get a ``!`` when one of them is in ``marked``.
    """
    by_component: dict[str, list[int]] = {}
    for component, rank in occupants:
        by_component.setdefault(component, []).append(rank)
    return "+".join(
        codes[component]
        + format_rank_list(sorted(ranks))
        + (CROSSING if marked and any((component, r) in marked for r in ranks) else "")
        for component, ranks in by_component.items()
    )


def device_name(kind: str, index: int, node_rank: int, numbers: HardwareNumbers) -> str:
    """``Franka #1``: a hardware device by its number in its node group, as rules count it."""
    return f"{kind} #{numbers[node_rank, kind.casefold(), index]}"


def node_shape(plan: Plan, node: Node, occupancy: NodeOccupancy) -> tuple[object, ...]:
    """What a node's row looks like, ignoring the rank numbers.

    Per device, the components on it and the node-local devices (and link) of each one's
    first process there, so a process spanning two accelerators never folds with two
    processes on one accelerator each, nor one across sockets with one that is not.
    """
    components = plan.components

    def devices(occupants: Iterable[tuple[str, int]]) -> tuple[tuple[str, object], ...]:
        first: dict[str, object] = {}
        for component, rank in occupants:
            if component not in first:
                process = components[component][rank]
                first[component] = (process.hardware_ranks, process.link)
        return tuple(first.items())

    cells = tuple(devices(occupancy.accelerators.get(a.index, ())) for a in node.accelerators)
    hardware = tuple(
        (key, devices(occupants)) for key, occupants in sorted(occupancy.hardware.items())
    )
    node_level = tuple(dict.fromkeys(c for c, _ in occupancy.node))
    return node_kind(node) + node_tag(plan, node.rank), cells, hardware, node_level


@dataclass(frozen=True, slots=True)
class Fold:
    """Nodes ``first..last`` (inclusive) are left out: they look like the rows around them."""

    first: int
    last: int

    @property
    def which(self) -> str:
        """``node 1`` or ``nodes 1-6``."""
        if self.first == self.last:
            return f"node {self.first}"
        return f"nodes {self.first}-{self.last}"

    @property
    def text(self) -> str:
        """``nodes 1-6: same layout, ranks continue`` (``node 1`` for one)."""
        return f"{self.which}: same layout, ranks continue"


@dataclass(frozen=True, slots=True)
class Folded:
    """The rows to draw.

    Attributes:
        items: Node ranks to draw, in order, with a :class:`Fold` where nodes are left out.
        not_shown: How many nodes at the end were cut off by ``max_nodes``.
    """

    items: tuple[int | Fold, ...]
    not_shown: int


def fold_nodes(
    plan: Plan,
    *,
    max_nodes: int | None = None,
    held: Mapping[int, Mapping[int, str]] | None = None,
) -> Folded:
    """Fold runs of three or more consecutive same-looking nodes into first, fold, last.

    Args:
        plan: The plan.
        max_nodes: Most node rows to draw (folds not counted); None draws every row.
        held: Node rank -> accelerator index -> the other job holding it (rows held
            differently never fold together).
    """
    nodes = plan.inventory.nodes
    occupancy = plan.occupancy()
    limit = len(nodes) if max_nodes is None else max_nodes
    shapes: dict[int, tuple[object, ...]] = {}

    def shape(rank: int) -> tuple[object, ...]:
        if rank not in shapes:
            # The domain too: a fold never joins nodes of two NVLink domains.
            shapes[rank] = (
                *node_shape(plan, nodes[rank], occupancy[rank]),
                nodes[rank].nvlink_domain,
                tuple(sorted((held or {}).get(rank, {}).items())),
            )
        return shapes[rank]

    items: list[int | Fold] = []
    shown = 0
    i = 0
    while i < len(nodes) and shown < limit:
        end = i
        while end + 1 < len(nodes) and shape(end + 1) == shape(i):
            end += 1
        items.append(i)
        shown += 1
        if end > i and shown < limit:
            if end - i >= 2:
                items.append(Fold(i + 1, end - 1))
            items.append(end)
            shown += 1
        else:
            end = i
        i = end + 1
    return Folded(tuple(items), len(nodes) - i)
