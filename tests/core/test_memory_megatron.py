"""``estimator: megatron`` reproduces Megatron-LM's own theoretical memory figures.

The reference figures were computed by running Megatron-LM's
``megatron/training/theoretical_memory_usage.py`` at commit
d98e8a64ddf34856e74b24714e3bedb2f5a39553 (``compute_weight_and_optimizer_memory`` and, as
``report_theoretical_memory`` chooses, ``compute_activation_memory`` with sequence
parallelism and selective recompute or ``compute_activation_memory_without_sp``) on an
argument namespace holding these fields, Megatron's defaults for the others, the
vocabulary padded by its ``vocab_utils.calculate_padded_vocab_size``, world size = the GPUs,
``data_parallel_size`` = GPUs / (TP x PP x CP) and ``num_microbatches`` = global batch /
(micro batch x DP) (1 without a global batch). Each pair is (weights and optimizer bytes,
activation bytes) on the most loaded GPU, as Megatron's floats.
"""

from __future__ import annotations

import argparse
import pickle
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from placement_core._memory_megatron import (
    MEGATRON_FIELDS,
    megatron_fields_from_namespace,
    megatron_memory,
    parse_megatron,
)
from placement_core._memory_model import TrainerMemory
from placement_core._problems import Issues

CASES = [
    pytest.param(
        8,
        {
            "num_layers": 28,
            "hidden_size": 1536,
            "ffn_hidden_size": 8960,
            "num_attention_heads": 12,
            "group_query_attention": True,
            "num_query_groups": 2,
            "kv_channels": 128,
            "vocab_size": 151936,
            "swiglu": True,
            "normalization": "RMSNorm",
            "seq_length": 4096,
            "micro_batch_size": 2,
            "disable_bias_linear": True,
        },
        27785825280.0,
        15231369216.0,
        id="qwen2.5-1.5b tp1 no sp",
    ),
    pytest.param(
        8,
        {
            "num_layers": 28,
            "hidden_size": 3584,
            "ffn_hidden_size": 18944,
            "num_attention_heads": 28,
            "group_query_attention": True,
            "num_query_groups": 4,
            "kv_channels": 128,
            "vocab_size": 152064,
            "untie_embeddings_and_output_weights": True,
            "swiglu": True,
            "normalization": "RMSNorm",
            "tensor_model_parallel_size": 2,
            "use_distributed_optimizer": True,
            "seq_length": 4096,
            "sequence_parallel": True,
            "recompute_granularity": "selective",
            "micro_batch_size": 1,
            "disable_bias_linear": True,
        },
        34270612992.0,
        9327099904.0,
        id="qwen2.5-7b worked example",
    ),
    pytest.param(
        16,
        {
            "num_layers": 32,
            "hidden_size": 4096,
            "ffn_hidden_size": 14336,
            "num_attention_heads": 32,
            "group_query_attention": True,
            "num_query_groups": 8,
            "kv_channels": 128,
            "vocab_size": 128256,
            "untie_embeddings_and_output_weights": True,
            "swiglu": True,
            "normalization": "RMSNorm",
            "tensor_model_parallel_size": 4,
            "pipeline_model_parallel_size": 2,
            "use_distributed_optimizer": True,
            "seq_length": 8192,
            "sequence_parallel": True,
            "recompute_granularity": "selective",
            "micro_batch_size": 1,
            "disable_bias_linear": True,
            "global_batch_size": 64,
        },
        12049735680.0,
        8606744576.0,
        id="llama3-8b tp4 pp2 gbs64",
    ),
    pytest.param(
        8,
        {
            "num_layers": 32,
            "hidden_size": 4096,
            "ffn_hidden_size": 14336,
            "num_attention_heads": 32,
            "group_query_attention": True,
            "num_query_groups": 8,
            "kv_channels": 128,
            "vocab_size": 128256,
            "untie_embeddings_and_output_weights": True,
            "swiglu": True,
            "normalization": "RMSNorm",
            "tensor_model_parallel_size": 2,
            "pipeline_model_parallel_size": 4,
            "seq_length": 4096,
            "micro_batch_size": 1,
            "disable_bias_linear": True,
        },
        20432701440.0,
        3118080000.0,
        id="llama3-8b pp4 one microbatch",
    ),
    pytest.param(
        32,
        {
            "num_layers": 32,
            "hidden_size": 4096,
            "ffn_hidden_size": 14336,
            "num_attention_heads": 32,
            "group_query_attention": True,
            "num_query_groups": 8,
            "kv_channels": 128,
            "vocab_size": 128256,
            "untie_embeddings_and_output_weights": True,
            "swiglu": True,
            "normalization": "RMSNorm",
            "tensor_model_parallel_size": 2,
            "pipeline_model_parallel_size": 4,
            "virtual_pipeline_model_parallel_size": 4,
            "use_distributed_optimizer": True,
            "seq_length": 8192,
            "sequence_parallel": True,
            "recompute_granularity": "selective",
            "micro_batch_size": 1,
            "disable_bias_linear": True,
            "global_batch_size": 128,
        },
        10216350720.0,
        20480942080.0,
        id="llama3-8b interleaved",
    ),
    pytest.param(
        8,
        {
            "num_layers": 36,
            "hidden_size": 4096,
            "ffn_hidden_size": 12288,
            "num_attention_heads": 32,
            "group_query_attention": True,
            "num_query_groups": 8,
            "kv_channels": 128,
            "vocab_size": 151936,
            "untie_embeddings_and_output_weights": True,
            "swiglu": True,
            "normalization": "RMSNorm",
            "tensor_model_parallel_size": 2,
            "context_parallel_size": 2,
            "use_distributed_optimizer": True,
            "seq_length": 16384,
            "micro_batch_size": 1,
            "disable_bias_linear": True,
        },
        49152442368.0,
        58635249254.4,
        id="qwen3-8b cp2 no sp",
    ),
    pytest.param(
        64,
        {
            "num_layers": 32,
            "hidden_size": 4096,
            "ffn_hidden_size": 14336,
            "num_attention_heads": 32,
            "group_query_attention": True,
            "num_query_groups": 8,
            "kv_channels": 128,
            "vocab_size": 32000,
            "untie_embeddings_and_output_weights": True,
            "swiglu": True,
            "normalization": "RMSNorm",
            "num_experts": 8,
            "moe_router_topk": 2,
            "tensor_model_parallel_size": 2,
            "pipeline_model_parallel_size": 4,
            "expert_model_parallel_size": 8,
            "expert_tensor_parallel_size": 1,
            "use_distributed_optimizer": True,
            "seq_length": 4096,
            "sequence_parallel": True,
            "recompute_granularity": "selective",
            "micro_batch_size": 1,
            "disable_bias_linear": True,
            "global_batch_size": 256,
        },
        18663710208.0,
        8623554560.0,
        id="mixtral-8x7b tp2 pp4 ep8",
    ),
    pytest.param(
        32,
        {
            "num_layers": 48,
            "hidden_size": 2048,
            "ffn_hidden_size": 6144,
            "num_attention_heads": 32,
            "group_query_attention": True,
            "num_query_groups": 4,
            "kv_channels": 128,
            "vocab_size": 151936,
            "untie_embeddings_and_output_weights": True,
            "swiglu": True,
            "normalization": "RMSNorm",
            "num_experts": 128,
            "moe_ffn_hidden_size": 768,
            "moe_router_topk": 8,
            "tensor_model_parallel_size": 4,
            "expert_model_parallel_size": 8,
            "expert_tensor_parallel_size": 1,
            "use_distributed_optimizer": True,
            "seq_length": 4096,
            "sequence_parallel": True,
            "recompute_granularity": "selective",
            "micro_batch_size": 1,
            "disable_bias_linear": True,
            "global_batch_size": 64,
        },
        35577314304.0,
        3653246976.0,
        id="qwen3-30b-a3b tp4 ep8",
    ),
    pytest.param(
        1024,
        {
            "num_layers": 61,
            "hidden_size": 7168,
            "ffn_hidden_size": 18432,
            "num_attention_heads": 128,
            "multi_latent_attention": True,
            "q_lora_rank": 1536,
            "kv_lora_rank": 512,
            "qk_head_dim": 128,
            "qk_pos_emb_head_dim": 64,
            "v_head_dim": 128,
            "kv_channels": 128,
            "vocab_size": 129280,
            "untie_embeddings_and_output_weights": True,
            "swiglu": True,
            "normalization": "RMSNorm",
            "num_experts": 256,
            "moe_ffn_hidden_size": 2048,
            "moe_shared_expert_intermediate_size": 2048,
            "moe_router_topk": 8,
            "moe_layer_freq": "[0]*3+[1]*58",
            "mtp_num_layers": 1,
            "tensor_model_parallel_size": 2,
            "pipeline_model_parallel_size": 16,
            "expert_model_parallel_size": 64,
            "expert_tensor_parallel_size": 1,
            "use_distributed_optimizer": True,
            "seq_length": 4096,
            "sequence_parallel": True,
            "recompute_granularity": "selective",
            "micro_batch_size": 1,
            "decoder_first_pipeline_num_layers": 4,
            "decoder_last_pipeline_num_layers": 1,
            "disable_bias_linear": True,
            "global_batch_size": 8192,
        },
        21430054128.0,
        25564545024.0,
        id="deepseek-v3 tp2 pp16 ep64",
    ),
    pytest.param(
        256,
        {
            "num_layers": 61,
            "hidden_size": 7168,
            "ffn_hidden_size": 18432,
            "num_attention_heads": 128,
            "multi_latent_attention": True,
            "q_lora_rank": 1536,
            "kv_lora_rank": 512,
            "qk_head_dim": 128,
            "qk_pos_emb_head_dim": 64,
            "v_head_dim": 128,
            "kv_channels": 128,
            "vocab_size": 129280,
            "untie_embeddings_and_output_weights": True,
            "swiglu": True,
            "normalization": "RMSNorm",
            "num_experts": 256,
            "moe_ffn_hidden_size": 2048,
            "moe_shared_expert_intermediate_size": 2048,
            "moe_router_topk": 8,
            "moe_layer_freq": "[0]*3+[1]*58",
            "mtp_num_layers": 1,
            "tensor_model_parallel_size": 8,
            "expert_model_parallel_size": 32,
            "expert_tensor_parallel_size": 2,
            "use_distributed_optimizer": True,
            "seq_length": 4096,
            "micro_batch_size": 1,
            "disable_bias_linear": True,
        },
        107985341376.0,
        24679056998.4,
        id="deepseek-v3 tp8 ep32 etp2 no sp",
    ),
    pytest.param(
        16,
        {
            "num_layers": 8,
            "hidden_size": 1024,
            "ffn_hidden_size": 4096,
            "num_attention_heads": 16,
            "vocab_size": 50257,
            "num_experts": 4,
            "moe_layer_freq": 2,
            "moe_shared_expert_intermediate_size": 1024,
            "moe_shared_expert_gate": True,
            "tensor_model_parallel_size": 2,
            "pipeline_model_parallel_size": 2,
            "expert_model_parallel_size": 4,
            "seq_length": 2048,
            "sequence_parallel": True,
            "recompute_granularity": "selective",
            "micro_batch_size": 4,
        },
        956012688.0,
        574652416.0,
        id="layernorm gelu moe every 2nd layer with gate and bias",
    ),
    pytest.param(
        8,
        {
            "num_layers": 4,
            "hidden_size": 512,
            "num_attention_heads": 8,
            "multi_latent_attention": True,
            "vocab_size": 32000,
            "swiglu": True,
            "normalization": "RMSNorm",
            "num_experts": 8,
            "moe_ffn_hidden_size": 256,
            "moe_latent_size": 128,
            "moe_layer_freq": "[0]+[1]*3",
            "mtp_num_layers": 2,
            "expert_model_parallel_size": 4,
            "use_distributed_optimizer": True,
            "seq_length": 1024,
            "micro_batch_size": 1,
            "disable_bias_linear": True,
        },
        219422880.0,
        145341235.20000002,
        id="mla without q lora, mtp 2, latent moe",
    ),
    pytest.param(
        4,
        {
            "num_layers": 12,
            "hidden_size": 768,
            "num_attention_heads": 12,
            "group_query_attention": True,
            "vocab_size": 50000,
            "swiglu": True,
            "tensor_model_parallel_size": 2,
            "seq_length": 1024,
            "micro_batch_size": 8,
            "make_vocab_size_divisible_by": 64,
        },
        994249728.0,
        2194371379.2000003,
        id="swiglu default ffn, gqa default one group",
    ),
]


