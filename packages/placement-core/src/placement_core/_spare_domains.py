"""Spares by NVLink domain: ``spare_nodes: {rack-a: 1, rack-b: 2}``.

See docs/concepts/nvlink-domains.md#spares-by-domain. Each named domain keeps that many
of its last nodes (in the plan's node order, after ``node_order``) as spares, so that a
lost node of the domain has a spare in its own domain. The config holds the counts; the
plan's config holds the node ranks they resolve to.
"""

from __future__ import annotations

from ._config import ClusterConfig
from ._errors import PlacementRuleError
from ._inventory import Inventory
from ._problems import did_you_mean
from ._ranks import format_rank_list

__all__ = ["resolve_spare_domains"]

_DOMAINS_SHOWN = 8


def resolve_spare_domains(config: ClusterConfig, inventory: Inventory) -> ClusterConfig:
    """The config with ``spare_nodes`` given per domain resolved to node ranks.

    A config whose ``spare_nodes`` is a rank list is returned as it is.

    Raises:
        PlacementRuleError: A named domain no node belongs to (the message lists the
            domains there are), or a count larger than the domain.
    """
    counts = config.spare_domains
    if not counts:
        return config
    members: dict[str, list[int]] = {}
    for node in inventory.nodes:
        if node.nvlink_domain is not None:
            members.setdefault(node.nvlink_domain, []).append(node.rank)
    ranks: list[int] = []
    for domain, count in counts.items():
        nodes = members.get(domain)
        path = f"cluster.spare_nodes.{domain}"
        if nodes is None:
            known = list(members)
            listed = ", ".join(known[:_DOMAINS_SHOWN]) + (
                ", ..." if len(known) > _DOMAINS_SHOWN else ""
            )
            raise PlacementRuleError(
                f"no node is in NVLink domain {domain!r}: the inventory's domains are "
                f"{listed or 'none (no node has a domain)'}{did_you_mean(domain, known)}",
                path=path,
            )
        if count > len(nodes):
            raise PlacementRuleError(
                f"{count} spare(s) of NVLink domain {domain!r}, which has "
                f"{len(nodes)} node(s) ({format_rank_list(nodes)}): keep at most "
                f"{len(nodes)} as spares",
                path=path,
            )
        ranks += nodes[-count:]
    return config.model_copy(update={"spare_input": tuple(sorted(ranks))})
