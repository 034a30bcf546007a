"""Discover every node of a Ray cluster by running the native snapshot ON that node.

One tiny task per node, pinned with hard node affinity (``soft=False``), takes the node's
placement-native snapshot (see docs/concepts/node-snapshot.md) and reads the node-rank variables
from the node's environment. Nodes that offer nothing to schedule on and carry no node
rank (a Ray head started with ``--num-cpus 0``) are left out, each named in a log line
(``_job_nodes``); the rest, ordered by ``order.order_nodes``, become core's ``Inventory``.

Where the snapshot lists no accelerators (NVML found none: not NVIDIA, or a simulated
node), the node's accelerators are typed from Ray's own view of it: an ``NPU`` resource
is Ascend, ``HPU`` is Gaudi (any registered type's own resource names that type: core's
``RAY_RESOURCES``), and ``GPU`` takes its vendor from the node's accelerator type (the
``accelerator_type:<name>`` resource or the ``ray.io/accelerator-type`` label): AMD and
Intel names are recognised, anything else is NVIDIA.
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Mapping, Sequence
from typing import Any

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from placement_core import (
    RAY_RESOURCES,
    Accelerator,
    Inventory,
    InventoryError,
    Node,
    node_from_snapshot,
    registered_accelerators,
)
from placement_native import NODE_RANK_ENVS

from ._domain_label import check_domain_label
from ._job_nodes import job_nodes, left_out_line
from ._node_order import NodeFacts, order_nodes
from ._rayapi import alive_nodes
from .errors import ClusterError

__all__ = [
    "ACCELERATOR_TYPE_LABEL",
    "accelerators_from_ray",
    "accelerators_from_snapshot",
    "build_inventory",
    "discover_inventory",
    "discover_nodes",
    "node_report",
]

logger = logging.getLogger(__name__)

ACCELERATOR_TYPE_LABEL = "ray.io/accelerator-type"
"""Label Ray puts on a node with the type of its accelerators (``H100``, ``Ascend910B``)."""

_ACCELERATOR_TYPE_RESOURCE = "accelerator_type:"


def _resource_types() -> list[tuple[str, str]]:
    """Every accelerator resource other than ``GPU`` and the type it means (NPU: ascend)."""
    types: dict[str, str] = {}
    for kind in registered_accelerators():  # sorted: the first type of a resource wins
        types.setdefault(RAY_RESOURCES[kind], kind)
    return sorted((resource, kind) for resource, kind in types.items() if resource != "GPU")


def node_report() -> dict[str, Any]:
    """What one node says about itself; runs inside the node's probe task.

    Returns:
        ``{"hostname", "env", "snapshot", "snapshot_error"}``: the native snapshot as a dict
        (docs/concepts/node-snapshot.md; None where placement-native is missing or failed, with the
        reason).
    """
    snapshot: dict[str, Any] | None = None
    error: str | None = None
    try:
        import placement_native

        snapshot = placement_native.snapshot().to_dict()
    except Exception as exc:  # a node without native or NVML still joins, without facts
        error = f"{type(exc).__name__}: {exc}"
    return {
        "hostname": socket.gethostname(),
        "env": {k: os.environ[k] for k in NODE_RANK_ENVS if k in os.environ},
        "snapshot": snapshot,
        "snapshot_error": error,
    }


_node_report_task = ray.remote(num_cpus=0, max_retries=0)(node_report)


def discover_nodes(
    node_ids: Sequence[str] | None = None, *, timeout_s: float = 120.0
) -> list[NodeFacts]:
    """Run ``node_report`` on every given node (all live nodes by default), concurrently.

    Args:
        node_ids: Ray node ids to discover; None means every live node.
        timeout_s: How long to wait for all reports.

    Returns:
        One ``NodeFacts`` per node, in the order of ``node_ids`` (or Ray's node table).

    Raises:
        ClusterError: a node is not alive, or did not report within ``timeout_s``.
    """
    alive = {n["NodeID"]: n for n in alive_nodes()}
    wanted = list(alive) if node_ids is None else list(node_ids)
    dead = [n for n in wanted if n not in alive]
    if dead:
        raise ClusterError(f"cannot discover nodes that are not alive: {', '.join(dead)}")
    refs = [
        _node_report_task.options(
            scheduling_strategy=NodeAffinitySchedulingStrategy(node_id=node_id, soft=False),
            name=f"placement-node-report-{node_id[:8]}",
        ).remote()
        for node_id in wanted
    ]
    _, pending = ray.wait(refs, num_returns=len(refs), timeout=timeout_s)
    if pending:
        late = [wanted[i] for i, ref in enumerate(refs) if ref in set(pending)]
        for ref in pending:
            ray.cancel(ref, force=True)
        raise ClusterError(
            f"{len(late)} of {len(wanted)} nodes did not report within {timeout_s:g}s: "
            f"{', '.join(late)} (is the node overloaded, or is its Python environment broken?)"
        )
    driver = ray.get_runtime_context().get_node_id()
    facts = []
    for node_id, report in zip(wanted, ray.get(refs), strict=True):
        info = alive[node_id]
        if report["snapshot_error"]:
            logger.debug("node %s has no snapshot: %s", node_id, report["snapshot_error"])
        facts.append(
            NodeFacts(
                node_id=node_id,
                ip=str(info.get("NodeManagerAddress", "")),
                hostname=str(report["hostname"] or info.get("NodeManagerHostname", "")),
                labels=dict(info.get("Labels") or {}),
                env=dict(report["env"]),
                resources=dict(info.get("Resources") or {}),
                snapshot=report["snapshot"],
                is_driver=node_id == driver,
            )
        )
    return facts


def _ray_model(resources: Mapping[str, float], labels: Mapping[str, str]) -> str | None:
    names = sorted(
        key[len(_ACCELERATOR_TYPE_RESOURCE) :]
        for key in resources
        if key.startswith(_ACCELERATOR_TYPE_RESOURCE)
    )
    if names:
        return names[0]
    label = labels.get(ACCELERATOR_TYPE_LABEL)
    return str(label) if label else None


def _gpu_vendor(model: str | None) -> str:
    """The vendor of a Ray ``GPU`` from its accelerator type name."""
    name = (model or "").upper()
    if name.startswith(("AMD", "MI1", "MI2", "MI3", "MI4")):
        return "amd"
    if name.startswith("INTEL"):
        return "intel"
    return "nvidia"


def accelerators_from_ray(
    resources: Mapping[str, float], labels: Mapping[str, str] | None = None
) -> tuple[Accelerator, ...]:
    """A node's accelerators as Ray sees them, typed by vendor.

    Args:
        resources: The node's total resources (``Resources`` in ``ray.nodes()``).
        labels: The node's labels.

    Returns:
        ``int(NPU)`` ``ascend`` accelerators, else ``int(HPU)`` ``gaudi`` ones, else
        ``int(GPU)`` of the vendor its accelerator type names (``amd`` for
        ``AMD-Instinct-MI300X-OAM`` or ``MI300X``, ``intel`` for ``Intel-GPU-Max-1550``,
        else ``nvidia``); the model is that type name where Ray knows it. Empty for a
        node without any of them.
    """
    model = _ray_model(resources, labels or {})
    for resource, kind in _resource_types():
        count = int(float(resources.get(resource, 0.0)))
        if count > 0:
            return tuple(Accelerator(index=i, type=kind, model=model) for i in range(count))
    count = int(float(resources.get("GPU", 0.0)))
    kind = _gpu_vendor(model)
    return tuple(Accelerator(index=i, type=kind, model=model) for i in range(count))


def accelerators_from_snapshot(
    snapshot: Mapping[str, Any] | None,
    resources: Mapping[str, float] | None = None,
    labels: Mapping[str, str] | None = None,
    *,
    rank: int = 0,
) -> tuple[Accelerator, ...]:
    """A node's accelerators: from its snapshot, else from Ray's view of the node.

    The snapshot is read by placement-core's reader (``node_from_snapshot``), so a live
    inventory and one built offline from the same snapshot files agree.

    Args:
        snapshot: The node's snapshot (docs/concepts/node-snapshot.md), or None.
        resources: The node's total resources in Ray.
        labels: The node's labels in Ray.
        rank: The node's rank, for error messages.

    Returns:
        The snapshot's accelerators when it lists any; otherwise
        ``accelerators_from_ray(resources, labels)`` (an NVML-less or simulated node).

    Raises:
        InventoryError: the snapshot is malformed.
    """
    return _from_snapshot(snapshot, resources or {}, labels, rank)[0]


def _from_snapshot(
    snapshot: Mapping[str, Any] | None,
    resources: Mapping[str, float],
    labels: Mapping[str, str] | None,
    rank: int,
) -> tuple[tuple[Accelerator, ...], tuple[tuple[int, int, str], ...], str | None]:
    """The node's accelerators (each with its NVLink fabric), their pairwise links and the
    node's NVLink domain (no links and no domain without a snapshot)."""
    if snapshot and snapshot.get("accelerators"):
        node = node_from_snapshot(dict(snapshot), rank=rank)
        return node.accelerators, node.links, node.nvlink_domain
    return accelerators_from_ray(resources, labels), (), None


def build_inventory(ordered: Sequence[NodeFacts]) -> Inventory:
    """Core's inventory from nodes already in rank order (``Node.node_id`` = Ray node id).

    Raises:
        InventoryError: a node's snapshot is malformed (naming the node).
    """
    nodes = []
    for rank, facts in enumerate(ordered):
        ray_gpus = float(facts.resources.get("GPU", 0.0))
        try:
            accelerators, links, domain = _from_snapshot(
                facts.snapshot, facts.resources, facts.labels, rank
            )
        except InventoryError as error:
            raise InventoryError(
                f"the snapshot taken on node {rank} ({facts.node_id}) is malformed: {error.reason}",
                path=error.path,
            ) from None
        check_domain_label(rank, facts.node_id, facts.labels, domain)
        if (
            facts.snapshot
            and facts.snapshot.get("accelerators")
            and len(accelerators) != int(ray_gpus)
        ):
            logger.warning(
                "node %d (%s): NVML sees %d GPUs but Ray manages %g; Ray can only reserve "
                "the ones it manages",
                rank,
                facts.node_id,
                len(accelerators),
                ray_gpus,
            )
        snapshot_cpus = (facts.snapshot or {}).get("cpus")
        cpus = int(snapshot_cpus) if snapshot_cpus else int(facts.resources.get("CPU", 0))
        nodes.append(
            Node(
                rank=rank,
                node_id=facts.node_id,
                hostname=facts.hostname or None,
                ip=facts.ip or None,
                cpus=cpus,
                accelerators=accelerators,
                links=links,
                nvlink_domain=domain,
                host_memory_bytes=_host_memory(facts.snapshot),
            )
        )
    return Inventory(tuple(nodes))


def _host_memory(snapshot: Mapping[str, Any] | None) -> int | None:
    """The node's RAM from its snapshot (the memory check holds host use against it)."""
    value = (snapshot or {}).get("host_memory_bytes")
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def discover_inventory(
    node_ids: Sequence[str] | None = None, *, timeout_s: float = 120.0
) -> tuple[Inventory, list[NodeFacts], list[str]]:
    """Discover, leave out the nodes that are not the job's, order and build:
    ``(inventory, facts in rank order, warnings)``.

    Raises:
        ClusterError: a node did not report, or no node is the job's (every one offers
            nothing to schedule on and has no node rank).
    """
    found = discover_nodes(node_ids, timeout_s=timeout_s)
    kept, left_out = job_nodes(found)
    for node in left_out:
        logger.info("%s", left_out_line(node))
    if not kept:
        raise ClusterError(
            f"none of the {len(found)} live nodes is a node of the job: "
            + "; ".join(left_out_line(node) for node in left_out[:3])
            + ("; ..." if len(left_out) > 3 else "")
            + ". Start nodes with CPUs or accelerators, or give a node a rank"
        )
    ordered, warnings = order_nodes(kept)
    for warning in warnings:
        logger.warning("%s", warning)
    return build_inventory(ordered), ordered, warnings
