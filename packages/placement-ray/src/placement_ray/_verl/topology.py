"""verl's ``topology:`` section (RFC verl#7269) read into pools, a role mapping and spares.

The section this reads::

    clusters:
      - {name: default, nnodes: 3, n_gpus_per_node: 8}
    device_pools:
      - {name: train_pool, cluster: default, nnodes: 2, n_gpus_per_node: 8}
      - name: spare_pool
        cluster: default
        nnodes: 1
        n_gpus_per_node: 8
        attributes: {standby: true, protects: [train_pool]}
        nodes: [2]            # optional: which nodes (ranks); else the last ones that fit
    models:
      - {name: actor, worker: actor, resource_pool: train_pool}

A pool without ``standby`` becomes ``resource_pool_spec[name] = [n_gpus_per_node] *
nnodes``; a standby pool becomes spare nodes: reserved whole, used by no pool. Each model
maps its ``worker`` (verl's role as text: ``actor``, ``rollout``, ``critic``, ``ref``, ...)
and its ``name`` to its pool.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from placement_ray.errors import ArgumentError

__all__ = ["Topology", "read_topology", "spare_ranks"]

_KEYS = {
    "topology": {"clusters", "device_pools", "models"},
    "clusters": {"name", "nnodes", "n_gpus_per_node"},
    "device_pools": {"name", "cluster", "nnodes", "n_gpus_per_node", "attributes", "nodes"},
    "models": {"name", "worker", "config_key", "resource_pool"},
    "attributes": {"standby", "fault_tolerant", "protects"},
}


@dataclass(frozen=True, slots=True)
class SparePool:
    """A standby pool: ``nnodes`` nodes of ``n_gpus_per_node`` (or the ``nodes`` named)."""

    name: str
    nnodes: int
    n_gpus_per_node: int
    nodes: tuple[int, ...] | None


@dataclass(frozen=True, slots=True)
class Topology:
    """What a ``topology:`` section asks for.

    Attributes:
        resource_pool_spec: verl's pool name -> processes per node.
        mapping: A model's ``worker`` and ``name`` -> its pool.
        spares: The standby pools.
        cluster_nodes: The nodes the section's clusters declare, in all.
    """

    resource_pool_spec: dict[str, list[int]]
    mapping: dict[str, str]
    spares: tuple[SparePool, ...]
    cluster_nodes: int


def _mapping(value: object, path: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise ArgumentError(f"{path}: expected a mapping, got {value!r}")
    allowed = _KEYS[path.rsplit(".", 1)[-1].split("[")[0]]
    unknown = sorted(set(value) - allowed)
    if unknown:
        raise ArgumentError(f"{path}: unknown keys {unknown}; expected some of {sorted(allowed)}")
    return value


def _list(value: object, path: str) -> Sequence[Any]:
    if value is None:
        return ()
    if isinstance(value, str | bytes) or not isinstance(value, Sequence):
        raise ArgumentError(f"{path}: expected a list, got {value!r}")
    return value


def _int(entry: Mapping[str, Any], key: str, path: str, low: int = 1) -> int:
    value = entry.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ArgumentError(f"{path}.{key}: expected an int >= {low}, got {value!r}")
    return value


def _name(entry: Mapping[str, Any], key: str, path: str) -> str:
    value = entry.get(key)
    if not isinstance(value, str) or not value.strip():
        raise ArgumentError(f"{path}.{key}: expected a non-empty name, got {value!r}")
    return value


def _named(entries: Sequence[Any], kind: str) -> dict[str, Mapping[str, Any]]:
    out: dict[str, Mapping[str, Any]] = {}
    for i, raw in enumerate(entries):
        path = f"topology.{kind}[{i}]"
        entry = _mapping(raw, path)
        name = _name(entry, "name", path)
        if name in out:
            raise ArgumentError(f"{path}.name: {name!r} is declared twice")
        out[name] = entry
    return out


def read_topology(section: object) -> Topology:
    """Read verl's ``topology:`` section (a mapping, as YAML gives it).

    Raises:
        ArgumentError: an unknown key, a missing or malformed value, a pool naming an
            unknown cluster, a model or ``protects`` naming an unknown pool, pools that
            ask for more nodes or GPUs per node than their cluster declares.
    """
    top = _mapping(section, "topology")
    clusters = _named(_list(top.get("clusters"), "topology.clusters"), "clusters")
    pools = _named(_list(top.get("device_pools"), "topology.device_pools"), "device_pools")
    if not pools:
        raise ArgumentError("topology.device_pools: expected at least one pool, got none")
    sizes = {
        name: (
            _int(c, "nnodes", f"topology.clusters[{name}]"),
            _int(c, "n_gpus_per_node", f"topology.clusters[{name}]"),
        )
        for name, c in clusters.items()
    }
    spec: dict[str, list[int]] = {}
    spares: list[SparePool] = []
    used: dict[str, int] = dict.fromkeys(sizes, 0)
    for name, pool in pools.items():
        path = f"topology.device_pools[{name}]"
        cluster = pool.get("cluster", "default")
        if cluster not in sizes:
            raise ArgumentError(
                f"{path}.cluster: unknown cluster {cluster!r}; declared: {sorted(sizes)}"
            )
        nnodes, per_node = _int(pool, "nnodes", path), _int(pool, "n_gpus_per_node", path)
        if per_node > sizes[cluster][1]:
            raise ArgumentError(
                f"{path}.n_gpus_per_node: {per_node} is more than cluster {cluster!r}'s "
                f"n_gpus_per_node {sizes[cluster][1]}"
            )
        used[cluster] += nnodes
        attributes = _mapping(pool.get("attributes") or {}, f"{path}.attributes")
        for protected in _list(attributes.get("protects"), f"{path}.attributes.protects"):
            if protected not in pools:
                raise ArgumentError(
                    f"{path}.attributes.protects: unknown pool {protected!r}; declared: "
                    f"{sorted(pools)}"
                )
        nodes = _nodes(pool.get("nodes"), nnodes, f"{path}.nodes")
        if attributes.get("standby"):
            spares.append(SparePool(name, nnodes, per_node, nodes))
        elif nodes is not None:
            raise ArgumentError(
                f"{path}.nodes: only a standby pool names its nodes; verl's pools are "
                f"placed in node order (got {list(nodes)})"
            )
        else:
            spec[name] = [per_node] * nnodes
    for cluster, count in used.items():
        if count > sizes[cluster][0]:
            raise ArgumentError(
                f"topology.clusters[{cluster}].nnodes: its pools take {count} nodes, the "
                f"cluster declares {sizes[cluster][0]}"
            )
    mapping = _models(top.get("models"), pools, spares)
    return Topology(spec, mapping, tuple(spares), sum(n for n, _ in sizes.values()))


def _nodes(value: object, nnodes: int, path: str) -> tuple[int, ...] | None:
    if value is None:
        return None
    ranks = _list(value, path)
    bad = [r for r in ranks if isinstance(r, bool) or not isinstance(r, int) or r < 0]
    if bad or len(ranks) != nnodes or len(set(ranks)) != len(ranks):
        raise ArgumentError(
            f"{path}: expected {nnodes} distinct node ranks (ints >= 0), got {value!r}"
        )
    return tuple(ranks)


def _models(value: object, pools: Mapping[str, Any], spares: Sequence[SparePool]) -> dict[str, str]:
    standby = {s.name for s in spares}
    mapping: dict[str, str] = {}
    for i, raw in enumerate(_list(value, "topology.models")):
        path = f"topology.models[{i}]"
        model = _mapping(raw, path)
        pool = _name(model, "resource_pool", path)
        if pool not in pools:
            raise ArgumentError(
                f"{path}.resource_pool: unknown pool {pool!r}; declared: {sorted(pools)}"
            )
        if pool in standby:
            raise ArgumentError(
                f"{path}.resource_pool: {pool!r} is a standby pool (spare nodes); a model "
                "runs on a pool without standby"
            )
        mapping[_name(model, "name", path)] = pool
        if "worker" in model:
            mapping[_name(model, "worker", path)] = pool
    return mapping


def spare_ranks(
    spares: Sequence[SparePool], gpus: Sequence[int], num_nodes: int
) -> tuple[int, ...]:
    """The spare nodes: those each standby pool names, else the last nodes (in node
    order) with at least its ``n_gpus_per_node`` accelerators.

    Args:
        spares: The standby pools.
        gpus: Each node's accelerators, by rank.
        num_nodes: The cluster's nodes.

    Raises:
        ArgumentError: a named node the cluster lacks or too small, or too few nodes.
    """
    taken: list[int] = []
    for spare in spares:
        path = f"topology.device_pools[{spare.name}]"
        if spare.nodes is not None:
            unknown = [r for r in spare.nodes if r >= num_nodes]
            if unknown:
                raise ArgumentError(
                    f"{path}.nodes: unknown nodes {unknown}; the cluster has nodes "
                    f"0-{num_nodes - 1}"
                )
            small = [r for r in spare.nodes if gpus[r] < spare.n_gpus_per_node]
            if small:
                raise ArgumentError(
                    f"{path}.nodes: node {small[0]} has {gpus[small[0]]} accelerators, the "
                    f"pool's n_gpus_per_node is {spare.n_gpus_per_node}"
                )
            taken.extend(r for r in spare.nodes if r not in taken)
            continue
        fit = [
            r
            for r in reversed(range(num_nodes))
            if r not in taken and gpus[r] >= spare.n_gpus_per_node
        ][: spare.nnodes]
        if len(fit) < spare.nnodes:
            raise ArgumentError(
                f"{path}.nnodes: {spare.nnodes} spare nodes of {spare.n_gpus_per_node} "
                f"accelerators asked, the cluster has {len(fit)} such nodes left"
            )
        taken.extend(fit)
    return tuple(sorted(taken))