def estimate(fields: dict[str, Any], gpus: int) -> TrainerMemory:
    return megatron_memory(parse_megatron(fields, base_dir=None), gpus=gpus)


@pytest.mark.parametrize(("gpus", "fields", "weights", "activations"), CASES)
def test_weights_and_optimizer_equal_megatrons(
    gpus: int, fields: dict[str, Any], weights: float, activations: float
) -> None:
    assert estimate(fields, gpus).weights_and_optimizer_bytes == pytest.approx(weights, abs=1)


@pytest.mark.parametrize(("gpus", "fields", "weights", "activations"), CASES)
def test_activations_equal_megatrons(
    gpus: int, fields: dict[str, Any], weights: float, activations: float
) -> None:
    assert estimate(fields, gpus).activation_bytes == pytest.approx(activations, abs=1)


@pytest.mark.parametrize(("gpus", "fields", "weights", "activations"), CASES)
def test_breakdown_adds_up_to_the_figures(
    gpus: int, fields: dict[str, Any], weights: float, activations: float
) -> None:
    memory = estimate(fields, gpus)
    assert sum(size for _, size in memory.breakdown) == memory.gpu_bytes
    assert [name for name, _ in memory.breakdown] == [
        "weights",
        "gradients",
        "optimizer",
        "activations",
    ]
    assert memory.host_bytes_per_node == 0


