"""slime's ``create_placement_groups(args)``, with slime's ``args`` and slime's dict.

Swap one import in slime's ``train.py``::

    # from slime.ray.placement_group import create_placement_groups
    from placement_ray.compat.slime import create_placement_groups

    pgs = create_placement_groups(args)

The function only translates: it reads the attributes slime's own function reads, calls
``placement_ray.create_placement_groups`` and returns
``{"actor": (pg, bundle_indices, gpu_ids), "critic": <the actor's tuple or None>,
"rollout": (pg, bundle_indices, gpu_ids)}`` with lists of ints in (node, GPU) order, as
slime does: the actor's lists cover the whole group, the rollout's start where slime's
table says. The layout itself differs from slime's on purpose where slime would split a
rollout engine across nodes: each engine keeps to one node, or to whole nodes of one
NVLink domain (see the guide "Coming from slime").
"""

from __future__ import annotations

from typing import Any

from placement_ray._cluster import Cluster
from placement_ray._slime.layout import SlimeLayout, slime_bundle_counts
from placement_ray._slime.layout import create_placement_groups as _create
from placement_ray._slime.memory import check_slime_memory, slime_memory_section
from placement_ray.errors import ArgumentError

__all__ = ["DEVICE_ACCELERATORS", "SLIME_ARGS", "create_placement_groups", "slime_dict"]

SLIME_ARGS = (
    "actor_num_nodes",
    "actor_num_gpus_per_node",
    "rollout_num_gpus",
    "rollout_num_gpus_per_engine",
    "colocate",
    "debug_train_only",
    "debug_rollout_only",
    "rollout_external",
    "use_critic",
)
"""The attributes of slime's ``args`` that are read; every other one is ignored (and,
where present, ``accelerator`` or ``device``: see :data:`DEVICE_ACCELERATORS`; a truthy
``spare_nodes`` is refused: the drop-in keeps no spares), except those of the memory
check: Megatron's model arguments, ``sglang_mem_fraction_static``, ``offload_train``,
``offload_rollout`` and ``release_train`` (docs/concepts/will-it-fit.md)."""

DEVICE_ACCELERATORS = {"npu": "ascend", "hpu": "gaudi", "xpu": "intel", "musa": "musa"}
"""A torch device name in ``args.device`` -> the accelerator type the bundles reserve
(``cuda`` names both NVIDIA and AMD, so it leaves the choice to the cluster)."""

_FLAGS = ("colocate", "debug_train_only", "debug_rollout_only", "rollout_external", "use_critic")
_MISSING = object()


def _read(args: Any, name: str) -> Any:
    value = getattr(args, name, _MISSING)
    if value is _MISSING:
        raise ArgumentError(
            f"args.{name}: missing; slime's args always define it (parse them with slime's "
            "parse_args, or set it on the namespace)"
        )
    return value


def _int(args: Any, name: str, minimum: int, *, unused: bool = False) -> int:
    value = _read(args, name)
    if value is None and unused:
        return minimum
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ArgumentError(f"args.{name}: expected an int >= {minimum}, got {value!r}")
    return value


def _bool(args: Any, name: str) -> bool:
    value = _read(args, name)
    if not isinstance(value, bool):
        raise ArgumentError(f"args.{name}: expected True or False, got {value!r}")
    return value


def _accelerator(args: Any) -> str | None:
    """The accelerator type ``args`` names: ``args.accelerator``, else ``args.device``."""
    accelerator = getattr(args, "accelerator", None)
    if accelerator is not None:
        if not isinstance(accelerator, str):
            raise ArgumentError(
                f"args.accelerator: expected an accelerator type name, got {accelerator!r}"
            )
        return accelerator
    device = getattr(args, "device", None)
    if device is None:
        return None
    name = device.split(":")[0].lower() if isinstance(device, str) else None
    if name == "cuda":
        return None
    if name not in DEVICE_ACCELERATORS:
        raise ArgumentError(
            f"args.device: expected a torch device of an accelerator (cuda, "
            f"{', '.join(DEVICE_ACCELERATORS)}), got {device!r}"
        )
    return DEVICE_ACCELERATORS[name]


def slime_dict(layout: SlimeLayout) -> dict[str, Any]:
    """slime's dict for a layout: ``{"actor": ..., "critic": ..., "rollout": ...}``."""
    slots = layout.group.slots
    pg = layout.group.pg
    actor = (pg, [int(s.index) for s in slots], [int(s.gpu_id) for s in slots])
    rest = slots[layout.rollout_start :]
    rollout = (pg, [int(s.index) for s in rest], [int(s.gpu_id) for s in rest])
    return {
        "actor": actor,
        "critic": actor if layout.critic is not None else None,
        "rollout": rollout,
    }


