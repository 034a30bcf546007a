"""Node loss under a running job: who is affected, and no placement group left spinning.

When a node dies Ray moves its bundles elsewhere if it can; if it cannot, the group sits
in ``RESCHEDULING`` forever with the GCS busy-looping on it. ``check_health`` reports the
affected bundles / workers (role, rank, node, GPUs) and removes groups still
``RESCHEDULING`` after a short grace period.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from ray.util.placement_group import PlacementGroup, placement_group_table, remove_placement_group

from ._placement_groups import OrderedPlacementGroup
from .errors import NodeLostError

if TYPE_CHECKING:
    from ._cluster import Cluster

__all__ = ["HealthReport", "Occupant", "check_health", "occupants"]

logger = logging.getLogger(__name__)


class BundleSlice(Protocol):
    """Some ordered bundles of one placement group (e.g. a slime role's ``RoleBundles``)."""

    @property
    def pg(self) -> PlacementGroup: ...
    @property
    def bundle_indices(self) -> tuple[int, ...]: ...
    @property
    def node_ranks(self) -> tuple[int, ...]: ...
    @property
    def node_ids(self) -> tuple[str, ...]: ...
    @property
    def gpu_ids(self) -> tuple[int, ...]: ...


@dataclass(frozen=True, slots=True)
class Occupant:
    """One bundle or worker and where it runs.

    Attributes:
        role: The component / role name (``actor``, ``rollout``, ...).
        rank: Its rank within the role.
        node_rank: Rank of its node.
        node_id: Ray node id of its node.
        gpu_ids: Physical GPU indices it uses on that node.
        bundle_index: Its placement-group bundle, if any.
    """

    role: str
    rank: int
    node_rank: int
    node_id: str
    gpu_ids: tuple[int, ...] = ()
    bundle_index: int | None = None

    def describe(self) -> str:
        """``actor rank 3 on node 1 (GPUs [3], bundle 11)``."""
        bundle = "" if self.bundle_index is None else f", bundle {self.bundle_index}"
        return (
            f"{self.role} rank {self.rank} on node {self.node_rank} "
            f"(GPUs {list(self.gpu_ids)}{bundle})"
        )


def occupants(role: str, bundles: BundleSlice | OrderedPlacementGroup) -> list[Occupant]:
    """One ``Occupant`` per ordered bundle: rank r is the r-th bundle."""
    if isinstance(bundles, OrderedPlacementGroup):
        return [
            Occupant(role, r, s.node_rank, s.node_id, s.gpu_ids, s.index)
            for r, s in enumerate(bundles.slots)
        ]
    return [
        Occupant(role, r, node_rank, node_id, () if gpu < 0 else (gpu,), index)
        for r, (index, node_rank, node_id, gpu) in enumerate(
            zip(
                bundles.bundle_indices,
                bundles.node_ranks,
                bundles.node_ids,
                bundles.gpu_ids,
                strict=True,
            )
        )
    ]


@dataclass(frozen=True, slots=True)
class HealthReport:
    """Result of ``check_health``.

    Attributes:
        dead_nodes: ``(node rank, node id)`` of each of the job's nodes that is not alive.
        affected: The given occupants that were on those nodes.
        removed_groups: Hex ids of placement groups removed because they stayed
            ``RESCHEDULING``.
    """

    dead_nodes: tuple[tuple[int, str], ...]
    affected: tuple[Occupant, ...]
    removed_groups: tuple[str, ...]

    @property
    def ok(self) -> bool:
        """Whether every node is alive and nothing was removed."""
        return not self.dead_nodes and not self.removed_groups

    def describe(self) -> str:
        """A multi-line account fit for an error message or a log."""
        if self.ok:
            return "all nodes alive"
        lines = [f"lost node {rank} ({node_id})" for rank, node_id in self.dead_nodes]
        lines += [f"  affected: {o.describe()}" for o in self.affected]
        lines += [
            f"removed placement group {g}: it stayed RESCHEDULING (no capacity left to move "
            "its bundles)"
            for g in self.removed_groups
        ]
        return "\n".join(lines)


def _as_pg(group: PlacementGroup | OrderedPlacementGroup | BundleSlice) -> PlacementGroup:
    return group if isinstance(group, PlacementGroup) else group.pg


def check_health(
    cluster: Cluster,
    workers: Iterable[Occupant] = (),
    groups: Iterable[PlacementGroup | OrderedPlacementGroup | BundleSlice] = (),
    *,
    grace_s: float = 5.0,
    poll_s: float = 0.2,
    raise_on_loss: bool = True,
    nodes: Iterable[int] | None = None,
) -> HealthReport:
    """Check the job's nodes and placement groups; remove groups stuck rescheduling.

    Args:
        cluster: The job's cluster view.
        workers: Bundles / workers to report on if their node is gone (see ``occupants``).
        groups: Placement groups to watch.
        grace_s: How long a group may stay ``RESCHEDULING`` (Ray moving bundles to spare
            capacity) before it is removed.
        poll_s: Seconds between state checks during the grace period.
        raise_on_loss: Raise ``NodeLostError`` when a node is lost or a group removed.
        nodes: The node ranks to check (default: every node of the job's view).

    Returns:
        The report (when nothing is wrong, or ``raise_on_loss`` is False).

    Raises:
        NodeLostError: with the dead nodes and every affected occupant by rank, node and
            GPUs.
    """
    alive = cluster.alive_node_ids()
    watched = None if nodes is None else set(nodes)
    dead = tuple(
        (n.rank, n.node_id)
        for n in cluster.nodes
        if n.node_id not in alive and (watched is None or n.rank in watched)
    )
    dead_ids = {node_id for _, node_id in dead}
    affected = tuple(w for w in workers if w.node_id in dead_ids)
    pending = {pg.id.hex(): pg for pg in map(_as_pg, groups)}
    removed: list[str] = []
    deadline = time.monotonic() + grace_s
    while pending:
        stuck = {
            key: pg
            for key, pg in pending.items()
            if placement_group_table(pg).get("state") == "RESCHEDULING"
        }
        if not stuck or time.monotonic() >= deadline:
            for key, pg in stuck.items():
                logger.warning("removing placement group %s: stuck RESCHEDULING", key)
                remove_placement_group(pg)
                removed.append(key)
            break
        pending = stuck
        time.sleep(poll_s)
    report = HealthReport(dead_nodes=dead, affected=affected, removed_groups=tuple(removed))
    if raise_on_loss and not report.ok:
        raise NodeLostError(
            (
                f"{len(dead)} of the job's {cluster.num_nodes} nodes are lost:\n"
                if dead
                else "placement groups could not be kept after a node failure:\n"
            )
            + report.describe(),
            dead_nodes=dead,
            affected=[
                {
                    "role": o.role,
                    "rank": o.rank,
                    "bundle_index": o.bundle_index,
                    "node_rank": o.node_rank,
                    "node_id": o.node_id,
                    "gpu_ids": o.gpu_ids,
                }
                for o in affected
            ],
        )
    return report