# -- Megatron's defaults and derived arguments (megatron/training/arguments.py) ----------

SMALL: dict[str, Any] = {
    "num_layers": 4,
    "hidden_size": 4096,
    "num_attention_heads": 32,
    "vocab_size": 50257,
    "seq_length": 1024,
}


def parsed(**fields: Any) -> Any:
    return parse_megatron({**SMALL, **fields}, base_dir=None)


def test_defaults_are_megatrons() -> None:
    assert {k: MEGATRON_FIELDS[k] for k in ("make_vocab_size_divisible_by", "kv_lora_rank")} == {
        "make_vocab_size_divisible_by": 128,
        "kv_lora_rank": 32,
    }
    args = parsed()
    assert (args.tensor_model_parallel_size, args.pipeline_model_parallel_size) == (1, 1)
    assert (args.normalization, args.add_bias_linear, args.swiglu) == ("LayerNorm", True, False)
    assert (args.qk_head_dim, args.qk_pos_emb_head_dim, args.v_head_dim) == (128, 64, 128)
    assert (args.moe_router_topk, args.use_distributed_optimizer) == (2, False)
    assert (args.micro_batch_size, args.recompute_granularity) == (1, None)


def test_fields_are_megatrons_argument_names() -> None:
    names = [
        "num_layers",
        "hidden_size",
        "ffn_hidden_size",
        "num_attention_heads",
        "num_query_groups",
        "group_query_attention",
        "kv_channels",
        "seq_length",
        "vocab_size",
        "padded_vocab_size",
        "make_vocab_size_divisible_by",
        "untie_embeddings_and_output_weights",
        "swiglu",
        "normalization",
        "disable_bias_linear",
        "tensor_model_parallel_size",
        "pipeline_model_parallel_size",
        "context_parallel_size",
        "expert_model_parallel_size",
        "expert_tensor_parallel_size",
        "virtual_pipeline_model_parallel_size",
        "num_layers_per_virtual_pipeline_stage",
        "num_virtual_stages_per_pipeline_rank",
        "decoder_first_pipeline_num_layers",
        "decoder_last_pipeline_num_layers",
        "num_experts",
        "moe_ffn_hidden_size",
        "moe_shared_expert_intermediate_size",
        "moe_shared_expert_gate",
        "moe_layer_freq",
        "moe_router_topk",
        "moe_latent_size",
        "multi_latent_attention",
        "q_lora_rank",
        "kv_lora_rank",
        "qk_head_dim",
        "qk_pos_emb_head_dim",
        "v_head_dim",
        "mtp_num_layers",
        "use_distributed_optimizer",
        "sequence_parallel",
        "recompute_granularity",
        "recompute_activations",
        "micro_batch_size",
        "global_batch_size",
        "num_microbatches",
        "hf_config",
    ]
    assert sorted(MEGATRON_FIELDS) == sorted(names)


