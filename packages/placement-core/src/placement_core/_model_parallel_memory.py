"""The memory check of an RLinf job (``--model-parallel``), from the keys RLinf itself uses.

RLinf's reasoning configs (``examples/reasoning/config/math/*.yaml``) size memory with:

- ``rollout.rollout_backend`` (``sglang``, the default, or ``vllm``) and
  ``rollout.gpu_memory_utilization`` (default 0.65), which RLinf hands to SGLang as
  ``mem_fraction_static`` and to vLLM as ``gpu_memory_utilization``. A collocated
  rollout releases its memory while the actor trains (``offload_engine``);
- ``actor.training_backend`` (``megatron`` or ``fsdp``); Megatron's sizes under
  ``actor.model`` (``tensor_model_parallel_size``, ``sequence_parallel``,
  ``recompute_granularity``, ``seq_length``, ...) and ``actor.optim.
  use_distributed_optimizer``; the architecture from the Hugging Face model RLinf loads
  (``rollout.model.model_path``'s ``config.json``); ``actor.offload_weight``,
  ``offload_grad`` and ``offload_optimizer`` (all three: the actor leaves the GPU) or,
  for FSDP, ``actor.enable_offload``.

A job with its own ``memory:`` section is checked with that instead.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ._config import ClusterConfig
from ._errors import ConfigError
from ._interpolate import MISSING, JobDocument
from ._memory_config import MEMORY_KEY, MemorySpec, load_memory
from ._memory_megatron import MEGATRON_FIELDS

__all__ = ["rlinf_memory"]


def _get(job: JobDocument, path: str) -> Any:
    try:
        return job.get(path)
    except ConfigError:
        return MISSING  # a value only OmegaConf resolves: RLinf's default applies


def _rollout(job: JobDocument) -> dict[str, Any] | None:
    if not job.has("rollout"):
        return None
    backend = _get(job, "rollout.rollout_backend")
    fraction = _get(job, "rollout.gpu_memory_utilization")
    fraction = 0.65 if fraction is MISSING else fraction
    if backend == "vllm":
        return {"estimator": "vllm", "gpu_memory_utilization": fraction, "offload": True}
    return {"estimator": "sglang", "mem_fraction_static": fraction, "offload": True}


def _actor(job: JobDocument, hf_config: Path) -> dict[str, Any]:
    backend = _get(job, "actor.training_backend")
    if backend == "fsdp":
        return {
            "estimator": "zero3",
            "hf_config": str(hf_config),
            "offload": _get(job, "actor.enable_offload") is True,
        }
    entry: dict[str, Any] = {
        "estimator": "megatron",
        "hf_config": str(hf_config),
        "offload": all(
            _get(job, f"actor.{flag}") is True
            for flag in ("offload_weight", "offload_grad", "offload_optimizer")
        ),
    }
    for key in MEGATRON_FIELDS:
        for section in ("actor.model", "actor.optim", "actor"):
            value = _get(job, f"{section}.{key}")
            if value is not MISSING and value is not None and key != "hf_config":
                entry[key] = value
                break
    return entry


def rlinf_memory(job: JobDocument, config: ClusterConfig) -> MemorySpec | None:
    """The memory check RLinf's own keys describe, or None for a job without a rollout.

    The actor is left out (and says why among the notes) when the Hugging Face model's
    ``config.json`` is not on this machine.

    Raises:
        ConfigError: A value RLinf's keys give is out of range.
    """
    components = config.components()
    section: dict[str, Any] = {}
    notes: list[str] = []
    rollout = _rollout(job)
    if rollout is None or "rollout" not in components:
        return None
    section["rollout"] = rollout
    model_path = _get(job, "rollout.model.model_path")
    if "actor" in components:
        hf_config = Path(model_path) / "config.json" if isinstance(model_path, str) else None
        if hf_config is not None and hf_config.is_file():
            section["actor"] = _actor(job, hf_config)
        elif hf_config is not None:
            notes.append(
                f"memory: actor not estimated: {hf_config} (from rollout.model.model_path) is "
                "not on this machine"
            )
        else:
            notes.append(
                "memory: actor not estimated: the job gives no rollout.model.model_path (the "
                "Hugging Face model whose config.json has its sizes)"
            )
    spec = load_memory({MEMORY_KEY: section}, config, base_dir=Path())
    assert spec is not None
    return MemorySpec(spec.components, spec.phases, (*spec.notes, *notes))
