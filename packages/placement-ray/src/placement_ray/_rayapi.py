"""The few Ray state queries placement-ray needs, in one place (some are not public API)."""

from __future__ import annotations

from typing import Any

import ray

__all__ = [
    "HEAD_RESOURCE",
    "alive_nodes",
    "all_nodes",
    "available_per_node",
    "head_node_id",
    "schedulable_resources",
    "shown_resources",
]

HEAD_RESOURCE = "node:__internal_head__"


def all_nodes() -> list[dict[str, Any]]:
    """Ray's node table: every node that ever joined, dead ones included."""
    nodes: list[dict[str, Any]] = ray.nodes()  # type: ignore[no-untyped-call]
    return nodes


def alive_nodes() -> list[dict[str, Any]]:
    """Ray's node table, live nodes only."""
    return [n for n in all_nodes() if n.get("Alive")]


def head_node_id() -> str:
    """The Ray node id of the head node: what identifies a Ray cluster across processes."""
    for node in all_nodes():
        if HEAD_RESOURCE in (node.get("Resources") or {}):
            return str(node["NodeID"])
    return ""


def available_per_node() -> dict[str, dict[str, float]]:
    """Available resources of each live node, by node id."""
    from ray._private import state  # no public per-node equivalent in Ray 2.47-2.60

    read = state.available_resources_per_node
    per_node: dict[str, dict[str, float]] = read()  # type: ignore[no-untyped-call]
    return {k: dict(v) for k, v in per_node.items()}


def schedulable_resources(resources: dict[str, float]) -> dict[str, float]:
    """A node's resources without Ray's placement-group shadow entries."""
    return {k: v for k, v in resources.items() if "_group_" not in k and k != "bundle"}


def shown_resources(resources: dict[str, float]) -> dict[str, float]:
    """The resources worth printing: no shadows, ``node:<ip>`` markers or memory bytes."""
    return {
        k: v
        for k, v in schedulable_resources(resources).items()
        if not k.startswith("node:") and k not in ("memory", "object_store_memory")
    }
