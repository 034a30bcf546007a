"""``estimator: zero3``: DeepSpeed ZeRO-3 (and FSDP) model states per GPU and per node.

Reproduces DeepSpeed's ``estimate_zero3_model_states_mem_needs``
(``deepspeed/runtime/zero/stage3.py``): from the model's parameter count and its largest
layer's, the bytes of parameters, gradients and optimizer states on each GPU and in each
node's host memory, with or without CPU offload of the optimizer (``cpu_offload``) and
of the parameters (``cpu_offload_params``), with or without ``zero_init``, and
DeepSpeed's ``additional_buffer_factor`` on the host figure. Activations are not
modelled (DeepSpeed's estimate does not). The counts are written (``total_params``,
``largest_layer_params``) or derived from ``hf_config`` or Megatron-style size fields.
See docs/concepts/memory-estimators.md.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

from ._memory_fields import FieldSpec, boolean, positive_int, positive_number
from ._memory_megatron_args import SIZE_SPECS, missing_sizes, resolve_megatron, with_hf_config
from ._memory_megatron_math import parameter_blocks
from ._memory_model import TrainerMemory
from ._problems import Issues

__all__ = ["ZERO3_FIELDS", "Zero3Args", "parse_zero3", "zero3_memory"]

_OWN_SPECS: dict[str, FieldSpec] = {
    "total_params": (None, positive_int),
    "largest_layer_params": (None, positive_int),
    "cpu_offload": (True, boolean),
    "cpu_offload_params": (None, boolean),
    "zero_init": (True, boolean),
    "additional_buffer_factor": (1.5, positive_number),
}
_SPECS: dict[str, FieldSpec] = {**_OWN_SPECS, **SIZE_SPECS}
_COUNTS = ("total_params", "largest_layer_params")

#: Every field ``estimator: zero3`` accepts, with DeepSpeed's default. The Megatron size
#: fields and ``hf_config`` describe the model when the counts are not written;
#: ``cpu_offload_params`` defaults to ``cpu_offload``.
ZERO3_FIELDS: Mapping[str, object] = MappingProxyType(
    {name: default for name, (default, _) in _SPECS.items()}
)


@dataclass(frozen=True, slots=True)
class Zero3Args:
    """The inputs of DeepSpeed's ``estimate_zero3_model_states_mem_needs``.

    Attributes:
        total_params: The model's parameters (shared ones once).
        largest_layer_params: The parameters of its largest module (gathered whole).
        cpu_offload: The optimizer states live in host memory (``offload_optimizer``).
        cpu_offload_params: The parameters live in host memory too (``offload_param``).
        zero_init: The model is built sharded (``deepspeed.zero.Init``), so no process
            holds the whole model in host memory.
        additional_buffer_factor: DeepSpeed's margin on the host figure.
    """

    total_params: int
    largest_layer_params: int
    cpu_offload: bool = True
    cpu_offload_params: bool = True
    zero_init: bool = True
    additional_buffer_factor: float = 1.5


def parse_zero3(fields: Mapping[str, object], *, base_dir: Path | None) -> Zero3Args:
    """Check the fields of one ``estimator: zero3`` entry.

    Args:
        fields: The entry's fields (the ``estimator`` key removed); see
            :data:`ZERO3_FIELDS`.
        base_dir: The folder a relative ``hf_config`` path starts from.

    Raises:
        Issues: Every problem at once, each as ``(".field", message, value)``.
    """
    values = with_hf_config(fields, _SPECS, what="zero3", base_dir=base_dir)
    written = {k for k, v in fields.items() if v is not None}
    model_fields = sorted(k for k in written if k in SIZE_SPECS)
    problems: list[tuple[str, str, object]] = []
    if all(values[k] is not None for k in _COUNTS):
        problems += [
            (
                f".{k}",
                "total_params and largest_layer_params are written: no model needed",
                fields[k],
            )
            for k in model_fields
        ]
    else:
        problems += _derive_counts(values, written)
    offload = values["cpu_offload"]
    offload_params = values["cpu_offload_params"]
    if offload_params and not offload:
        message = "offloading parameters needs cpu_offload: true (DeepSpeed's estimate)"
        problems.append((".cpu_offload_params", message, True))
    if problems:
        raise Issues(problems)
    return Zero3Args(
        total_params=values["total_params"],
        largest_layer_params=values["largest_layer_params"],
        cpu_offload=offload,
        cpu_offload_params=offload if offload_params is None else offload_params,
        zero_init=values["zero_init"],
        additional_buffer_factor=values["additional_buffer_factor"],
    )


def _derive_counts(values: dict[str, Any], written: set[str]) -> list[tuple[str, str, object]]:
    """Fill the counts not written from the model's sizes, counted as Megatron counts
    them (unpadded vocabulary; MTP layers only when ``mtp_num_layers`` is written, since
    a HuggingFace model does not build them)."""
    missing = missing_sizes(values)
    if missing:
        counts = "or total_params and largest_layer_params"
        return [(s, f"{m.removesuffix(')')}, {counts})", v) for s, m, v in missing]
    shape = dict(values)
    shape["seq_length"] = 1  # ZeRO-3's estimate reads no sequence length
    if shape["padded_vocab_size"] is None:
        shape["padded_vocab_size"] = shape["vocab_size"]
    if "mtp_num_layers" not in written:
        shape["mtp_num_layers"] = None
    blocks = parameter_blocks(resolve_megatron(shape))
    if values["total_params"] is None:
        values["total_params"] = round(blocks.total)
    if values["largest_layer_params"] is None:
        values["largest_layer_params"] = round(blocks.largest_matrix)
    return []


def zero3_memory(args: Zero3Args, *, gpus: int, gpus_per_node: int) -> TrainerMemory:
    """DeepSpeed's ZeRO-3 model-states estimate for the component.

    Args:
        args: The checked inputs (:func:`parse_zero3`).
        gpus: The component's GPUs in the plan.
        gpus_per_node: The component's GPUs on each of its nodes.

    Returns:
        DeepSpeed's per-GPU figure as ``weights_and_optimizer_bytes`` (the gathered
        largest layer plus this GPU's shard of the model states, by offload options),
        0 activations, and DeepSpeed's per-node CPU figure as ``host_bytes_per_node``.

    Raises:
        Issues: ``gpus`` is not a whole number of nodes of ``gpus_per_node``.
    """
    if gpus < 1 or gpus_per_node < 1 or gpus % gpus_per_node:
        message = f"expected a whole number of nodes of {gpus_per_node} GPUs each"
        raise Issues([("", message, gpus)])
    num_nodes = gpus // gpus_per_node
    gpu_mem, cpu_mem = _deepspeed(args, num_nodes=num_nodes, gpus_per_node=gpus_per_node)
    largest_layer_memory = 4 * args.largest_layer_params
    shard = gpu_mem - largest_layer_memory
    breakdown = [("largest_layer", largest_layer_memory)]
    if shard:
        breakdown.append(("model_states_shard", shard))
    return TrainerMemory(gpu_mem, 0, cpu_mem, tuple(breakdown))


def _deepspeed(args: Zero3Args, *, num_nodes: int, gpus_per_node: int) -> tuple[int, int]:
    """(GPU bytes per GPU, CPU bytes per node), in DeepSpeed's arithmetic and order."""
    total, largest = args.total_params, args.largest_layer_params
    factor = args.additional_buffer_factor
    total_gpus = num_nodes * gpus_per_node
    gpus_factor = 1 / num_nodes
    largest_layer_memory = 4 * largest
    if args.cpu_offload and args.cpu_offload_params:
        gpu_mem = largest_layer_memory
        if args.zero_init:
            cpu_mem = total * 18 * gpus_factor * factor
        else:
            cpu_mem = total * max(4 * gpus_per_node, 18 * gpus_factor) * factor
    elif args.cpu_offload:
        gpu_mem = largest_layer_memory + int(2 * total / total_gpus)
        if args.zero_init:
            cpu_mem = total * 16 * gpus_factor * factor
        else:
            cpu_mem = total * max(4 * gpus_per_node, 16 * gpus_factor) * factor
    else:
        gpu_mem = largest_layer_memory + int(18 * total / total_gpus)
        if args.zero_init:
            cpu_mem = largest * 4 * gpus_per_node * factor
        else:
            cpu_mem = total * 4 * gpus_per_node * factor
    return gpu_mem, int(cpu_mem)