def test_ffn_hidden_size_is_four_times_hidden() -> None:
    assert parsed().ffn_hidden_size == 4 * 4096


def test_swiglu_ffn_hidden_size_is_two_thirds_rounded_down_to_64() -> None:
    assert parsed(swiglu=True).ffn_hidden_size == int(4 * 4096 * 2 / 3 / 64) * 64 == 10880


def test_kv_channels_is_hidden_over_heads() -> None:
    assert parsed().kv_channels == 128


def test_query_groups_are_the_heads_without_grouped_query_attention() -> None:
    assert parsed(num_query_groups=8).num_query_groups == 32


def test_grouped_query_attention_defaults_to_one_group() -> None:
    assert parsed(group_query_attention=True).num_query_groups == 1


@pytest.mark.parametrize(
    ("fields", "padded"),
    [
        ({}, 50304),  # a multiple of 128
        ({"tensor_model_parallel_size": 2}, 50432),  # of 128 x 2
        ({"make_vocab_size_divisible_by": 1}, 50257),
        ({"padded_vocab_size": 60000}, 60000),
    ],
)
def test_vocabulary_is_padded_as_megatron_pads_it(fields: dict[str, Any], padded: int) -> None:
    assert parsed(**fields).padded_vocab_size == padded


def test_expert_sizes_default_to_the_dense_ones() -> None:
    args = parsed(num_experts=8, tensor_model_parallel_size=4)
    assert (args.expert_tensor_parallel_size, args.moe_ffn_hidden_size) == (4, 4 * 4096)


