"""A HuggingFace ``config.json`` read as Megatron-LM's model arguments.

Maps the Llama, Qwen2 / Qwen2.5, Qwen3, Qwen3-MoE, Mixtral and DeepSeek-V3 families
(``model_type`` ``llama``, ``qwen2``, ``qwen3``, ``qwen3_moe``, ``mixtral``,
``deepseek_v3``) to the fields Megatron's memory model reads, as slime's and Megatron's
own conversion scripts set them: SwiGLU, RMSNorm, no linear biases, grouped-query
attention from ``num_key_value_heads``, ``head_dim`` as ``kv_channels``, the MoE layer
pattern, and DeepSeek-V3's multi-latent attention, shared experts and MTP layers. Only
the local file is read; nothing is downloaded.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ._problems import Issues, issue

__all__ = ["HF_MODEL_TYPES", "megatron_fields_from_hf"]

_Fields = dict[str, object]


def megatron_fields_from_hf(path: str, *, base_dir: Path | None) -> _Fields:
    """Megatron fields for the model a HuggingFace ``config.json`` describes.

    Args:
        path: The file, absolute or relative to ``base_dir`` (the config's folder).
        base_dir: Where a relative path starts; the working directory when None.

    Raises:
        Issues: The file is missing or unreadable, is not a JSON object, has a
            ``model_type`` outside :data:`HF_MODEL_TYPES`, or lacks a size it needs.
    """
    file = Path(path).expanduser()
    if not file.is_absolute() and base_dir is not None:
        file = base_dir / file
    try:
        config = json.loads(file.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise issue(f"no such file: {file}", path) from None
    except (OSError, UnicodeDecodeError) as error:
        raise issue(f"cannot read {file}: {error}", path) from None
    except json.JSONDecodeError as error:
        raise issue(f"{file} is not JSON: {error.msg} at line {error.lineno}", path) from None
    if not isinstance(config, dict):
        raise issue(f"{file} is not a JSON object", path)
    model_type = config.get("model_type")
    mapper = HF_MODEL_TYPES.get(model_type) if isinstance(model_type, str) else None
    if mapper is None:
        raise issue(
            f"{file}: model_type {model_type!r} is not supported; supported: "
            + ", ".join(HF_MODEL_TYPES),
            path,
        )
    try:
        return mapper(config)
    except KeyError as missing:
        raise issue(f"{file}: {model_type} config lacks {missing.args[0]!r}", path) from None
    except Issues as bad:
        raise issue(f"{file}: {model_type} config: {bad}", path) from None


def _size(config: Mapping[str, Any], key: str) -> int:
    value = config[key]
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise issue(f"{key} is {value!r}; expected a positive integer", value)
    return value


def _dense(config: Mapping[str, Any]) -> _Fields:
    """The fields every supported family shares (a Llama-style decoder)."""
    act = config.get("hidden_act", "silu")
    if act != "silu":
        raise issue(f"hidden_act is {act!r}; only SwiGLU (silu) models are mapped", act)
    heads = _size(config, "num_attention_heads")
    fields: _Fields = {
        "num_layers": _size(config, "num_hidden_layers"),
        "hidden_size": _size(config, "hidden_size"),
        "ffn_hidden_size": _size(config, "intermediate_size"),
        "num_attention_heads": heads,
        "vocab_size": _size(config, "vocab_size"),
        "untie_embeddings_and_output_weights": not config.get("tie_word_embeddings", False),
        "swiglu": True,
        "normalization": "RMSNorm",
        "disable_bias_linear": True,
    }
    kv_heads = config.get("num_key_value_heads")
    if kv_heads is not None:
        fields["group_query_attention"] = True
        fields["num_query_groups"] = _size(config, "num_key_value_heads")
    if config.get("head_dim") is not None:
        fields["kv_channels"] = _size(config, "head_dim")
    return fields


def _mixtral(config: Mapping[str, Any]) -> _Fields:
    fields = _dense(config)
    fields["num_experts"] = _size(config, "num_local_experts")
    fields["moe_ffn_hidden_size"] = fields["ffn_hidden_size"]
    fields["moe_router_topk"] = _size(config, "num_experts_per_tok")
    return fields


def _qwen3_moe(config: Mapping[str, Any]) -> _Fields:
    fields = _dense(config)
    layers = _size(config, "num_hidden_layers")
    step = config.get("decoder_sparse_step", 1)
    dense_only = set(config.get("mlp_only_layers") or ())
    # transformers' Qwen3MoeDecoderLayer: sparse when not listed and (i + 1) % step == 0.
    pattern = [int(i not in dense_only and (i + 1) % step == 0) for i in range(layers)]
    fields["num_experts"] = _size(config, "num_experts")
    fields["moe_ffn_hidden_size"] = _size(config, "moe_intermediate_size")
    fields["moe_router_topk"] = _size(config, "num_experts_per_tok")
    fields["moe_layer_freq"] = 1 if all(pattern) else pattern
    return fields


def _deepseek_v3(config: Mapping[str, Any]) -> _Fields:
    fields = _dense(config)
    fields.pop("group_query_attention", None)
    fields.pop("num_query_groups", None)
    layers = _size(config, "num_hidden_layers")
    first_dense = config.get("first_k_dense_replace", 0)
    freq = config.get("moe_layer_freq", 1)
    moe_size = _size(config, "moe_intermediate_size")
    fields.update(
        multi_latent_attention=True,
        q_lora_rank=config.get("q_lora_rank"),
        kv_lora_rank=_size(config, "kv_lora_rank"),
        qk_head_dim=_size(config, "qk_nope_head_dim"),
        qk_pos_emb_head_dim=_size(config, "qk_rope_head_dim"),
        v_head_dim=_size(config, "v_head_dim"),
        num_experts=_size(config, "n_routed_experts"),
        moe_ffn_hidden_size=moe_size,
        moe_router_topk=_size(config, "num_experts_per_tok"),
        # transformers' DeepseekV3DecoderLayer: MoE from first_k_dense_replace on, every
        # moe_layer_freq-th layer.
        moe_layer_freq=[int(i >= first_dense and i % freq == 0) for i in range(layers)],
    )
    shared = config.get("n_shared_experts") or 0
    if shared:
        fields["moe_shared_expert_intermediate_size"] = shared * moe_size
    mtp = config.get("num_nextn_predict_layers") or 0
    if mtp:
        fields["mtp_num_layers"] = mtp
    return fields


#: ``model_type`` -> the function mapping its config to Megatron fields.
HF_MODEL_TYPES: Mapping[str, Callable[[Mapping[str, Any]], _Fields]] = {
    "llama": _dense,
    "qwen2": _dense,
    "qwen3": _dense,
    "qwen3_moe": _qwen3_moe,
    "mixtral": _mixtral,
    "deepseek_v3": _deepseek_v3,
}
