"""Which Ray resource holds a node's accelerators, and how a request for a share is spelled.

A bundle reserves one device with the Ray resource of the node's accelerator type (core's
table, :func:`placement_core.ray_resource`): ``GPU`` for NVIDIA, AMD and
Intel, ``NPU`` for Ascend, ``HPU`` for Gaudi, a custom resource for the others. Ray spells
a GPU request ``num_gpus`` and every other one ``resources={name: amount}``; Ray records
device ids only for the resources its accelerator managers own (a custom resource such as
``MUSA`` has none, so its devices are numbered in bundle order on each node).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from functools import cache
from typing import Any

from placement_core import VISIBILITY_ENV_VARS, Inventory, Node, ray_resource

from .errors import AcceleratorMismatchError, ArgumentError

__all__ = [
    "GPU",
    "accelerator_amount",
    "check_live_types",
    "managed_by_ray",
    "node_resource",
    "other_visibility_vars",
    "refuse_fractions",
    "request_share",
    "share_options",
    "whole_only",
]

GPU = "GPU"


def node_resource(node: Node) -> str:
    """The Ray resource of ``node``'s accelerators (``GPU`` for a node without any)."""
    kind = node.accelerator_type
    return GPU if kind is None else ray_resource(kind)


def share_options(resource: str, amount: float) -> dict[str, Any]:
    """Ray ``.options(...)`` asking for ``amount`` of ``resource`` (and no other device)."""
    if resource == GPU:
        return {"num_gpus": amount}
    return {"num_gpus": 0, "resources": {resource: amount}}


def accelerator_amount(resources: Mapping[str, float], resource: str) -> float:
    """How much of ``resource`` a bundle or node holds (0 when none)."""
    return float(resources.get(resource, 0.0))


def other_visibility_vars(own: Mapping[str, str]) -> tuple[str, ...]:
    """Every vendor's visibility variable that ``own`` (a worker's) does not set.

    Ray sets the variable of the manager it picked for a resource (on a node whose GPUs it
    did not detect, NVIDIA's ``CUDA_VISIBLE_DEVICES``), so the worker removes these.
    """
    names = {v.env_var for v in VISIBILITY_ENV_VARS.values()} | {"ZE_AFFINITY_MASK"}
    return tuple(sorted(names - set(own)))


@cache
def _ray_managed() -> frozenset[str]:
    from ray._private import accelerators

    return frozenset(accelerators.get_all_accelerator_resource_names())


def managed_by_ray(resource: str) -> bool:
    """Whether Ray assigns device ids for ``resource`` (``GPU``, ``NPU``, ``HPU``, ...)."""
    return resource in _ray_managed()


def whole_only(resource: str) -> bool:
    """Whether Ray refuses fractions of ``resource`` (Gaudi's ``HPU`` is whole-only)."""
    from ray._private.accelerators import get_accelerator_manager_for_resource

    manager = get_accelerator_manager_for_resource(resource)
    if manager is None:
        return False
    fine, _ = manager.validate_resource_request_quantity(0.5)
    return not fine


def refuse_fractions(shares: Iterable[tuple[str, Node, float]]) -> None:
    """Refuse fractional shares of devices Ray hands out only whole.

    Args:
        shares: ``(worker name, its node, its share)`` per worker on accelerators.

    Raises:
        ArgumentError: naming every such worker, its node, the resource and its share.
    """
    wrong = [
        f"{who} on node {node.rank}: {share:g} {resource}"
        for who, node, share in shares
        if share < 1 and whole_only(resource := node_resource(node))
    ]
    if wrong:
        raise ArgumentError(
            "gpu_share: Ray hands these accelerators out only whole, so they cannot be "
            f"shared: {'; '.join(wrong)}; give each worker its own devices (share 1)"
        )


def request_share(options: dict[str, Any], node: Node, share: float, who: str) -> None:
    """Add to Ray ``options`` a request for ``share`` of one of ``node``'s devices.

    The request is spelled for the node's resource (``num_gpus``, or ``resources`` beside
    any the class already asks for).

    Raises:
        ArgumentError: a fraction of a device Ray hands out only whole.
    """
    refuse_fractions([(who, node, share)])
    asked = share_options(node_resource(node), share)
    if "resources" in asked:
        asked["resources"] = {**options.get("resources", {}), **asked["resources"]}
    options.update(asked)


def check_live_types(
    planned: Inventory, live: Inventory, used: Iterable[int] | None = None
) -> None:
    """Refuse a plan whose accelerator types differ from the live nodes' types.

    Args:
        planned: The inventory the plan was made for (declared, or read from snapshots).
        live: The cluster's live inventory, in the same rank order.
        used: Node ranks the plan places accelerator processes on; None: every node.

    Raises:
        AcceleratorMismatchError: naming every node, its planned and its live type.
    """
    ranks = range(min(len(planned.nodes), len(live.nodes))) if used is None else sorted(set(used))
    wrong = []
    for rank in ranks:
        if rank >= len(planned.nodes) or rank >= len(live.nodes):
            continue
        want, have = planned.nodes[rank].accelerator_type, live.nodes[rank].accelerator_type
        if want is not None and want != have:
            wrong.append((rank, want, have))
    if wrong:
        lines = "\n".join(
            f"  node {rank}: planned {want}, live {have or 'no accelerators'}"
            for rank, want, have in wrong
        )
        raise AcceleratorMismatchError(
            f"the plan's accelerator types differ from the live cluster's on {len(wrong)} "
            f"node(s); nothing was reserved:\n{lines}\n"
            "plan against the live inventory (cluster.inventory), or fix the config's "
            "inventory / node groups",
            mismatches=wrong,
        )
