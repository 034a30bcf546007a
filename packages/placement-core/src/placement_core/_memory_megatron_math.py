"""Megatron-LM's theoretical memory model, term by term.

Follows ``megatron/training/theoretical_memory_usage.py`` (``compute_weight_and_
optimizer_memory``, ``compute_activation_memory`` and ``compute_activation_memory_
without_sp``) in the same float arithmetic and order, so the figures equal Megatron's
own; docs/concepts/memory-estimators.md states each formula in words.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

__all__ = ["ModelShape", "activation_bytes", "parameter_blocks", "weight_bytes"]


class ModelShape(Protocol):
    """The resolved arguments the formulas read (``MegatronArgs`` is one)."""

    @property
    def num_layers(self) -> int: ...
    @property
    def hidden_size(self) -> int: ...
    @property
    def ffn_hidden_size(self) -> int: ...
    @property
    def num_attention_heads(self) -> int: ...
    @property
    def num_query_groups(self) -> int: ...
    @property
    def kv_channels(self) -> int: ...
    @property
    def padded_vocab_size(self) -> int: ...
    @property
    def untie_embeddings_and_output_weights(self) -> bool: ...
    @property
    def swiglu(self) -> bool: ...
    @property
    def normalization(self) -> str: ...
    @property
    def add_bias_linear(self) -> bool: ...
    @property
    def num_experts(self) -> int | None: ...
    @property
    def moe_ffn_hidden_size(self) -> int: ...
    @property
    def moe_shared_expert_intermediate_size(self) -> int | None: ...
    @property
    def moe_shared_expert_gate(self) -> bool: ...
    @property
    def moe_layer_pattern(self) -> tuple[int, ...]: ...
    @property
    def moe_latent_size(self) -> int | None: ...
    @property
    def multi_latent_attention(self) -> bool: ...
    @property
    def q_lora_rank(self) -> int | None: ...
    @property
    def kv_lora_rank(self) -> int: ...
    @property
    def qk_head_dim(self) -> int: ...
    @property
    def qk_pos_emb_head_dim(self) -> int: ...
    @property
    def v_head_dim(self) -> int: ...
    @property
    def mtp_num_layers(self) -> int | None: ...


class ParallelShape(ModelShape, Protocol):
    """A model shape with its parallel layout and batch."""

    @property
    def tensor_model_parallel_size(self) -> int: ...
    @property
    def pipeline_model_parallel_size(self) -> int: ...
    @property
    def expert_model_parallel_size(self) -> int: ...
    @property
    def expert_tensor_parallel_size(self) -> int: ...
    @property
    def virtual_pipeline_model_parallel_size(self) -> int | None: ...
    @property
    def use_distributed_optimizer(self) -> bool: ...
    @property
    def seq_length(self) -> int: ...
    @property
    def micro_batch_size(self) -> int: ...


@dataclass(frozen=True, slots=True)
class Blocks:
    """Parameter counts by how Megatron shards them (floats, as Megatron computes them)."""

    tp_sharded: float  # attention, dense MLPs and shared experts of the decoder layers
    replicated: float  # norms, routers, latent projections, shared-expert gates
    expert: float  # routed experts of the decoder layers
    mtp_tp_sharded: float
    mtp_replicated: float
    mtp_expert: float
    embedding: float  # one embedding (or output layer) matrix
    total: float  # Megatron's "Total number of parameters"
    largest_matrix: float  # the largest single weight matrix (for ZeRO-3's largest layer)


def _attention(m: ModelShape, norm: int) -> float:
    if not m.multi_latent_attention:
        ratio = m.kv_channels * m.num_attention_heads / m.hidden_size
        groups = m.num_query_groups / m.num_attention_heads
        return 2 * m.hidden_size * m.hidden_size * ((1 + groups) * ratio)
    heads, q_head = m.num_attention_heads, m.qk_head_dim + m.qk_pos_emb_head_dim
    if m.q_lora_rank is None:
        q_term = m.hidden_size * heads * q_head
    else:
        q_term = m.q_lora_rank * (m.hidden_size + heads * q_head + norm)
    return (
        q_term
        + m.kv_lora_rank * (m.hidden_size + heads * (m.qk_head_dim + m.v_head_dim) + norm)
        + m.hidden_size * m.qk_pos_emb_head_dim
        + (heads * m.v_head_dim) * m.hidden_size
    )


def parameter_blocks(m: ModelShape) -> Blocks:
    """Megatron's parameter counts for ``m`` (``compute_weight_and_optimizer_memory``)."""
    moe = m.num_experts is not None
    experts = m.num_experts if m.num_experts is not None else 1
    gated = 3 / 2 if m.swiglu else 1
    shared_size = m.moe_shared_expert_intermediate_size or 0
    pattern = m.moe_layer_pattern if moe else (0,) * m.num_layers
    moe_layers = sum(pattern)
    dense_layers = m.num_layers - moe_layers
    mtp = m.mtp_num_layers or 0
    mtp_moe_layers = pattern[-1] * mtp
    mtp_dense_layers = (1 - pattern[-1]) * mtp
    norm = 1 if m.normalization == "RMSNorm" else 2
    h = m.hidden_size

    attention = _attention(m, norm)
    embedding = h * m.padded_vocab_size
    final_norm = norm * h
    dense_mlp = 2 * h * m.ffn_hidden_size * gated
    shared_mlp = 2 * h * shared_size * gated
    routed_h = m.moe_latent_size if m.moe_latent_size is not None else h
    moe_ffn = m.moe_ffn_hidden_size if moe else 0
    routed = 2 * routed_h * moe_ffn * experts * gated
    latent = 2 * h * m.moe_latent_size if moe and m.moe_latent_size is not None else 0
    layernorms = 2 * h * norm
    router = (h * experts) + (experts if m.add_bias_linear else 0) if moe else 0
    shared_gate = h if shared_size > 0 and m.moe_shared_expert_gate else 0

    dense_layer = attention + dense_mlp + layernorms
    moe_layer = attention + shared_mlp + routed + latent + layernorms + router + shared_gate
    embeddings = 2 * embedding if m.untie_embeddings_and_output_weights else embedding
    block = dense_layer * dense_layers + moe_layer * moe_layers + final_norm
    total = block + (dense_layer * mtp_dense_layers + moe_layer * mtp_moe_layers) + embeddings
    moe_replicated = layernorms + latent + router + shared_gate
    return Blocks(
        tp_sharded=(attention + dense_mlp) * dense_layers + (attention + shared_mlp) * moe_layers,
        replicated=layernorms * dense_layers + moe_replicated * moe_layers + final_norm,
        expert=routed * moe_layers,
        mtp_tp_sharded=(attention + dense_mlp) * mtp_dense_layers
        + (attention + shared_mlp) * mtp_moe_layers,
        mtp_replicated=layernorms * mtp_dense_layers + moe_replicated * mtp_moe_layers,
        mtp_expert=routed * mtp_moe_layers,
        embedding=embedding,
        total=total,
        largest_matrix=_largest_matrix(m, moe_ffn, routed_h, shared_size),
    )


