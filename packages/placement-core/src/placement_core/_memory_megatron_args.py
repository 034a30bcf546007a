"""The fields of ``estimator: megatron`` and Megatron's arguments resolved from them.

:data:`MEGATRON_FIELDS` lists every accepted field (Megatron's argument names in
snake_case) with Megatron's default; :func:`resolve_megatron` fills in what Megatron's
``arguments.py`` derives (``ffn_hidden_size``, ``kv_channels``, the padded vocabulary,
the MoE layer pattern, the virtual pipeline size, ...) and checks what it asserts.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

from ._memory_fields import (
    FieldSpec,
    boolean,
    check_fields,
    choice,
    layer_pattern,
    non_negative_int,
    path_text,
    positive_int,
)
from ._memory_hf import megatron_fields_from_hf
from ._problems import Issues

Issue = tuple[str, str, object]

__all__ = [
    "MEGATRON_FIELDS",
    "SIZE_SPECS",
    "SPECS",
    "MegatronArgs",
    "missing_sizes",
    "resolve_megatron",
    "with_hf_config",
]

SIZE_SPECS: dict[str, FieldSpec] = {
    "num_layers": (None, positive_int),
    "hidden_size": (None, positive_int),
    "ffn_hidden_size": (None, positive_int),
    "num_attention_heads": (None, positive_int),
    "group_query_attention": (False, boolean),
    "num_query_groups": (1, positive_int),
    "kv_channels": (None, positive_int),
    "vocab_size": (None, positive_int),
    "padded_vocab_size": (None, positive_int),
    "make_vocab_size_divisible_by": (128, positive_int),
    "untie_embeddings_and_output_weights": (False, boolean),
    "swiglu": (False, boolean),
    "normalization": ("LayerNorm", choice("LayerNorm", "RMSNorm")),
    "disable_bias_linear": (False, boolean),
    "num_experts": (None, non_negative_int),
    "moe_ffn_hidden_size": (None, positive_int),
    "moe_shared_expert_intermediate_size": (None, positive_int),
    "moe_shared_expert_gate": (False, boolean),
    "moe_layer_freq": (1, layer_pattern),
    "moe_router_topk": (2, positive_int),
    "moe_latent_size": (None, positive_int),
    "multi_latent_attention": (False, boolean),
    "q_lora_rank": (None, positive_int),
    "kv_lora_rank": (32, positive_int),
    "qk_head_dim": (128, positive_int),
    "qk_pos_emb_head_dim": (64, positive_int),
    "v_head_dim": (128, positive_int),
    "mtp_num_layers": (None, non_negative_int),
    "hf_config": (None, path_text),
}

RUN_SPECS: dict[str, FieldSpec] = {
    "tensor_model_parallel_size": (1, positive_int),
    "pipeline_model_parallel_size": (1, positive_int),
    "context_parallel_size": (1, positive_int),
    "expert_model_parallel_size": (1, positive_int),
    "expert_tensor_parallel_size": (None, positive_int),
    "virtual_pipeline_model_parallel_size": (None, positive_int),
    "num_layers_per_virtual_pipeline_stage": (None, positive_int),
    "num_virtual_stages_per_pipeline_rank": (None, positive_int),
    "decoder_first_pipeline_num_layers": (None, positive_int),
    "decoder_last_pipeline_num_layers": (None, positive_int),
    "use_distributed_optimizer": (False, boolean),
    "sequence_parallel": (False, boolean),
    "recompute_granularity": (None, choice("full", "selective")),
    "recompute_activations": (False, boolean),
    "seq_length": (None, positive_int),
    "micro_batch_size": (1, positive_int),
    "global_batch_size": (None, positive_int),
    "num_microbatches": (None, positive_int),
}

SPECS: dict[str, FieldSpec] = {**SIZE_SPECS, **RUN_SPECS}

#: Every field ``estimator: megatron`` accepts, with its default (None: Megatron derives
#: it, or it is required). ``micro_batch_size`` defaults to 1 (Megatron requires it).
MEGATRON_FIELDS: Mapping[str, object] = MappingProxyType(
    {name: default for name, (default, _) in SPECS.items()}
)

_REQUIRED = ("num_layers", "hidden_size", "num_attention_heads")


@dataclass(frozen=True, slots=True)
class MegatronArgs:
    """Megatron's arguments as its ``arguments.py`` resolves them.

    Derived values are filled in: ``ffn_hidden_size`` (4 x hidden, or the SwiGLU
    rule), ``kv_channels`` (hidden / heads), ``num_query_groups`` (the heads without
    grouped-query attention), ``padded_vocab_size`` (the vocabulary rounded up to
    ``make_vocab_size_divisible_by`` x TP), ``expert_tensor_parallel_size`` (TP),
    ``moe_ffn_hidden_size`` (``ffn_hidden_size``), the MoE layer pattern (one 0/1 per
    layer), the virtual pipeline size, and ``sequence_parallel`` (off at TP 1).
    """

    num_layers: int
    hidden_size: int
    ffn_hidden_size: int
    num_attention_heads: int
    num_query_groups: int
    kv_channels: int
    seq_length: int
    vocab_size: int | None
    padded_vocab_size: int
    untie_embeddings_and_output_weights: bool
    swiglu: bool
    normalization: str
    add_bias_linear: bool
    num_experts: int | None
    moe_ffn_hidden_size: int
    moe_shared_expert_intermediate_size: int | None
    moe_shared_expert_gate: bool
    moe_layer_pattern: tuple[int, ...]
    moe_router_topk: int
    moe_latent_size: int | None
    multi_latent_attention: bool
    q_lora_rank: int | None
    kv_lora_rank: int
    qk_head_dim: int
    qk_pos_emb_head_dim: int
    v_head_dim: int
    mtp_num_layers: int | None
    tensor_model_parallel_size: int
    pipeline_model_parallel_size: int
    context_parallel_size: int
    expert_model_parallel_size: int
    expert_tensor_parallel_size: int
    virtual_pipeline_model_parallel_size: int | None
    use_distributed_optimizer: bool
    sequence_parallel: bool
    recompute_granularity: str | None
    micro_batch_size: int
    global_batch_size: int | None
    num_microbatches: int | None


def with_hf_config(
    fields: Mapping[str, object],
    specs: Mapping[str, FieldSpec],
    *,
    what: str,
    base_dir: Path | None,
) -> dict[str, Any]:
    """Checked fields, the ``hf_config`` file's sizes under those written explicitly."""
    values = check_fields(fields, specs, what=what)
    if values.get("hf_config") is None:
        return values
    try:
        from_hf = megatron_fields_from_hf(values["hf_config"], base_dir=base_dir)
    except Issues as bad:
        raise Issues([(".hf_config" + s, m, v) for s, m, v in bad.issues]) from None
    written = {k for k, v in fields.items() if v is not None}
    try:
        merged = check_fields({k: v for k, v in from_hf.items() if k in specs}, specs, what=what)
    except Issues as bad:
        path = values["hf_config"]
        raise Issues(
            [
                (".hf_config", f"{path}: {s.lstrip('.')} from the file: {m}", v)
                for s, m, v in bad.issues
            ]
        ) from None
    return {k: (values[k] if k in written else merged[k]) for k in values}


