"""Node order of a live cluster, as a pure function of what each node reported.

See docs/concepts/node-order.md.

Explicit ranks win: a ``node-rank`` label (given at ``ray start --labels``), else
``PLACEMENT_NODE_RANK`` or ``RLINF_NODE_RANK`` in the node's environment. Either every node
has one or none does; the values must be exactly ``0..n-1``. Without explicit ranks the
driver's node comes first, then the rest by IP as numbers, natural hostname and Ray node id.
Nodes that share an IP keep distinct ranks (they are told apart by node id) and a warning
says so.
"""

from __future__ import annotations

import ipaddress
import re
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from placement_native import NODE_RANK_ENVS

from .errors import NodeOrderError

__all__ = [
    "NODE_RANK_LABEL",
    "NodeFacts",
    "explicit_rank",
    "ip_sort_key",
    "natural_key",
    "order_nodes",
]

NODE_RANK_LABEL = "node-rank"
"""Ray node label that fixes a node's rank (``ray start --labels='{"node-rank": "3"}'``)."""


@dataclass(frozen=True, slots=True)
class NodeFacts:
    """What is known about one live Ray node before it has a rank.

    Attributes:
        node_id: Ray node id (hex).
        ip: The node's IP as Ray reports it.
        hostname: The node's hostname.
        labels: The node's Ray labels.
        env: The node-rank variables (``NODE_RANK_ENVS``) found in the node's environment.
        resources: The node's total Ray resources.
        snapshot: The placement-native snapshot taken on the node (see
            docs/concepts/node-snapshot.md), or None.
        is_driver: Whether the driver process runs on this node.
    """

    node_id: str
    ip: str
    hostname: str = ""
    labels: Mapping[str, str] = field(default_factory=dict)
    env: Mapping[str, str] = field(default_factory=dict)
    resources: Mapping[str, float] = field(default_factory=dict)
    snapshot: Mapping[str, Any] | None = None
    is_driver: bool = False


def _parse_rank(value: str, source: str, node: NodeFacts) -> int:
    text = value.strip()
    # ASCII only: str.isdigit() also accepts "²", which int() then rejects.
    if not (text.isascii() and text.isdigit()):
        raise NodeOrderError(
            f"node {node.node_id} ({node.ip}): {source} must be an int >= 0, got {value!r}"
        )
    return int(text)


def explicit_rank(node: NodeFacts) -> int | None:
    """The rank a node was given explicitly (label or env var), or None.

    Raises:
        NodeOrderError: a value is not an int >= 0, or two sources disagree.
    """
    found: dict[str, int] = {}
    if NODE_RANK_LABEL in node.labels:
        found[f"label {NODE_RANK_LABEL!r}"] = _parse_rank(
            node.labels[NODE_RANK_LABEL], f"label {NODE_RANK_LABEL!r}", node
        )
    for var in NODE_RANK_ENVS:
        if var in node.env:
            found[var] = _parse_rank(node.env[var], var, node)
    if len(set(found.values())) > 1:
        shown = ", ".join(f"{k}={v}" for k, v in found.items())
        raise NodeOrderError(f"node {node.node_id} ({node.ip}) has conflicting ranks: {shown}")
    return next(iter(found.values()), None)


def ip_sort_key(ip: str) -> tuple[int, int, str]:
    """Sort key for an IP: IPv4 by octets, then IPv6 by value, then anything else by text."""
    try:
        address = ipaddress.ip_address(ip.strip().strip("[]"))
    except ValueError:
        return (99, 0, ip)
    return (address.version, int(address), "")


def natural_key(text: str) -> tuple[tuple[str, int], ...]:
    """Natural-order key: ``node9 < node10``; ties broken by the exact text."""
    parts = re.split(r"(\d+)", text)
    key = tuple((p.casefold(), 0) if i % 2 == 0 else ("", int(p)) for i, p in enumerate(parts))
    return (*key, (text, 0))


def order_nodes(nodes: Sequence[NodeFacts]) -> tuple[list[NodeFacts], list[str]]:
    """Order nodes by rank.

    See docs/concepts/node-order.md.

    Args:
        nodes: Every live node, in any order.

    Returns:
        The nodes in rank order (index = node rank) and warnings (shared IPs).

    Raises:
        NodeOrderError: some nodes have explicit ranks and others not, or the explicit
            ranks repeat or are not exactly ``0..n-1``.
    """
    ranks = {n.node_id: explicit_rank(n) for n in nodes}
    given = {k: v for k, v in ranks.items() if v is not None}
    if given and len(given) != len(nodes):
        missing = sorted(f"{n.node_id} ({n.ip})" for n in nodes if ranks[n.node_id] is None)
        raise NodeOrderError(
            f"{len(given)} of {len(nodes)} nodes have a rank (label {NODE_RANK_LABEL!r} or "
            f"{' / '.join(NODE_RANK_ENVS)}) and {len(missing)} have none: "
            f"{', '.join(missing)}; give every node a rank or none"
        )
    if given:
        by_rank: dict[int, list[str]] = defaultdict(list)
        for node_id, rank in given.items():
            by_rank[rank].append(node_id)
        repeats = {r: ids for r, ids in by_rank.items() if len(ids) > 1}
        if repeats:
            shown = "; ".join(f"rank {r}: {', '.join(sorted(ids))}" for r, ids in repeats.items())
            raise NodeOrderError(f"node ranks repeat: {shown}")
        if sorted(by_rank) != list(range(len(nodes))):
            raise NodeOrderError(
                f"node ranks must be exactly 0..{len(nodes) - 1} for {len(nodes)} nodes, "
                f"got {sorted(by_rank)}"
            )
        ordered = sorted(nodes, key=lambda n: given[n.node_id])
    else:
        ordered = sorted(
            nodes,
            key=lambda n: (
                not n.is_driver,
                ip_sort_key(n.ip),
                natural_key(n.hostname),
                n.node_id,
            ),
        )
    return ordered, _shared_ip_warnings(ordered)


def _shared_ip_warnings(ordered: Sequence[NodeFacts]) -> list[str]:
    by_ip: dict[str, list[int]] = defaultdict(list)
    for rank, node in enumerate(ordered):
        by_ip[node.ip].append(rank)
    return [
        f"nodes {', '.join(map(str, ranks))} share IP {ip}: they are told apart by Ray node "
        "id, never by IP, and their GPUs are not interleaved"
        for ip, ranks in by_ip.items()
        if len(ranks) > 1
    ]