def test_zero_experts_is_no_moe() -> None:
    assert parsed(num_experts=0).num_experts is None


@pytest.mark.parametrize(
    ("freq", "pattern"),
    [
        (1, (1, 1, 1, 1)),
        (2, (1, 0, 1, 0)),
        ([0, 1, 1, 1], (0, 1, 1, 1)),
        ("[0]*1+[1]*3", (0, 1, 1, 1)),
        ("([1]+[0])*2", (1, 0, 1, 0)),
        ("[1, 1, 0, 0]", (1, 1, 0, 0)),
    ],
)
def test_moe_layer_freq_as_megatron_reads_it(freq: object, pattern: tuple[int, ...]) -> None:
    assert parsed(num_experts=4, moe_layer_freq=freq).moe_layer_pattern == pattern


@pytest.mark.parametrize(
    ("fields", "vpp"),
    [
        ({"virtual_pipeline_model_parallel_size": 2}, 2),
        ({"num_layers_per_virtual_pipeline_stage": 1}, 2),
        ({"num_virtual_stages_per_pipeline_rank": 2}, 2),
        ({"num_layers_per_virtual_pipeline_stage": 2}, None),  # one stage per rank
    ],
)
def test_virtual_pipeline_size(fields: dict[str, Any], vpp: int | None) -> None:
    args = parsed(pipeline_model_parallel_size=2, **fields)
    assert args.virtual_pipeline_model_parallel_size == vpp


def test_recompute_activations_means_selective() -> None:
    assert parsed(recompute_activations=True).recompute_granularity == "selective"


def test_sequence_parallel_is_off_without_tensor_parallelism() -> None:
    assert not parsed(sequence_parallel=True).sequence_parallel
    assert parsed(sequence_parallel=True, tensor_model_parallel_size=2).sequence_parallel


