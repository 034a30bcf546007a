"""Where a node's NVLink domain comes from: its fabric, the config, or both.

See docs/concepts/nvlink-domains.md#where-a-nodes-domain-comes-from. The rule:

1. **The fabric decides which nodes share a domain.** A node whose GPUs all report a
   completed, successful registration with one fabric (a non-zero cluster UUID and one
   clique) is in the domain ``<cluster_uuid>/<clique_id>``.
2. **A fabric that reports but names no single domain gives none**, and the config's
   ``nvlink_domain`` is not used for that node either (a warning says both): GPUs still
   registering or failed, GPUs in two cliques (the tray is planned as a domain of its own,
   the warning lists each clique's GPUs), some GPUs reporting a fabric and others none.
3. **The config names a domain the fabric agrees with.** Where the inventory entries'
   ``nvlink_domain`` group the nodes exactly as the fabric does, the config's names are
   used (``rack-a`` rather than a UUID). Where they disagree, the fabric's domains are
   used and a warning names the config's domain, the fabric's and the nodes.
4. **Without a fabric** (no GPU reports one, or all report the all-zero cluster UUID of a
   GPU outside any rack), the config's ``nvlink_domain`` is the node's domain.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ._fabric import zero_uuid
from ._inventory import Accelerator, Node
from ._ranks import format_rank_list

__all__ = ["FabricDomain", "fabric_domain", "merge_domains"]


@dataclass(frozen=True, slots=True)
class FabricDomain:
    """What a node's fabric says about its domain.

    Attributes:
        domain: The domain, or None.
        reported: Whether any GPU reports a fabric (then the config's domain is not
            used without the fabric's agreement).
        why: Why a reporting fabric gives no domain.
    """

    domain: str | None
    reported: bool
    why: str | None = None


def _in_fabric(accelerator: Accelerator) -> bool:
    fabric = accelerator.fabric
    # The all-zero cluster UUID of a GPU outside any rack names no domain.
    return fabric is not None and not (
        zero_uuid(fabric.cluster_uuid) and fabric.state in ("completed", "not_supported")
    )


def fabric_domain(accelerators: Sequence[Accelerator]) -> FabricDomain:
    """The domain a node's GPUs' fabric names (rules 1, 2 and 4 of the module)."""
    reporting = [a for a in accelerators if _in_fabric(a)]
    if not reporting:
        return FabricDomain(None, False)
    silent = [a.index for a in accelerators if not _in_fabric(a)]
    if silent:
        return FabricDomain(
            None, True, f"accelerator(s) {format_rank_list(silent)} report no NVLink fabric"
        )
    waiting = [a for a in reporting if not a.fabric.registered]  # type: ignore[union-attr]
    if waiting:
        why = "; ".join(
            f"accelerator {a.index} is not registered with its NVLink fabric (state "
            f"{a.fabric.state}, status {a.fabric.status})"  # type: ignore[union-attr]
            for a in waiting
        )
        return FabricDomain(None, True, why)
    cliques: dict[str, list[int]] = {}
    for a in reporting:
        cliques.setdefault(a.fabric.domain, []).append(a.index)  # type: ignore[union-attr]
    if len(cliques) > 1:
        parts = ", ".join(
            f"accelerator{'s' if len(indices) > 1 else ''} {format_rank_list(indices)} in {domain}"
            for domain, indices in sorted(cliques.items())
        )
        return FabricDomain(
            None,
            True,
            f"the fabric puts its accelerators in {len(cliques)} NVLink domains ({parts}); "
            "no group may span it and another node",
        )
    return FabricDomain(next(iter(cliques)), True)


def merge_domains(
    nodes: Sequence[Node],
    fabric: Mapping[int, FabricDomain],
    declared: Mapping[int, str],
) -> tuple[list[Node], list[str]]:
    """Each node's domain from its fabric and the config's ``inventory:`` entries.

    Args:
        nodes: The nodes, their ``nvlink_domain`` not yet set from the config.
        fabric: Node rank -> what its snapshot's fabric says (nodes with snapshots).
        declared: Node rank -> the domain its inventory entry declares.

    Returns:
        The nodes with their domains, and a warning per disagreement.
    """
    warnings: list[str] = []
    by_declared: dict[str, dict[str, list[int]]] = {}
    by_fabric: dict[str, set[str]] = {}
    for rank, name in sorted(declared.items()):
        found = fabric.get(rank)
        if found is None or not found.reported:
            continue
        if found.domain is None:
            warnings.append(
                f"node {rank}: the inventory entry's nvlink_domain {name} is not used: the "
                f"node's NVLink fabric reports but names no domain ({found.why})"
            )
            continue
        by_declared.setdefault(name, {}).setdefault(found.domain, []).append(rank)
        by_fabric.setdefault(found.domain, set()).add(name)
    renamed: dict[str, str] = {}
    for name, domains in by_declared.items():
        if len(domains) == 1 and len(by_fabric[next(iter(domains))]) == 1:
            renamed[next(iter(domains))] = name
            continue
        where = "; ".join(
            f"node{'s' if len(ranks) > 1 else ''} {format_rank_list(ranks)} in {domain}"
            for domain, ranks in domains.items()
        )
        shared = sorted({other for d in domains for other in by_fabric[d]} - {name})
        also = f" (with nodes declared in {', '.join(shared)})" if shared else ""
        warnings.append(
            f"inventory nvlink_domain {name} disagrees with the NVLink fabric, which puts "
            f"{where}{also}: the fabric's domains are used"
        )
    out = []
    for node in nodes:
        found = fabric.get(node.rank)
        if found is not None and found.reported:
            domain = None if found.domain is None else renamed.get(found.domain, found.domain)
        else:
            domain = declared.get(node.rank, node.nvlink_domain)
        if domain != node.nvlink_domain:
            node = dataclasses.replace(node, nvlink_domain=domain)
        out.append(node)
    return out, warnings