def missing_sizes(values: Mapping[str, Any], also: tuple[str, ...] = ()) -> list[Issue]:
    """A problem for each required size neither written nor in ``hf_config``."""
    problems: list[Issue] = [
        (f".{name}", "required (or give hf_config)", None)
        for name in (*_REQUIRED, *also)
        if values.get(name) is None
    ]
    if values.get("vocab_size") is None and values.get("padded_vocab_size") is None:
        problems.append((".vocab_size", "required (or padded_vocab_size, or hf_config)", None))
    return problems


def resolve_megatron(values: Mapping[str, Any]) -> MegatronArgs:
    """Megatron's arguments from checked fields, derived as ``arguments.py`` derives them.

    ``values`` holds checked fields (absent ones take :data:`MEGATRON_FIELDS`' default);
    the required sizes must be there (:func:`missing_sizes`).

    Raises:
        Issues: Every field Megatron's own checks would refuse, at once.
    """
    v = {**MEGATRON_FIELDS, **values}
    problems: list[Issue] = []
    tp, pp = v["tensor_model_parallel_size"], v["pipeline_model_parallel_size"]
    layers, hidden, heads = v["num_layers"], v["hidden_size"], v["num_attention_heads"]
    experts = v["num_experts"] or None
    ffn, kv_channels = _derived_sizes(v, problems)
    problems += _attention_problems(v)
    pattern, pattern_problems = _moe_pattern(v["moe_layer_freq"], layers)
    problems += pattern_problems if experts is not None else []
    vpp, vpp_problems = _virtual_pipeline(v)
    problems += vpp_problems + _run_problems(v)
    padded = _padded_vocab(v, problems)
    if problems:
        raise Issues(problems)
    granularity = "selective" if v["recompute_activations"] else v["recompute_granularity"]
    return MegatronArgs(
        num_layers=layers,
        hidden_size=hidden,
        ffn_hidden_size=ffn,
        num_attention_heads=heads,
        num_query_groups=v["num_query_groups"] if v["group_query_attention"] else heads,
        kv_channels=kv_channels,
        seq_length=v["seq_length"],
        vocab_size=v["vocab_size"],
        padded_vocab_size=padded,
        untie_embeddings_and_output_weights=v["untie_embeddings_and_output_weights"],
        swiglu=v["swiglu"],
        normalization=v["normalization"],
        add_bias_linear=not v["disable_bias_linear"],
        num_experts=experts,
        moe_ffn_hidden_size=v["moe_ffn_hidden_size"] or ffn,
        moe_shared_expert_intermediate_size=v["moe_shared_expert_intermediate_size"],
        moe_shared_expert_gate=v["moe_shared_expert_gate"],
        moe_layer_pattern=pattern,
        moe_router_topk=v["moe_router_topk"],
        moe_latent_size=v["moe_latent_size"],
        multi_latent_attention=v["multi_latent_attention"],
        q_lora_rank=v["q_lora_rank"],
        kv_lora_rank=v["kv_lora_rank"],
        qk_head_dim=v["qk_head_dim"],
        qk_pos_emb_head_dim=v["qk_pos_emb_head_dim"],
        v_head_dim=v["v_head_dim"],
        mtp_num_layers=v["mtp_num_layers"] or None,
        tensor_model_parallel_size=tp,
        pipeline_model_parallel_size=pp,
        context_parallel_size=v["context_parallel_size"],
        expert_model_parallel_size=v["expert_model_parallel_size"],
        expert_tensor_parallel_size=v["expert_tensor_parallel_size"] or tp,
        virtual_pipeline_model_parallel_size=vpp,
        use_distributed_optimizer=v["use_distributed_optimizer"],
        sequence_parallel=v["sequence_parallel"] and tp > 1,
        recompute_granularity=granularity,
        micro_batch_size=v["micro_batch_size"],
        global_batch_size=v["global_batch_size"],
        num_microbatches=v["num_microbatches"],
    )