def test_microbatches_come_from_the_global_batch() -> None:
    # PP 4 on 8 GPUs: DP 2; a global batch of 4 is 2 microbatches, half the pipeline
    run = {"pipeline_model_parallel_size": 4, "micro_batch_size": 1}
    from_batch = megatron_memory(parsed(**run, global_batch_size=4), gpus=8)
    written = megatron_memory(parsed(**run, num_microbatches=2), gpus=8)
    full = megatron_memory(parsed(**run, num_microbatches=4), gpus=8)
    assert from_batch.activation_bytes == written.activation_bytes < full.activation_bytes


# -- errors: the field, the value and what was expected -------------------------------


def problems(fields: dict[str, Any], *, base: dict[str, Any] = SMALL) -> tuple[Any, ...]:
    with pytest.raises(Issues) as caught:
        parse_megatron({**base, **fields}, base_dir=None)
    return caught.value.issues


def test_unknown_field_gets_a_suggestion() -> None:
    assert problems({"num_layer": 4}) == (
        (".num_layer", "not a field of the megatron estimator (did you mean 'num_layers'?)", None),
    )


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("num_layers", -2, "expected a positive integer"),
        ("hidden_size", True, "expected a positive integer"),
        ("seq_length", "4k", "expected a positive integer"),
        ("swiglu", "yes", "expected true or false"),
        (
            "normalization",
            "rmsnorm",
            "expected one of LayerNorm, RMSNorm (did you mean 'RMSNorm'?)",
        ),
        ("recompute_granularity", "partial", "expected one of full, selective"),
        ("mtp_num_layers", -1, "expected an integer >= 0"),
        ("hf_config", "", "expected a path to a file"),
        (
            "moe_layer_freq",
            "[2]*4",
            "expected a positive integer, a list of 0 and 1 per layer, "
            "or a list expression such as [0]*3+[1]*58",
        ),
        (
            "moe_layer_freq",
            "__import__('os')",
            "expected a positive integer, a list of 0 and 1 per layer, "
            "or a list expression such as [0]*3+[1]*58",
        ),
    ],
)
def test_bad_value_names_field_value_and_expectation(
    field: str, value: object, message: str
) -> None:
    assert problems({field: value}) == ((f".{field}", message, value),)


def test_every_problem_is_reported_at_once() -> None:
    found = problems({"num_layers": 0, "swiglu": 1, "bogus": 2})
    assert [suffix for suffix, _, _ in found] == [".num_layers", ".swiglu", ".bogus"]


def test_missing_sizes_are_named() -> None:
    assert problems({}, base={}) == (
        (".num_layers", "required (or give hf_config)", None),
        (".hidden_size", "required (or give hf_config)", None),
        (".num_attention_heads", "required (or give hf_config)", None),
        (".seq_length", "required (or give hf_config)", None),
        (".vocab_size", "required (or padded_vocab_size, or hf_config)", None),
    )


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        (
            {"pipeline_model_parallel_size": 3},
            (".pipeline_model_parallel_size", "expected a divisor of num_layers (4)", 3),
        ),
        (
            {"hidden_size": 100, "num_attention_heads": 3},
            (
                ".kv_channels",
                "required: hidden_size (100) is not a multiple of num_attention_heads (3)",
                None,
            ),
        ),
        (
            {"group_query_attention": True, "num_query_groups": 5},
            (".num_query_groups", "expected a divisor of num_attention_heads (32)", 5),
        ),
        (
            {"multi_latent_attention": True, "group_query_attention": True},
            (
                ".group_query_attention",
                "multi_latent_attention and group_query_attention exclude each other",
                True,
            ),
        ),
        (
            {"num_experts": 4, "moe_layer_freq": [1, 0]},
            (
                ".moe_layer_freq",
                "expected one 0/1 per layer: 2 entries for num_layers 4",
                [1, 0],
            ),
        ),
        (
            {"virtual_pipeline_model_parallel_size": 2},
            (
                ".virtual_pipeline_model_parallel_size",
                "an interleaved pipeline needs pipeline_model_parallel_size > 1",
                2,
            ),
        ),
        (
            {"pipeline_model_parallel_size": 2, "num_layers_per_virtual_pipeline_stage": 3},
            (
                ".num_layers_per_virtual_pipeline_stage",
                "expected a divisor of num_layers / pipeline_model_parallel_size (2)",
                3,
            ),
        ),
        (
            {"virtual_pipeline_model_parallel_size": 2, "num_virtual_stages_per_pipeline_rank": 2},
            (
                ".num_virtual_stages_per_pipeline_rank",
                "give one of virtual_pipeline_model_parallel_size, "
                "num_layers_per_virtual_pipeline_stage, num_virtual_stages_per_pipeline_rank",
                2,
            ),
        ),
        (
            {"pipeline_model_parallel_size": 3, "decoder_first_pipeline_num_layers": 1},
            (
                ".decoder_first_pipeline_num_layers",
                "the other 3 layers do not split evenly over the other 2 pipeline stages",
                1,
            ),
        ),
        (
            {"context_parallel_size": 4, "seq_length": 1020},
            (".seq_length", "expected a multiple of 2 x context_parallel_size (8)", 1020),
        ),
        (
            {"global_batch_size": 8, "num_microbatches": 2},
            (".num_microbatches", "give global_batch_size or num_microbatches, not both", 2),
        ),
        (
            {"vocab_size": 100, "padded_vocab_size": 64},
            (".padded_vocab_size", "expected >= vocab_size (100)", 64),
        ),
    ],
)
def test_inconsistent_fields_are_refused(
    fields: dict[str, Any], expected: tuple[str, str, object]
) -> None:
    assert problems(fields) == (expected,)


