"""Pre-flight feasibility of a placement group against per-node totals.

Ray never raises for a placement group it can never place: it waits, and cannot tell
"never" from "not yet". This module answers "never" before the group is created, from the
nodes' *total* resources (what is free now does not matter: other work may finish). It is
exact for single bundles, pins, STRICT_PACK, STRICT_SPREAD and totals; whether PACK /
SPREAD bundles can be bin-packed is left to Ray and the creation timeout.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Collection, Mapping, Sequence

from placement_core import RAY_RESOURCES

from .errors import ArgumentError, InfeasiblePlacementGroupError

__all__ = ["STRATEGIES", "check_feasible", "format_resources", "validate_bundles"]

STRATEGIES = ("PACK", "SPREAD", "STRICT_PACK", "STRICT_SPREAD")


_BYTE_RESOURCES = frozenset({"memory", "object_store_memory"})


def format_resources(resources: Mapping[str, float]) -> str:
    """``{GPU: 1, CPU: 0.5, memory: 16.3 GiB}``: accelerators (GPU, NPU, ...) first, then CPU,
    integers without a fraction."""
    devices = set(RAY_RESOURCES.values())
    keys = sorted(resources, key=lambda k: (k not in devices, k != "CPU", k))
    shown = ", ".join(
        f"{k}: {resources[k] / 2**30:.1f} GiB" if k in _BYTE_RESOURCES else f"{k}: {resources[k]:g}"
        for k in keys
    )
    return "{" + shown + "}"


def validate_bundles(
    bundles: Sequence[Mapping[str, float]],
    strategy: str,
    pins: Sequence[int | None] | None,
    num_nodes: int,
) -> list[dict[str, float]]:
    """Check the shape of a placement-group request; return the bundles as plain dicts.

    Raises:
        ArgumentError: naming the bad argument, its value and what is expected.
    """
    if strategy not in STRATEGIES:
        raise ArgumentError(f"strategy: expected one of {', '.join(STRATEGIES)}, got {strategy!r}")
    if isinstance(bundles, Mapping) or not isinstance(bundles, Sequence) or not bundles:
        raise ArgumentError(f"bundles: expected a non-empty list of mappings, got {bundles!r}")
    clean = []
    for i, bundle in enumerate(bundles):
        if not isinstance(bundle, Mapping) or not bundle:
            raise ArgumentError(f"bundles[{i}]: expected a non-empty mapping, got {bundle!r}")
        for key, value in bundle.items():
            if (
                not isinstance(key, str)
                or isinstance(value, bool)
                or not isinstance(value, int | float)
                or not math.isfinite(value)
                or value < 0
            ):
                raise ArgumentError(
                    f"bundles[{i}][{key!r}]: expected a resource name and a number >= 0, "
                    f"got {value!r}"
                )
        if not any(bundle.values()):
            raise ArgumentError(f"bundles[{i}]: asks for nothing ({dict(bundle)!r})")
        clean.append({k: float(v) for k, v in bundle.items()})
    if pins is not None:
        if isinstance(pins, str | Mapping) or not isinstance(pins, Sequence):
            raise ArgumentError(
                f"pin_to: expected a list of node ranks (or None) per bundle, got {pins!r}"
            )
        if len(pins) != len(bundles):
            raise ArgumentError(
                f"pin_to: expected one node rank (or None) per bundle, {len(bundles)} in all, "
                f"got {len(pins)}"
            )
        for i, rank in enumerate(pins):
            if rank is not None and (
                isinstance(rank, bool) or not isinstance(rank, int) or not 0 <= rank < num_nodes
            ):
                raise ArgumentError(
                    f"pin_to[{i}]: expected a node rank in 0..{num_nodes - 1} or None, got {rank!r}"
                )
    return clean


def _fits(bundle: Mapping[str, float], node: Mapping[str, float]) -> bool:
    return all(amount <= node.get(key, 0.0) + 1e-9 for key, amount in bundle.items())


def _total(bundles: Sequence[Mapping[str, float]]) -> dict[str, float]:
    total: dict[str, float] = defaultdict(float)
    for bundle in bundles:
        for key, amount in bundle.items():
            total[key] += amount
    return dict(total)


def check_feasible(
    bundles: Sequence[Mapping[str, float]],
    node_totals: Sequence[Mapping[str, float]],
    *,
    strategy: str = "PACK",
    pins: Sequence[int | None] | None = None,
    dead: Collection[int] = (),
) -> None:
    """Raise at once if the nodes (by rank) can never hold the placement group.

    Args:
        bundles: The bundles' resources.
        node_totals: Each node's total resources, index = node rank.
        strategy: One of ``STRATEGIES``.
        pins: Per bundle, the node rank it must land on, or None.
        dead: Ranks of nodes that are dead (they hold nothing, and are called dead).

    Raises:
        ArgumentError: a malformed request.
        InfeasiblePlacementGroupError: listing every reason, what was asked and what exists.
    """
    clean = validate_bundles(bundles, strategy, pins, len(node_totals))
    pins = list(pins) if pins is not None else [None] * len(clean)
    problems: list[str] = []
    nodes = [dict(n) for n in node_totals]
    for i, (bundle, pin) in enumerate(zip(clean, pins, strict=True)):
        if pin is not None:
            if pin in dead:
                problems.append(
                    f"bundle {i} {format_resources(bundle)} is pinned to node {pin}, which is "
                    "dead (lost from the cluster)"
                )
            elif not _fits(bundle, nodes[pin]):
                problems.append(
                    f"bundle {i} {format_resources(bundle)} is pinned to node {pin}, which has "
                    f"{format_resources(nodes[pin])} in total"
                )
        elif not any(_fits(bundle, n) for n in nodes):
            problems.append(f"bundle {i} {format_resources(bundle)} fits on no node")
    asked = _total(clean)
    have = _total(nodes)
    for key, amount in sorted(asked.items()):
        if amount > have.get(key, 0.0) + 1e-9:
            problems.append(
                f"the group asks for {key} {amount:g} in total, the cluster has "
                f"{have.get(key, 0.0):g}"
            )
    by_node: dict[int, list[dict[str, float]]] = defaultdict(list)
    for bundle, pin in zip(clean, pins, strict=True):
        if pin is not None:
            by_node[pin].append(bundle)
    for rank, pinned in sorted(by_node.items()):
        need = _total(pinned)
        if len(pinned) > 1 and rank not in dead and not _fits(need, nodes[rank]):
            problems.append(
                f"{len(pinned)} bundles pinned to node {rank} need {format_resources(need)}, "
                f"it has {format_resources(nodes[rank])} in total"
            )
    if strategy == "STRICT_PACK":
        if len(by_node) > 1:
            problems.append(
                f"STRICT_PACK keeps all bundles on one node, but pins name nodes {sorted(by_node)}"
            )
        elif not any(_fits(asked, n) for n in nodes):
            problems.append(
                f"STRICT_PACK needs one node with {format_resources(asked)}; no node has that "
                "much in total"
            )
    if strategy == "STRICT_SPREAD":
        if len(clean) > len(nodes):
            problems.append(
                f"STRICT_SPREAD puts each of the {len(clean)} bundles on its own node, the "
                f"cluster has {len(nodes)} nodes"
            )
        repeated = sorted(r for r, pinned in by_node.items() if len(pinned) > 1)
        if repeated:
            problems.append(
                f"STRICT_SPREAD forbids two bundles on one node, pins repeat nodes {repeated}"
            )
    if problems:
        raise InfeasiblePlacementGroupError(
            "placement group can never be placed on this cluster:\n"
            + "\n".join(f"  - {p}" for p in problems)
            + f"\nasked: {len(clean)} bundles, strategy {strategy}, "
            f"{format_resources(asked)} in total\nnodes (total resources):\n"
            + "\n".join(
                f"  node {r}: " + ("dead" if r in dead else format_resources(n))
                for r, n in enumerate(nodes)
            ),
            problems=problems,
        )
