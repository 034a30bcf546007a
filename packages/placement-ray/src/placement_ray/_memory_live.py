"""The memory estimate of a launched plan beside each GPU's memory in use now.

``Launch.memory_report(memory)`` checks the plan against the job's ``memory:`` section
(placement-core's check, docs/concepts/will-it-fit.md) and takes a fresh node snapshot
on every node of the plan: NVML's used memory of each GPU, read on the node itself.
Each row puts the two side by side, so a job that uses more than estimated (or a GPU
someone else fills) shows before it runs out.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from placement_core import Headroom, MemoryReport, MemorySpec, Plan, check_memory

from ._discovery import discover_nodes

__all__ = ["GpuMemoryInUse", "MemoryInUse", "memory_in_use"]

_GiB = 1 << 30


@dataclass(frozen=True, slots=True)
class GpuMemoryInUse:
    """One GPU: the estimate of its busiest phase, and what it holds now.

    Attributes:
        node_rank: The node.
        accelerator: The plan's accelerator id on the node.
        physical: The physical GPU (NVML index) the launch holds for it.
        capacity_bytes: The GPU's memory.
        estimate_bytes: The estimate of its busiest phase.
        phase: That phase.
        used_bytes: The memory in use now (NVML), or None where the snapshot cannot say.
    """

    node_rank: int
    accelerator: int
    physical: int
    capacity_bytes: int
    estimate_bytes: int
    phase: str
    used_bytes: int | None

    @property
    def used_over_estimate(self) -> float | None:
        """``used / estimate``; None where either is unknown or the estimate is 0."""
        if self.used_bytes is None or not self.estimate_bytes:
            return None
        return self.used_bytes / self.estimate_bytes


@dataclass(frozen=True, slots=True)
class MemoryInUse:
    """The launch's memory estimate beside every GPU's use now.

    Attributes:
        report: The check of the plan (``report.fits`` is the verdict).
        gpus: One row per GPU of the plan any component with an entry uses, by node
            and accelerator.
    """

    report: MemoryReport
    gpus: tuple[GpuMemoryInUse, ...]

    def lines(self) -> Iterator[str]:
        """A table: node, GPU, estimate (phase), used now, capacity."""
        yield "NODE  GPU  ESTIMATE (PHASE)           USED NOW    CAPACITY"
        for row in self.gpus:
            used = "?" if row.used_bytes is None else f"{row.used_bytes / _GiB:.1f} GiB"
            estimate = f"{row.estimate_bytes / _GiB:.1f} GiB ({row.phase})"
            yield (
                f"{row.node_rank:<4}  {row.accelerator:<3}  {estimate:<25}  {used:<10}  "
                f"{row.capacity_bytes / _GiB:.1f} GiB"
            )


def _used(snapshot: Mapping[str, Any] | None) -> dict[int, int]:
    """Physical GPU index -> memory in use, from a snapshot dict."""
    used: dict[int, int] = {}
    for accelerator in (snapshot or {}).get("accelerators") or ():
        value = accelerator.get("memory_used_bytes")
        if isinstance(value, int) and isinstance(accelerator.get("index"), int):
            used[accelerator["index"]] = value
    return used


def memory_in_use(
    plan: Plan,
    memory: Mapping[str, Any] | MemorySpec,
    gpu_map: Mapping[tuple[int, int], int],
    *,
    headroom: Headroom | None = None,
    timeout_s: float = 120.0,
) -> MemoryInUse:
    """Check ``plan`` against ``memory`` and read every node's GPUs in use now.

    Args:
        plan: The launched plan.
        memory: The job's ``memory:`` section (or one :func:`~placement_core.load_memory`
            checked).
        gpu_map: ``(node rank, plan GPU id) -> physical GPU id`` the launch holds.
        headroom: A margin kept free on every GPU.
        timeout_s: Limit for the nodes' snapshots.

    Raises:
        ConfigError: The section breaks a rule.
        InventoryError: A GPU's capacity is unknown.
        ClusterError: A node did not report within ``timeout_s``.
    """
    report = check_memory(plan, memory, headroom=headroom)
    nodes: Sequence[int] = sorted({gpu.node_rank for gpu in report.gpus()})
    node_ids = [plan.inventory.nodes[rank].node_id for rank in nodes]
    facts = discover_nodes(node_ids, timeout_s=timeout_s)
    used = {rank: _used(fact.snapshot) for rank, fact in zip(nodes, facts, strict=True)}
    rows = []
    for gpu in report.gpus():
        physical = gpu_map.get((gpu.node_rank, gpu.accelerator), gpu.accelerator)
        peak = gpu.group.peak
        rows.append(
            GpuMemoryInUse(
                gpu.node_rank,
                gpu.accelerator,
                physical,
                gpu.group.capacity_bytes,
                peak.total_bytes,
                peak.name,
                used[gpu.node_rank].get(physical),
            )
        )
    return MemoryInUse(report, tuple(rows))