def test_uneven_first_and_last_stages_are_accepted() -> None:
    args = parsed(
        num_layers=7,
        pipeline_model_parallel_size=3,
        decoder_first_pipeline_num_layers=1,
        decoder_last_pipeline_num_layers=2,
    )
    assert args.pipeline_model_parallel_size == 3


def memory_problems(gpus: int, **fields: Any) -> tuple[Any, ...]:
    with pytest.raises(Issues) as caught:
        megatron_memory(parsed(**fields), gpus=gpus)
    return caught.value.issues


def test_gpus_not_divisible_by_model_parallel_sizes() -> None:
    assert memory_problems(6, tensor_model_parallel_size=4) == (
        (
            "",
            "the component's 6 GPUs are not a multiple of tensor_model_parallel_size (4) x "
            "pipeline_model_parallel_size (1) x context_parallel_size (1) = 4",
            6,
        ),
    )


def test_gpus_not_divisible_by_expert_parallel_sizes() -> None:
    assert memory_problems(8, num_experts=16, expert_model_parallel_size=16) == (
        (
            "",
            "the component's 8 GPUs are not a multiple of expert_tensor_parallel_size (1) x "
            "expert_model_parallel_size (16) x pipeline_model_parallel_size (1) = 16",
            8,
        ),
    )


def test_global_batch_must_split_into_micro_batches() -> None:
    assert memory_problems(4, global_batch_size=6, micro_batch_size=2) == (
        (
            ".global_batch_size",
            "expected a multiple of micro_batch_size (2) x data-parallel size (4) = 8",
            6,
        ),
    )


# -- properties --------------------------------------------------------------------


@st.composite
def models(draw: st.DrawFn) -> dict[str, Any]:
    heads = draw(st.sampled_from([8, 16, 32]))
    fields: dict[str, Any] = {
        "num_layers": draw(st.sampled_from([8, 16, 32])),
        "hidden_size": heads * draw(st.sampled_from([16, 64, 128])),
        "num_attention_heads": heads,
        "vocab_size": draw(st.integers(1000, 160_000)),
        "seq_length": draw(st.sampled_from([512, 4096])),
        "swiglu": draw(st.booleans()),
        "untie_embeddings_and_output_weights": draw(st.booleans()),
        "use_distributed_optimizer": draw(st.booleans()),
        "sequence_parallel": draw(st.booleans()),
        "recompute_granularity": draw(st.sampled_from([None, "selective", "full"])),
        "micro_batch_size": draw(st.integers(1, 4)),
    }
    if draw(st.booleans()):
        fields.update(num_experts=8, moe_ffn_hidden_size=fields["hidden_size"])
        fields["moe_layer_freq"] = draw(st.sampled_from([1, 2]))
    return fields


