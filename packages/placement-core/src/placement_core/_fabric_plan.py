"""Fabric health in the plan: degraded domains, ``cluster.fabric_health``, their messages.

See docs/concepts/nvlink-domains.md#fabric-health. A node with a degraded GPU
(:mod:`placement_core._fabric`) makes its NVLink domain degraded (a node without a domain
is a domain of its own). ``nvlink_group`` rules with ``placement: all`` leave degraded
domains free when a healthy domain holds a group
(:func:`placement_core._nvlink.domain_packed_rule`). Whatever still lands on a degraded
node is refused, warned about or ignored, as ``cluster.fabric_health`` says (default:
``refuse`` when any rule has ``nvlink_group``, else ``warn``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from ._config import ClusterConfig
from ._errors import PlacementRuleError
from ._fabric import GpuHealth, degraded_nodes
from ._inventory import Inventory
from ._nvlink import domain_key
from ._ranks import format_rank_list
from ._records import Placement, node_runs

__all__ = ["FabricHealth", "fabric_health", "fabric_policy"]

_NODES_SHOWN = 3


def fabric_policy(config: ClusterConfig) -> str:
    """The ``fabric_health`` in force: as set, else ``refuse`` with an ``nvlink_group``
    rule and ``warn`` without one."""
    if config.fabric_health is not None:
        return config.fabric_health
    grouped = any(rule.nvlink_group is not None for rule in config.component_placement.values())
    return "refuse" if grouped else "warn"


@dataclass(frozen=True, slots=True)
class FabricHealth:
    """The degraded nodes and domains of an inventory.

    Attributes:
        nodes: Node rank -> what is degraded there.
        domains: Domain key (:func:`~placement_core._nvlink.domain_key`) -> its degraded
            nodes, ascending.
    """

    nodes: Mapping[int, GpuHealth] = field(default_factory=dict)
    domains: Mapping[str | int, tuple[int, ...]] = field(default_factory=dict)

    def describe_domain(self, key: str | int) -> str:
        """``node 3 GPUs 0-1: degraded bandwidth`` for the domain's first degraded nodes."""
        ranks = self.domains[key]
        shown = "; ".join(self.nodes[r].describe() for r in ranks[:_NODES_SHOWN])
        more = len(ranks) - _NODES_SHOWN
        return shown + (f"; and {more} more degraded node(s)" if more > 0 else "")


def fabric_health(inventory: Inventory) -> FabricHealth:
    """The inventory's degraded nodes and the domains they make degraded."""
    nodes = degraded_nodes(inventory.nodes)
    if not nodes:
        return FabricHealth()
    domains: dict[str | int, list[int]] = {}
    for rank in sorted(nodes):
        domains.setdefault(domain_key(inventory.nodes[rank]), []).append(rank)
    return FabricHealth(nodes, {key: tuple(ranks) for key, ranks in domains.items()})


def check_fabric_health(
    health: FabricHealth,
    policy: str,
    placements: Sequence[Placement],
    *,
    names: str,
    path: str,
) -> str | None:
    """Refuse or describe a component's processes on degraded nodes.

    Returns:
        The warning (``warn``), or None (``ignore``, or no process on a degraded node).

    Raises:
        PlacementRuleError: ``refuse`` and some process is on a degraded node; the
            message names the nodes, their GPUs and the decoded health fields.
    """
    if not health.nodes or policy == "ignore":
        return None
    degraded = health.nodes
    hit = sorted({node for node, _ in node_runs(placements)} & degraded.keys())
    if not hit:
        return None
    detail = "; ".join(degraded[r].describe() for r in hit[:_NODES_SHOWN])
    if len(hit) > _NODES_SHOWN:
        detail += f"; and {len(hit) - _NODES_SHOWN} more"
    where = f"node{'s' if len(hit) > 1 else ''} {format_rank_list(hit)}"
    if policy == "refuse":
        raise PlacementRuleError(
            f"{names} would run on {where}, whose NVLink fabric is degraded ({detail}): "
            "NCCL over a degraded fabric fails at scale; place it on healthy nodes, or set "
            "cluster.fabric_health: warn to plan there anyway",
            path=path,
        )
    return f"{names} runs on {where}, whose NVLink fabric is degraded ({detail})"