def _derived_sizes(v: Mapping[str, Any], problems: list[Issue]) -> tuple[int, int]:
    """``ffn_hidden_size`` (4 x hidden, or 2/3 of that rounded down to 64 with SwiGLU)
    and ``kv_channels`` (hidden / heads) where not written."""
    hidden, heads = v["hidden_size"], v["num_attention_heads"]
    ffn = v["ffn_hidden_size"]
    if ffn is None:
        ffn = int((4 * hidden * 2 / 3) / 64) * 64 if v["swiglu"] else 4 * hidden
    kv_channels = v["kv_channels"]
    if kv_channels is None:
        kv_channels = hidden // heads
        if hidden % heads:
            message = (
                f"required: hidden_size ({hidden}) is not a multiple of "
                f"num_attention_heads ({heads})"
            )
            problems.append((".kv_channels", message, None))
    return ffn, kv_channels


def _attention_problems(v: Mapping[str, Any]) -> list[Issue]:
    heads, groups = v["num_attention_heads"], v["num_query_groups"]
    if v["multi_latent_attention"] and v["group_query_attention"]:
        return [
            (
                ".group_query_attention",
                "multi_latent_attention and group_query_attention exclude each other",
                True,
            )
        ]
    if v["group_query_attention"] and heads % groups:
        return [
            (
                ".num_query_groups",
                f"expected a divisor of num_attention_heads ({heads})",
                groups,
            )
        ]
    return []