def weights(fields: dict[str, Any], gpus: int, **run: Any) -> int:
    memory = megatron_memory(parse_megatron({**fields, **run}, base_dir=None), gpus=gpus)
    return memory.weights_and_optimizer_bytes


@given(models(), st.sampled_from([1, 2, 4]), st.sampled_from([1, 2]))
def test_more_tensor_parallelism_never_raises_weights_per_gpu(
    fields: dict[str, Any], tp: int, pp: int
) -> None:
    # on the same 16 GPUs: fewer data-parallel replicas, each holding less
    def at(size: int) -> int:
        return weights(fields, 16, tensor_model_parallel_size=size, pipeline_model_parallel_size=pp)

    assert at(2 * tp) <= at(tp)


@given(models(), st.sampled_from([1, 2, 4]), st.sampled_from([1, 2]), st.sampled_from([1, 2]))
def test_more_pipeline_parallelism_never_raises_weights_per_gpu(
    fields: dict[str, Any], pp: int, tp: int, dp: int
) -> None:
    # at the same data-parallel size: on a fixed GPU count, halving DP doubles each
    # replica's optimizer share, which can outweigh the layers a first stage sheds
    def at(size: int) -> int:
        return weights(
            fields,
            tp * size * dp,
            tensor_model_parallel_size=tp,
            pipeline_model_parallel_size=size,
        )

    assert at(2 * pp) <= at(pp)


@given(models(), st.sampled_from([1, 2, 8]))
def test_distributed_optimizer_never_raises_weights_per_gpu(
    fields: dict[str, Any], gpus: int
) -> None:
    with_it = weights(fields, gpus, use_distributed_optimizer=True)
    assert with_it <= weights(fields, gpus, use_distributed_optimizer=False)


@given(models(), st.sampled_from([1, 2]), st.sampled_from([1, 2]), st.sampled_from([1, 4]))
def test_estimates_are_positive_integers(fields: dict[str, Any], tp: int, pp: int, dp: int) -> None:
    run = {"tensor_model_parallel_size": tp, "pipeline_model_parallel_size": pp}
    memory = megatron_memory(parse_megatron({**fields, **run}, base_dir=None), gpus=tp * pp * dp)
    figures = (memory.weights_and_optimizer_bytes, memory.activation_bytes)
    assert all(isinstance(n, int) and n > 0 for n in figures)
    assert all(isinstance(n, int) and n > 0 for _, n in memory.breakdown)


def test_records_round_trip_through_pickle() -> None:
    args = parsed(num_experts=4, moe_layer_freq="[0]+[1]*3")
    memory = megatron_memory(args, gpus=2)
    assert pickle.loads(pickle.dumps(args)) == args
    assert pickle.loads(pickle.dumps(memory)) == memory


def test_fields_from_megatrons_parsed_arguments() -> None:
    # what megatron's parse_args + validate_args leave for a slime run (abridged)
    namespace = argparse.Namespace(
        **dict.fromkeys(MEGATRON_FIELDS),
        add_bias_linear=False,
        lr=1e-6,  # an argument the estimator does not read
    )
    namespace.__dict__.update(
        {k: v for k, v in CASES[2].values[1].items() if k != "disable_bias_linear"},
        num_layers_per_virtual_pipeline_stage=None,
        rollout_batch_size=32,
    )
    fields = megatron_fields_from_namespace(namespace)
    assert fields == CASES[2].values[1]
    memory = megatron_memory(parse_megatron(fields, base_dir=None), gpus=CASES[2].values[0])
    assert memory.weights_and_optimizer_bytes == pytest.approx(CASES[2].values[2], abs=1)


def test_fields_from_arguments_keep_the_written_virtual_pipeline_field() -> None:
    namespace = argparse.Namespace(
        **{**SMALL, "pipeline_model_parallel_size": 2},
        num_layers_per_virtual_pipeline_stage=1,
        virtual_pipeline_model_parallel_size=2,  # validate_args derived it
    )
    fields = megatron_fields_from_namespace(namespace)
    assert "virtual_pipeline_model_parallel_size" not in fields
    assert parse_megatron(fields, base_dir=None).virtual_pipeline_model_parallel_size == 2
