"""Will slime's job fit: its Megatron args and SGLang fraction, checked before reserving.

slime's ``args`` carry Megatron's own arguments (``num_layers``, ``hidden_size``,
``tensor_model_parallel_size``, ``use_distributed_optimizer``, ...: what slime users pass
as ``MODEL_ARGS``), SGLang's ``sglang_mem_fraction_static``, ``colocate`` and slime's
offload flags (``offload_train``, ``offload_rollout``; ``release_train`` frees the trainer
while the engines run). From them this module builds the ``memory:`` section of
placement-core's check and a plan of slime's layout on the cluster's GPUs: the trainer
on the first ``actor_num_nodes`` x ``actor_num_gpus_per_node`` GPUs, the engines on the
same GPUs when colocated, else on the GPUs after them. The check's verdict is core's
(see docs/concepts/will-it-fit.md).
"""

from __future__ import annotations

import logging
from typing import Any

from placement_core import (
    ConfigError,
    Inventory,
    InventoryError,
    MemoryReport,
    check_memory,
    megatron_fields_from_namespace,
    plan_from_assignments,
    require_fit,
)
from placement_ray.errors import ArgumentError

__all__ = ["check_slime_memory", "slime_memory_section"]

logger = logging.getLogger(__name__)

Assignments = dict[str, list[tuple[int, tuple[int, ...]]]]


def _flag(args: Any, name: str) -> bool:
    return getattr(args, name, False) is True


def slime_memory_section(args: Any) -> dict[str, Any] | None:
    """The ``memory:`` section slime's ``args`` describe, or None without Megatron's model
    arguments (``num_layers``: args made for the layout alone)."""
    if getattr(args, "num_layers", None) is None:
        return None
    fields = megatron_fields_from_namespace(args)
    fields.pop("hf_config", None)  # slime loads the model from its checkpoint, not this
    actor: dict[str, Any] = {
        "estimator": "megatron",
        "offload": _flag(args, "offload_train") or _flag(args, "release_train"),
        **fields,
    }
    section: dict[str, Any] = {"actor": actor}
    fraction = getattr(args, "sglang_mem_fraction_static", None)
    if fraction is not None:
        section["rollout"] = {
            "estimator": "sglang",
            "mem_fraction_static": fraction,
            "offload": _flag(args, "offload_rollout"),
        }
    return section


def _assignments(
    inventory: Inventory, actors: tuple[int, int], rollout_gpus: int, colocate: bool
) -> Assignments | None:
    """One process per GPU of slime's layout, or None where the cluster is too small (the
    reservation then says so itself)."""
    num_nodes, per_node = actors
    nodes = [node for node in inventory.nodes if node.accelerators]
    actor: list[tuple[int, tuple[int, ...]]] = [
        (node.rank, (a.index,)) for node in nodes[:num_nodes] for a in node.accelerators[:per_node]
    ]
    taken = set(actor)
    rest: list[tuple[int, tuple[int, ...]]] = [
        (node.rank, (a.index,))
        for node in nodes
        for a in node.accelerators
        if (node.rank, (a.index,)) not in taken
    ]
    pool = actor if colocate else rest
    if len(actor) < num_nodes * per_node or len(pool) < rollout_gpus:
        return None
    out: Assignments = {}
    if actor:
        out["actor"] = actor
    if rollout_gpus:
        out["rollout"] = pool[:rollout_gpus]
    return out


def _argument_error(error: ConfigError) -> ArgumentError:
    lines = []
    for problem in error.problems:
        key = problem.path.rsplit(".", 1)[-1] if problem.path.count(".") >= 2 else None
        lines.append(f"args.{key}: {problem.message}" if key else f"args: {problem.message}")
    return ArgumentError("; ".join(lines))


def check_slime_memory(
    args: Any,
    inventory: Inventory,
    *,
    actors: tuple[int, int],
    rollout_gpus: int,
    colocate: bool,
) -> MemoryReport | None:
    """Check that slime's job fits the cluster's GPUs and hosts, before anything is reserved.

    Args:
        args: slime's parsed arguments.
        inventory: The cluster's nodes (their GPUs' memory from the node snapshots).
        actors: ``(actor_num_nodes, actor_num_gpus_per_node)``, 0 where no trainer runs.
        rollout_gpus: The engines' GPUs, 0 where no local engine runs.
        colocate: Whether the engines share the trainer's GPUs.

    Returns:
        The report, or None where nothing can be checked (no model arguments, a cluster
        too small for the layout, or GPUs of unknown size: logged).

    Raises:
        ArgumentError: A Megatron argument is out of range (named as ``args.<name>``).
        DoesNotFitError: A GPU in some phase, or a host, is over capacity; the message
            names each, its components' bytes and what would make it fit.
    """
    section = slime_memory_section(args)
    if section is None:
        return None
    if not actors[0] * actors[1]:
        section.pop("actor")
    if not rollout_gpus:
        section.pop("rollout", None)
    assignments = _assignments(inventory, actors, rollout_gpus, colocate)
    if not section or assignments is None:
        return None
    try:
        plan = plan_from_assignments(assignments, inventory)
        report = check_memory(plan, {k: v for k, v in section.items() if k in assignments})
    except ConfigError as error:
        raise _argument_error(error) from None
    except InventoryError as error:
        logger.warning("memory not checked: %s", error.reason)
        return None
    for note in report.notes:
        logger.info("%s", note)
    return require_fit(report)