def create_placement_groups(
    args: Any,
    *,
    cluster: Cluster | None = None,
    cpus_per_bundle: float = 1.0,
    timeout_s: float | None = None,
) -> dict[str, Any]:
    """slime's placement groups from slime's ``args``, in slime's dict.

    Args:
        args: slime's parsed arguments (any object with the attributes in ``SLIME_ARGS``;
            ``rollout_num_gpus`` and ``rollout_num_gpus_per_engine`` may be None where
            no local engine runs: ``debug_train_only`` or ``rollout_external``).
        cluster: The job's cluster view (default: ``Cluster()``, attaching to the job).
        cpus_per_bundle: CPUs per bundle (slime's bundles are ``{"GPU": 1, "CPU": 1}``).
        timeout_s: Limit for placing the group; None waits forever, as slime does (an
            autoscaler may be adding nodes).

    The bundles reserve the accelerator type ``args.accelerator`` names (``ascend``), else
    the one ``args.device`` names (``npu`` is Ascend, see :data:`DEVICE_ACCELERATORS`),
    else the one type the cluster's nodes have.

    Returns:
        ``{"actor": (pg, bundle_indices, gpu_ids), "critic": <the actor's tuple or
        None>, "rollout": (pg, bundle_indices, gpu_ids)}``; the lists hold ints in
        (node, GPU) order.

    Raises:
        ArgumentError: an attribute is missing or of the wrong type (named as
            ``args.<name>``), the flags contradict each other, or ``args.spare_nodes``
            is set (spares need placement_ray's own train group and rollout engines).
        InfeasiblePlacementGroupError: the cluster can never hold the group.
        EngineAlignmentError: the rollout engines cannot each keep to one node (or to
            whole nodes of one NVLink domain) here; the message lists the engine sizes
            that fit.
        PlacementGroupTimeoutError: not placed within ``timeout_s`` (and removed).
        DoesNotFitError: (placement-core's) slime's Megatron args, ``sglang_mem_fraction_
            static``, ``colocate`` and offload flags do not fit the GPUs' or the hosts'
            memory; raised before anything is reserved (see docs/concepts/will-it-fit.md).
    """
    if getattr(args, "spare_nodes", None):
        raise ArgumentError(
            f"args.spare_nodes: {args.spare_nodes!r}: slime's drop-in keeps no spares (slime's "
            "own actors cannot be re-created on one); use placement_ray.create_placement_groups"
            "(..., spare_nodes=...) with create_train_group / create_rollout_engines, and "
            "SlimeLayout.recover after a node loss"
        )
    flags = {name: _bool(args, name) for name in _FLAGS}
    no_engines = flags["debug_train_only"] or flags["rollout_external"]
    actors = (_int(args, "actor_num_nodes", 0), _int(args, "actor_num_gpus_per_node", 0))
    rollout_gpus = _int(args, "rollout_num_gpus", 0, unused=no_engines)
    engine_size = _int(args, "rollout_num_gpus_per_engine", 1, unused=no_engines)
    if slime_memory_section(args) is not None:
        # The counts and flags are refused before Ray is reached, as without the check.
        slime_bundle_counts(
            *actors,
            rollout_gpus,
            colocate=flags["colocate"],
            debug_train_only=flags["debug_train_only"],
            debug_rollout_only=flags["debug_rollout_only"],
            rollout_external=flags["rollout_external"],
        )
        if cluster is None:
            cluster = Cluster()
        check_slime_memory(
            args,
            cluster.inventory,
            actors=(0, 0) if flags["debug_rollout_only"] else actors,
            rollout_gpus=0 if no_engines else rollout_gpus,
            colocate=flags["colocate"],
        )
    layout = _create(
        *actors,
        rollout_gpus,
        rollout_num_gpus_per_engine=engine_size,
        colocate=flags["colocate"],
        debug_train_only=flags["debug_train_only"],
        debug_rollout_only=flags["debug_rollout_only"],
        rollout_external=flags["rollout_external"],
        use_critic=flags["use_critic"],
        cluster=cluster,
        cpus_per_bundle=cpus_per_bundle,
        timeout_s=timeout_s,
        accelerator=_accelerator(args),
    )
    return slime_dict(layout)