def _largest_matrix(m: ModelShape, moe_ffn: int, routed_h: int, shared_size: int) -> float:
    """The largest single projection, as a HuggingFace model holds it (one ``nn.Linear``
    or ``nn.Embedding`` each): ZeRO-3 gathers one such module at a time."""
    h = m.hidden_size
    candidates = [
        h * m.padded_vocab_size,
        h * m.ffn_hidden_size,
        h * moe_ffn,
        routed_h * moe_ffn,
        h * shared_size,
    ]
    if m.multi_latent_attention:
        q_head = m.qk_head_dim + m.qk_pos_emb_head_dim
        heads = m.num_attention_heads
        q_in = m.q_lora_rank if m.q_lora_rank is not None else h
        candidates += [
            q_in * heads * q_head,
            m.kv_lora_rank * heads * (m.qk_head_dim + m.v_head_dim),
            heads * m.v_head_dim * h,
        ]
    else:
        candidates += [h * m.kv_channels * m.num_attention_heads]
    return float(max(candidates))


@dataclass(frozen=True, slots=True)
class WeightBytes:
    """Bytes of the most loaded shard: total and its parts."""

    total: float
    params: float  # parameters on the most loaded shard
    weights: float  # bf16 parameters, 2 bytes each
    gradients: float  # fp32 main gradients, 4 bytes each


def weight_bytes(m: ParallelShape, *, dp: int, expert_dp: int) -> WeightBytes:
    """Weights, gradients and optimizer of the most loaded shard (first or last stage)."""
    b = parameter_blocks(m)
    tp, pp = m.tensor_model_parallel_size, m.pipeline_model_parallel_size
    etp_ep = m.expert_tensor_parallel_size * m.expert_model_parallel_size
    tp_sharded = ((b.tp_sharded / pp) + b.mtp_tp_sharded + b.embedding) / tp
    replicated = (b.replicated / pp) + b.mtp_replicated
    expert = ((b.expert / pp) + b.mtp_expert) / etp_ep
    if m.untie_embeddings_and_output_weights and pp == 1:
        tp_sharded += b.embedding / tp

    def per_param(data_parallel_size: int) -> float:
        return 18 if not m.use_distributed_optimizer else 6 + (12 / data_parallel_size)

    total = (tp_sharded + replicated) * per_param(dp) + expert * per_param(expert_dp)
    params = tp_sharded + replicated + expert
    return WeightBytes(total=total, params=params, weights=2 * params, gradients=4 * params)


def activation_bytes(
    m: ParallelShape, *, num_microbatches: int | None, sequence_parallel_selective: bool
) -> float:
    """Activations of the first pipeline stage, with Megatron's two formulas."""
    s, b, h = m.seq_length, m.micro_batch_size, m.hidden_size
    tp, pp = m.tensor_model_parallel_size, m.pipeline_model_parallel_size
    if sequence_parallel_selective:
        memory = (s * b * h) * (18 + (4 * (m.ffn_hidden_size / h)))
    else:
        memory = s * b * h * (10 + (24 / tp))
    memory *= m.num_layers
    memory += 8 * s * b * pp
    memory += s * b * h * pp
    vpp = m.virtual_pipeline_model_parallel_size
    if vpp is not None:
        memory *= 1 + ((pp - 1) / (pp * vpp))
    if vpp is None and pp > 1 and num_microbatches is not None:
        memory *= min(1, num_microbatches / pp)
    if sequence_parallel_selective:
        if pp == 1:
            memory += s * b * h * 4 * (1 + (m.padded_vocab_size / h))
        return memory / tp
    if pp == 1:
        logits = s * b * m.padded_vocab_size / tp
        memory += (logits + s * b * h) * 2
    return memory * 1.05
