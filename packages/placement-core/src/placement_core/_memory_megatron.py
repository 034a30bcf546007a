"""``estimator: megatron``: Megatron-LM's theoretical memory model for one component.

Fields are Megatron's argument names in snake_case (``num_layers``, ``hidden_size``,
``use_distributed_optimizer``, ...), written flat, with Megatron's defaults where a field
is absent, plus ``hf_config`` (a local HuggingFace ``config.json`` whose sizes fill the
fields not written). :func:`parse_megatron` resolves them as Megatron's ``arguments.py``
does; :func:`megatron_memory` takes the data-parallel size from the component's GPUs and
returns Megatron's figures for the most loaded GPU. See
docs/concepts/memory-estimators.md.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path

from ._memory_megatron_args import (
    MEGATRON_FIELDS,
    SPECS,
    MegatronArgs,
    missing_sizes,
    resolve_megatron,
    with_hf_config,
)
from ._memory_megatron_math import activation_bytes, weight_bytes
from ._memory_model import TrainerMemory
from ._problems import Issues

__all__ = [
    "MEGATRON_FIELDS",
    "MegatronArgs",
    "megatron_fields_from_namespace",
    "megatron_memory",
    "parse_megatron",
]


def parse_megatron(fields: Mapping[str, object], *, base_dir: Path | None) -> MegatronArgs:
    """Check and resolve the fields of one ``estimator: megatron`` entry.

    Args:
        fields: The entry's fields (the ``estimator`` key removed), Megatron's argument
            names in snake_case (see :data:`MEGATRON_FIELDS`).
        base_dir: The folder a relative ``hf_config`` path starts from.

    Returns:
        The arguments with Megatron's defaults and derived values filled in.

    Raises:
        Issues: Every problem at once, each as ``(".field", message, value)``: unknown
            fields (with a suggestion), bad values, missing sizes, inconsistent fields.
    """
    values = with_hf_config(fields, SPECS, what="megatron", base_dir=base_dir)
    problems = missing_sizes(values, ("seq_length",))
    if problems:
        raise Issues(problems)
    return resolve_megatron(values)


def megatron_fields_from_namespace(namespace: object) -> dict[str, object]:
    """The estimator's fields from Megatron's parsed arguments (slime's ``args``).

    Takes every attribute named in :data:`MEGATRON_FIELDS` that is set (not None),
    ``disable_bias_linear`` from Megatron's ``add_bias_linear``, and drops the
    ``virtual_pipeline_model_parallel_size`` that ``validate_args`` derived from
    ``num_layers_per_virtual_pipeline_stage`` or ``num_virtual_stages_per_pipeline_rank``.

    Args:
        namespace: An ``argparse.Namespace`` (or any object) holding Megatron's arguments.
    """
    fields = {
        name: getattr(namespace, name)
        for name in MEGATRON_FIELDS
        if getattr(namespace, name, None) is not None
    }
    add_bias = getattr(namespace, "add_bias_linear", None)
    if isinstance(add_bias, bool) and "disable_bias_linear" not in fields:
        fields["disable_bias_linear"] = not add_bias
    if {"num_layers_per_virtual_pipeline_stage", "num_virtual_stages_per_pipeline_rank"} & set(
        fields
    ):
        fields.pop("virtual_pipeline_model_parallel_size", None)
    return fields


def _divides(gpus: int, sizes: Mapping[str, int]) -> tuple[str, str, object] | None:
    product = math.prod(sizes.values())
    if gpus % product == 0:
        return None
    names = " x ".join(f"{name} ({size})" for name, size in sizes.items())
    return "", f"the component's {gpus} GPUs are not a multiple of {names} = {product}", gpus


def megatron_memory(args: MegatronArgs, *, gpus: int) -> TrainerMemory:
    """Megatron's theoretical memory on the component's most loaded GPU.

    Args:
        args: The resolved arguments (:func:`parse_megatron`).
        gpus: The component's GPU count in the plan (Megatron's world size).

    Returns:
        Weights + gradients + optimizer states of the most loaded model shard and the
        first pipeline stage's activations, as ``report_theoretical_memory`` computes
        them; ``breakdown`` names weights, gradients, optimizer and activations.

    Raises:
        Issues: ``gpus`` is not a multiple of TP x PP x CP (or, with experts, of expert
            TP x EP x PP), or the global batch does not split into micro batches.
    """
    if gpus < 1:
        raise Issues([("", "expected a positive number of GPUs", gpus)])
    tp, pp = args.tensor_model_parallel_size, args.pipeline_model_parallel_size
    problems = [
        _divides(
            gpus,
            {
                "tensor_model_parallel_size": tp,
                "pipeline_model_parallel_size": pp,
                "context_parallel_size": args.context_parallel_size,
            },
        )
    ]
    if args.num_experts is not None:
        expert = {
            "expert_tensor_parallel_size": args.expert_tensor_parallel_size,
            "expert_model_parallel_size": args.expert_model_parallel_size,
            "pipeline_model_parallel_size": pp,
        }
        problems.append(_divides(gpus, expert))
    found = [p for p in problems if p is not None]
    if found:
        raise Issues(found)
    dp = gpus // (tp * pp * args.context_parallel_size)
    expert_dp = gpus // (args.expert_tensor_parallel_size * args.expert_model_parallel_size * pp)
    microbatches = _microbatches(args, dp)
    weights = weight_bytes(args, dp=dp, expert_dp=expert_dp)
    selective_sp = args.sequence_parallel and args.recompute_granularity == "selective"
    activations = activation_bytes(
        args, num_microbatches=microbatches, sequence_parallel_selective=selective_sp
    )
    total = math.ceil(weights.total)
    parts = (math.ceil(weights.weights), math.ceil(weights.gradients))
    act = math.ceil(activations)
    breakdown = (
        ("weights", parts[0]),
        ("gradients", parts[1]),
        ("optimizer", total - sum(parts)),
        ("activations", act),
    )
    return TrainerMemory(total, act, 0, breakdown)


def _microbatches(args: MegatronArgs, dp: int) -> int:
    """``num_microbatches`` as written, else global batch / (micro batch x DP)."""
    if args.num_microbatches is not None:
        return args.num_microbatches
    if args.global_batch_size is None:
        return 1
    per_step = args.micro_batch_size * dp
    if args.global_batch_size % per_step:
        raise Issues(
            [
                (
                    ".global_batch_size",
                    f"expected a multiple of micro_batch_size ({args.micro_batch_size}) x "
                    f"data-parallel size ({dp}) = {per_step}",
                    args.global_batch_size,
                )
            ]
        )
    return args.global_batch_size // per_step
