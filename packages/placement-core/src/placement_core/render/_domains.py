"""NVLink domains in the pictures: one band per stretch of nodes in one domain.

See docs/concepts/nvlink-domains.md. The map, SVG and HTML views draw a band line before
the first node of each stretch of consecutive nodes that share a domain; folds never
join nodes of two domains (:func:`placement_core.render._grid.fold_nodes`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from placement_core._inventory import Node
from placement_core._ranks import format_rank_list

if TYPE_CHECKING:
    from placement_core._plan import Plan

__all__ = ["domain_bands", "renumbered_note"]

_MOVED_SHOWN = 8


def domain_bands(plan: Plan) -> dict[int, str]:
    """Per node rank that starts a stretch of one domain, the band's text.

    Empty when no node has a domain. Nodes without a domain next to each other share
    one band (each is still a domain of its own).
    """
    nodes = plan.inventory.nodes
    if all(node.nvlink_domain is None for node in nodes):
        return {}
    members: dict[str | None, list[int]] = {}
    for node in nodes:
        members.setdefault(node.nvlink_domain, []).append(node.rank)
    bands: dict[int, str] = {}
    start = 0
    for rank in range(1, len(nodes) + 1):
        if rank < len(nodes) and nodes[rank].nvlink_domain == nodes[start].nvlink_domain:
            continue
        domain = nodes[start].nvlink_domain
        stretch = format_rank_list(range(start, rank))
        noun = "node" if rank - start == 1 else "nodes"
        if domain is None:
            bands[start] = f"no NVLink domain: {noun} {stretch} (each a domain of its own)"
        else:
            elsewhere = [r for r in members[domain] if not start <= r < rank]
            more = (
                f" (the domain also has nodes {format_rank_list(elsewhere)})" if elsewhere else ""
            )
            bands[start] = f"NVLink domain {domain}: {noun} {stretch}{more}"
        start = rank
    return bands


def renumbered_note(plan: Plan) -> str | None:
    """Which nodes ``node_order: nvlink_domain`` renumbered, by node id; None if none.

    Runs of nodes that moved together are written once: ``9-17 are node-18..node-26``.
    """
    if plan.config.node_order != "nvlink_domain":
        return None
    moved = [node for node in plan.inventory.nodes if node.node_id != f"node-{node.rank}"]
    if not moved:
        return None
    runs: list[list[Node]] = []
    for node in moved:
        if runs and _follows(runs[-1][-1], node):
            runs[-1].append(node)
        else:
            runs.append([node])
    parts = [
        f"{run[0].rank} is {run[0].node_id}"
        if len(run) == 1
        else f"{run[0].rank}-{run[-1].rank} are {run[0].node_id}..{run[-1].node_id}"
        for run in runs
    ]
    shown = ", ".join(parts[:_MOVED_SHOWN])
    if len(parts) > _MOVED_SHOWN:
        shown += f", and {len(parts) - _MOVED_SHOWN} more"
    return f"nodes numbered by NVLink domain (cluster.node_order: nvlink_domain): {shown}"


def _follows(previous: Node, node: Node) -> bool:
    """Whether ``node`` continues ``previous``'s run: next rank and next ``node-<n>`` id."""
    number = previous.node_id.removeprefix("node-")
    return (
        node.rank == previous.rank + 1
        and number.isdigit()
        and node.node_id == f"node-{int(number) + 1}"
    )
