"""Slurm's topology/block configuration from node snapshots: one block per NVLink domain.

``placement slurm-topology node*.json`` writes what Slurm's topology/block plugin reads,
so that a job asking for whole blocks (``sbatch --segment=N``) lands in whole NVLink
domains:

- ``topology.yaml`` (Slurm 25.05 and later)::

      - topology: nvlink
        cluster_default: true
        block:
          blocks:
            - block: nvl0
              nodes: gb200-01,gb200-02

- ``topology.conf`` lines (Slurm 23.11 to 24.11)::

      BlockName=nvl0 Nodes=gb200-01,gb200-02

A node's Slurm name is its snapshot's short host name (up to the first dot); its domain
is the one core reads from the snapshot's fabric (see docs/concepts/nvlink-domains.md).
Nodes without a domain belong to no block and are named in a comment.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Literal

from ._errors import InventoryError
from ._sources import SnapshotSource, node_from_snapshot

TopologyFormat = Literal["yaml", "conf"]


@dataclasses.dataclass(frozen=True, slots=True)
class Block:
    """One NVLink domain as a Slurm block: its name, its domain and its nodes' names."""

    name: str
    domain: str
    nodes: tuple[str, ...]


def slurm_blocks(snapshots: Sequence[SnapshotSource]) -> tuple[list[Block], list[str]]:
    """The blocks of the snapshots' NVLink domains, and the nodes that have no domain.

    Blocks are numbered ``nvl0``, ``nvl1``, ... in the order their first node comes.

    Raises:
        InventoryError: A snapshot is malformed, or two snapshots name the same host.
    """
    by_domain: dict[str, list[str]] = {}
    alone: list[str] = []
    seen: dict[str, int] = {}
    for position, source in enumerate(snapshots):
        node = node_from_snapshot(source, rank=position, accept_partial=True)
        name = (node.hostname or "").split(".", 1)[0]
        if not name:
            raise InventoryError(
                f"snapshot #{position} has no hostname: Slurm's blocks name nodes by it",
                path=f"{source}: hostname" if isinstance(source, str) else "hostname",
            )
        if name in seen:
            raise InventoryError(
                f"snapshots #{seen[name]} and #{position} are both of host {name!r}: "
                "expected one snapshot per node",
                path="inventory",
            )
        seen[name] = position
        if node.nvlink_domain is None:
            alone.append(name)
        else:
            by_domain.setdefault(node.nvlink_domain, []).append(name)
    blocks = [
        Block(f"nvl{i}", domain, tuple(names))
        for i, (domain, names) in enumerate(by_domain.items())
    ]
    return blocks, alone


def render_slurm_topology(
    snapshots: Sequence[SnapshotSource], fmt: TopologyFormat = "yaml", name: str = "nvlink"
) -> str:
    """Slurm's topology/block configuration for the snapshots' nodes (module docstring)."""
    blocks, alone = slurm_blocks(snapshots)
    if not blocks:
        raise InventoryError(
            "no snapshot reports an NVLink domain (a completed fabric registration): "
            "there is no block to write",
            path="inventory",
        )
    lines = [f"# Written by placement slurm-topology: one block per NVLink domain ({name})."]
    if alone:
        lines.append(f"# Nodes without an NVLink domain, in no block: {','.join(alone)}")
    if fmt == "conf":
        for block in blocks:
            lines += [
                f"# domain {block.domain}",
                f"BlockName={block.name} Nodes={','.join(block.nodes)}",
            ]
        return "\n".join(lines) + "\n"
    lines += [f"- topology: {name}", "  cluster_default: true", "  block:", "    blocks:"]
    for block in blocks:
        lines += [
            f"      # domain {block.domain}",
            f"      - block: {block.name}",
            f"        nodes: {','.join(block.nodes)}",
        ]
    return "\n".join(lines) + "\n"