def _moe_pattern(freq: int | tuple[int, ...], layers: int) -> tuple[tuple[int, ...], list[Issue]]:
    """One 0/1 per layer: every ``freq``-th layer from layer 0 is MoE, or the list itself."""
    if isinstance(freq, int):
        return tuple(1 if i % freq == 0 else 0 for i in range(layers)), []
    if len(freq) != layers:
        message = f"expected one 0/1 per layer: {len(freq)} entries for num_layers {layers}"
        return freq, [(".moe_layer_freq", message, list(freq))]
    return freq, []


def _virtual_pipeline(v: Mapping[str, Any]) -> tuple[int | None, list[Issue]]:
    names = (
        "virtual_pipeline_model_parallel_size",
        "num_layers_per_virtual_pipeline_stage",
        "num_virtual_stages_per_pipeline_rank",
    )
    given = [name for name in names if v[name] is not None]
    if len(given) > 1:
        return None, [(f".{given[1]}", f"give one of {', '.join(names)}", v[given[1]])]
    if not given:
        return None, []
    pp, layers = v["pipeline_model_parallel_size"], v["num_layers"]
    vpp = v[given[0]]
    if given[0] == "num_layers_per_virtual_pipeline_stage":
        per_stage = layers // pp
        if layers % pp == 0 and per_stage % vpp:
            message = (
                f"expected a divisor of num_layers / pipeline_model_parallel_size ({per_stage})"
            )
            return None, [(".num_layers_per_virtual_pipeline_stage", message, vpp)]
        vpp = per_stage // vpp
    if vpp == 1:
        return None, []
    if pp == 1:
        message = "an interleaved pipeline needs pipeline_model_parallel_size > 1"
        return None, [(f".{given[0]}", message, v[given[0]])]
    return vpp, []


def _run_problems(v: Mapping[str, Any]) -> list[Issue]:
    problems: list[Issue] = []
    cp = v["context_parallel_size"]
    problems += _stage_problems(v)
    seq = v["seq_length"]
    if seq is not None and cp > 1 and seq % (2 * cp):
        message = f"expected a multiple of 2 x context_parallel_size ({2 * cp})"
        problems.append((".seq_length", message, seq))
    if v["global_batch_size"] is not None and v["num_microbatches"] is not None:
        message = "give global_batch_size or num_microbatches, not both"
        problems.append((".num_microbatches", message, v["num_microbatches"]))
    return problems


def _padded_vocab(v: Mapping[str, Any], problems: list[Issue]) -> int:
    """``padded_vocab_size`` as written, else the vocabulary rounded up to a multiple of
    ``make_vocab_size_divisible_by`` x TP (Megatron's ``calculate_padded_vocab_size``)."""
    vocab, padded = v["vocab_size"], v["padded_vocab_size"]
    if padded is not None:
        if vocab is not None and padded < vocab:
            problems.append((".padded_vocab_size", f"expected >= vocab_size ({vocab})", padded))
        return int(padded)
    multiple = v["make_vocab_size_divisible_by"] * v["tensor_model_parallel_size"]
    return int(-(-vocab // multiple) * multiple)


def _stage_problems(v: Mapping[str, Any]) -> list[Issue]:
    """Layers split evenly over the stages, or over the stages between an uneven first
    and last stage (Megatron's ``num_layers_in_first/last_pipeline_stage`` check)."""
    pp, layers = v["pipeline_model_parallel_size"], v["num_layers"]
    edges = {
        name: v[name]
        for name in ("decoder_first_pipeline_num_layers", "decoder_last_pipeline_num_layers")
        if v[name] is not None
    }
    if not edges:
        if layers % pp:
            message = f"expected a divisor of num_layers ({layers})"
            return [(".pipeline_model_parallel_size", message, pp)]
        return []
    name = next(iter(edges))
    if v["num_layers_per_virtual_pipeline_stage"] is not None:
        message = "uneven pipeline stages need num_virtual_stages_per_pipeline_rank"
        return [(f".{name}", message, edges[name])]
    middle_layers, middle_stages = layers - sum(edges.values()), pp - len(edges)
    if middle_layers < 0 or middle_stages < 0:
        message = f"more layers or stages than num_layers ({layers}) and pipeline stages ({pp})"
        return [(f".{name}", message, edges[name])]
    if (middle_stages == 0 and middle_layers) or (middle_stages and middle_layers % middle_stages):
        message = (
            f"the other {middle_layers} layers do not split evenly over the other "
            f"{middle_stages} pipeline stages"
        )
        return [(f".{name}", message, edges[name])]
    return []
