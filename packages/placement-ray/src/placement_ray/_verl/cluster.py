"""What verl's pools need from the live cluster: each node's room, the bundle, spares."""

from __future__ import annotations

from collections.abc import Collection
from typing import TYPE_CHECKING

from placement_ray._placement_groups import node_totals
from placement_ray._slime.layout import layout_resource
from placement_ray.compat.slime import DEVICE_ACCELERATORS
from placement_ray.errors import ArgumentError

from .plan import NodeRoom

if TYPE_CHECKING:
    from placement_ray._cluster import Cluster

__all__ = ["node_gpus", "node_rooms", "pool_bundle", "pool_resource"]


def pool_resource(cluster: Cluster, device_name: object) -> str:
    """The Ray resource of a pool's bundles for verl's ``device_name`` (``cuda``, ``npu``,
    ...): ``cuda`` takes the cluster's one accelerator type."""
    if not isinstance(device_name, str):
        raise ArgumentError(f"device_name: expected a torch device name, got {device_name!r}")
    name = device_name.split(":")[0].lower()
    if name != "cuda" and name not in DEVICE_ACCELERATORS:
        raise ArgumentError(
            f"device_name: expected one of cuda, {', '.join(DEVICE_ACCELERATORS)}, "
            f"got {device_name!r}"
        )
    return layout_resource(cluster, DEVICE_ACCELERATORS.get(name))


def node_gpus(cluster: Cluster, resource: str) -> list[int]:
    """Whole ``resource`` accelerators of each node, by rank."""
    return [int(t.get(resource, 0.0) + 1e-9) for t in node_totals(cluster)]


def node_rooms(cluster: Cluster, resource: str, spares: Collection[int] = ()) -> list[NodeRoom]:
    """Each node but the spares: its accelerators of ``resource`` and its CPUs."""
    return [
        NodeRoom(rank=rank, gpus=int(t.get(resource, 0.0) + 1e-9), cpus=t.get("CPU", 0.0))
        for rank, t in enumerate(node_totals(cluster))
        if rank not in spares
    ]


def pool_bundle(
    *, use_gpu: bool, resource: str, max_colocate_count: int, accelerator_type: str | None
) -> dict[str, float]:
    """verl's bundle: ``max_colocate_count`` CPUs, one accelerator, a sliver of
    ``accelerator_type`` (a Ray resource such as ``accelerator_type:H100``)."""
    bundle = {"CPU": float(max_colocate_count)}
    if use_gpu:
        bundle[resource] = 1.0
        if accelerator_type is not None:
            if not isinstance(accelerator_type, str) or not accelerator_type:
                raise ArgumentError(
                    "accelerator_type: expected a Ray resource name such as "
                    f"'accelerator_type:H100', got {accelerator_type!r}"
                )
            bundle[accelerator_type] = 1e-4
    return bundle
