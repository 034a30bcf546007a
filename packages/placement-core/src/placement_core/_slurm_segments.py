"""Slurm segments of whole NVLink domains: the size to submit with, and a job's check.

See docs/concepts/nvlink-domains.md#bringing-up-a-cluster-with-domains. With Slurm's
topology/block plugin configured one block per domain (``placement slurm-topology``),
``sbatch --segment=N`` makes a job's allocation of segments of N nodes, each inside one
block (Slurm 24.05 and later; a job of N nodes or fewer lies in one block anyway):

- ``placement slurm-topology --segment SNAPSHOT...`` prints N, the nodes of a domain
  (the smallest domain's, when they differ, so that every domain holds a segment);
- ``placement slurm-topology --check-segment N SNAPSHOT...``, on the snapshots of one
  job's nodes, checks that Slurm kept it to whole segments: each domain holds a multiple
  of N of the job's nodes (all of them, for a job of N nodes or fewer), and no node
  without a domain is in it unless N is 1.
"""

from __future__ import annotations

from collections.abc import Sequence

from ._errors import InventoryError
from ._slurm_topology import Block, slurm_blocks
from ._sources import SnapshotSource, node_from_snapshot

__all__ = ["check_segments", "segment_size"]

_SHOWN = 6


def segment_size(snapshots: Sequence[SnapshotSource]) -> tuple[int, str | None]:
    """The nodes per NVLink domain, and a note naming the sizes when domains differ.

    Raises:
        InventoryError: No snapshot has a domain, or a snapshot is malformed.
    """
    blocks, _ = slurm_blocks(snapshots)
    if not blocks:
        raise InventoryError(
            "no snapshot reports an NVLink domain (a completed fabric registration): there "
            "is no domain size to make segments of",
            path="inventory",
        )
    sizes = sorted({len(block.nodes) for block in blocks})
    if len(sizes) == 1:
        return sizes[0], None
    counts = ", ".join(
        f"{sum(len(b.nodes) == size for b in blocks)} of {size} nodes" for size in sizes
    )
    return sizes[0], (
        f"the domains differ in size ({counts}): the smallest is the segment, so that "
        "every domain holds one"
    )


def check_segments(snapshots: Sequence[SnapshotSource], segment: int) -> str:
    """Check that a job's nodes are whole segments of ``segment`` nodes, each segment in
    one NVLink domain; the line that says so.

    Raises:
        InventoryError: ``segment`` is below 1, or the nodes are split across domains
            (the message names each domain, its node count and the nodes without one).
    """
    if segment < 1:
        raise InventoryError(
            f"segment {segment} is not a node count: expected 1 or more nodes per segment",
            path="segment",
        )
    by_domain: dict[str, list[str]] = {}
    alone: list[str] = []
    for position, source in enumerate(snapshots):
        node = node_from_snapshot(source, rank=position, accept_partial=True)
        # Names for the message only: nodes of a test cluster may share one host.
        name = (node.hostname or "").split(".", 1)[0] or f"snapshot #{position}"
        if node.nvlink_domain is None:
            alone.append(name)
        else:
            by_domain.setdefault(node.nvlink_domain, []).append(name)
    blocks = [Block(f"nvl{i}", d, tuple(names)) for i, (d, names) in enumerate(by_domain.items())]
    total = len(snapshots)
    whole = min(segment, total)
    split = [block for block in blocks if len(block.nodes) % whole]
    outside = alone if whole > 1 else []
    if not split and not outside:
        shares = ", ".join(f"{len(b.nodes)} in domain {b.domain}" for b in blocks[:_SHOWN])
        more = f" and {len(blocks) - _SHOWN} more domains" if len(blocks) > _SHOWN else ""
        return f"the job's {total} node(s) are {total // whole} whole segment(s) of {whole}" + (
            f": {shares}{more}" if blocks else ""
        )
    parts = [
        f"domain {b.domain}: {len(b.nodes)} node(s) ({_names(b.nodes)})" for b in split[:_SHOWN]
    ]
    if len(split) > _SHOWN:
        parts.append(f"and {len(split) - _SHOWN} more domains")
    if outside:
        parts.append(f"no NVLink domain: {_names(outside)}")
    raise InventoryError(
        f"the job's {total} nodes are not whole segments of {whole} node(s) in one NVLink "
        f"domain each ({'; '.join(parts)}): Slurm split the job across domains. Is "
        "TopologyPlugin=topology/block configured with the blocks of `placement "
        f"slurm-topology`, and was the job submitted with sbatch --segment={segment}?",
        path="segment",
    )


def _names(nodes: Sequence[str]) -> str:
    shown = ",".join(nodes[:_SHOWN])
    return shown + (f" and {len(nodes) - _SHOWN} more" if len(nodes) > _SHOWN else "")
