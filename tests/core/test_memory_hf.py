"""``hf_config``: a local HuggingFace config.json read as Megatron's arguments.

The fixtures under data/hf/ carry the public checkpoints' config.json values.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from placement_core._memory_megatron import megatron_memory, parse_megatron
from placement_core._memory_model import GIB
from placement_core._problems import Issues

HF = Path(__file__).parent / "data" / "hf"

RUN = {"seq_length": 4096}

#: The worked example: Qwen2.5-7B, TP 2, distributed optimizer, sequence 4096, sequence
#: parallel + selective recompute, micro batch 1 (global batch unset: one microbatch,
#: which does not matter without pipeline parallelism), on 8 GPUs.
WORKED_EXAMPLE = {
    "hf_config": "qwen2.5-7b.json",
    "tensor_model_parallel_size": 2,
    "use_distributed_optimizer": True,
    "seq_length": 4096,
    "sequence_parallel": True,
    "recompute_granularity": "selective",
    "micro_batch_size": 1,
}


def test_worked_example_is_32_gib_of_weights_and_9_of_activations() -> None:
    memory = megatron_memory(parse_megatron(WORKED_EXAMPLE, base_dir=HF), gpus=8)
    assert memory.weights_and_optimizer_bytes / GIB == pytest.approx(31.92, abs=0.01)
    assert memory.activation_bytes / GIB == pytest.approx(8.69, abs=0.01)
    # Megatron's own figures for these arguments (see test_memory_megatron.py)
    assert memory.weights_and_optimizer_bytes == 34_270_612_992
    assert memory.activation_bytes == 9_327_099_904


def _args(name: str, **fields: Any) -> Any:
    return parse_megatron({"hf_config": f"{name}.json", **RUN, **fields}, base_dir=HF)


def test_qwen2_dense_tied() -> None:
    args = _args("qwen2.5-1.5b")
    assert (args.num_layers, args.hidden_size, args.ffn_hidden_size) == (28, 1536, 8960)
    assert (args.num_attention_heads, args.num_query_groups, args.kv_channels) == (12, 2, 128)
    assert (args.vocab_size, args.padded_vocab_size) == (151_936, 151_936)
    assert not args.untie_embeddings_and_output_weights
    assert (args.swiglu, args.normalization, args.add_bias_linear) == (True, "RMSNorm", False)
    assert args.num_experts is None


def test_llama_untied() -> None:
    args = _args("llama-3-8b")
    assert args.untie_embeddings_and_output_weights
    assert (args.num_layers, args.num_query_groups, args.padded_vocab_size) == (32, 8, 128_256)


def test_qwen3_head_dim_is_kv_channels() -> None:
    assert _args("qwen3-8b").kv_channels == 128


def test_qwen3_moe_experts_and_head_dim() -> None:
    args = _args("qwen3-30b-a3b")
    assert (args.num_experts, args.moe_ffn_hidden_size, args.moe_router_topk) == (128, 768, 8)
    assert args.kv_channels == 128  # not hidden / heads (64)
    assert args.moe_layer_pattern == (1,) * 48


def test_qwen3_moe_dense_layers_follow_transformers(tmp_path: Path) -> None:
    config = json.loads((HF / "qwen3-30b-a3b.json").read_text())
    config.update(num_hidden_layers=6, decoder_sparse_step=2, mlp_only_layers=[3])
    (tmp_path / "config.json").write_text(json.dumps(config))
    args = parse_megatron({"hf_config": "config.json", **RUN}, base_dir=tmp_path)
    # sparse where (i + 1) % 2 == 0 and i is not listed in mlp_only_layers
    assert args.moe_layer_pattern == (0, 1, 0, 0, 0, 1)


def test_mixtral_experts() -> None:
    args = _args("mixtral-8x7b")
    assert (args.num_experts, args.moe_ffn_hidden_size, args.moe_router_topk) == (8, 14336, 2)
    assert args.moe_layer_pattern == (1,) * 32


def test_deepseek_v3_latent_attention_shared_experts_and_mtp() -> None:
    args = _args("deepseek-v3")
    assert args.multi_latent_attention
    assert (args.q_lora_rank, args.kv_lora_rank) == (1536, 512)
    assert (args.qk_head_dim, args.qk_pos_emb_head_dim, args.v_head_dim) == (128, 64, 128)
    assert (args.num_experts, args.moe_ffn_hidden_size) == (256, 2048)
    assert args.moe_shared_expert_intermediate_size == 2048
    assert args.moe_layer_pattern == (0, 0, 0) + (1,) * 58
    assert args.mtp_num_layers == 1
    assert args.num_query_groups == args.num_attention_heads  # no grouped-query attention


@pytest.mark.parametrize(
    ("name", "fields", "gpus", "weights", "activations"),
    [
        # Megatron's figures for the same arguments written out (test_memory_megatron.py)
        pytest.param(
            "qwen3-30b-a3b",
            {
                "tensor_model_parallel_size": 4,
                "expert_model_parallel_size": 8,
                "expert_tensor_parallel_size": 1,
                "use_distributed_optimizer": True,
                "sequence_parallel": True,
                "recompute_granularity": "selective",
                "global_batch_size": 64,
            },
            32,
            35_577_314_304,
            3_653_246_976,
            id="qwen3-30b-a3b",
        ),
        pytest.param(
            "deepseek-v3",
            {
                "tensor_model_parallel_size": 2,
                "pipeline_model_parallel_size": 16,
                "decoder_first_pipeline_num_layers": 4,
                "decoder_last_pipeline_num_layers": 1,
                "expert_model_parallel_size": 64,
                "expert_tensor_parallel_size": 1,
                "use_distributed_optimizer": True,
                "sequence_parallel": True,
                "recompute_granularity": "selective",
                "global_batch_size": 8192,
            },
            1024,
            21_430_054_128,
            25_564_545_024,
            id="deepseek-v3",
        ),
    ],
)
def test_hf_config_gives_megatrons_figures(
    name: str, fields: dict[str, Any], gpus: int, weights: int, activations: int
) -> None:
    memory = megatron_memory(_args(name, **fields), gpus=gpus)
    assert memory.weights_and_optimizer_bytes == pytest.approx(weights, abs=1)
    assert memory.activation_bytes == pytest.approx(activations, abs=1)


def test_written_fields_override_the_file() -> None:
    args = _args("llama-3-8b", num_layers=4, untie_embeddings_and_output_weights=False)
    assert (args.num_layers, args.untie_embeddings_and_output_weights) == (4, False)
    assert args.hidden_size == 4096


def test_absolute_path_ignores_base_dir(tmp_path: Path) -> None:
    path = str(HF / "llama-3-8b.json")
    assert parse_megatron({"hf_config": path, **RUN}, base_dir=tmp_path).num_layers == 32


def _problem(fields: dict[str, Any], base_dir: Path) -> tuple[str, str, object]:
    with pytest.raises(Issues) as caught:
        parse_megatron({**RUN, **fields}, base_dir=base_dir)
    assert len(caught.value.issues) == 1
    return caught.value.issues[0]


def test_missing_file_names_the_path(tmp_path: Path) -> None:
    assert _problem({"hf_config": "nope.json"}, tmp_path) == (
        ".hf_config",
        f"no such file: {tmp_path / 'nope.json'}",
        "nope.json",
    )


def test_unknown_model_type_lists_the_supported(tmp_path: Path) -> None:
    (tmp_path / "c.json").write_text(json.dumps({"model_type": "gpt2"}))
    suffix, message, value = _problem({"hf_config": "c.json"}, tmp_path)
    assert (suffix, value) == (".hf_config", "c.json")
    assert message == (
        f"{tmp_path / 'c.json'}: model_type 'gpt2' is not supported; supported: "
        "llama, qwen2, qwen3, qwen3_moe, mixtral, deepseek_v3"
    )


def test_not_json(tmp_path: Path) -> None:
    (tmp_path / "c.json").write_text("{oops")
    _, message, _ = _problem({"hf_config": "c.json"}, tmp_path)
    assert message.startswith(f"{tmp_path / 'c.json'} is not JSON: ")


def test_not_an_object(tmp_path: Path) -> None:
    (tmp_path / "c.json").write_text("[1, 2]")
    assert _problem({"hf_config": "c.json"}, tmp_path)[1] == (
        f"{tmp_path / 'c.json'} is not a JSON object"
    )


def test_missing_size_is_named(tmp_path: Path) -> None:
    config = json.loads((HF / "llama-3-8b.json").read_text())
    del config["intermediate_size"]
    (tmp_path / "c.json").write_text(json.dumps(config))
    assert _problem({"hf_config": "c.json"}, tmp_path)[1] == (
        f"{tmp_path / 'c.json'}: llama config lacks 'intermediate_size'"
    )


def test_bad_size_is_named(tmp_path: Path) -> None:
    config = json.loads((HF / "llama-3-8b.json").read_text())
    config["hidden_size"] = "big"
    (tmp_path / "c.json").write_text(json.dumps(config))
    assert _problem({"hf_config": "c.json"}, tmp_path)[1] == (
        f"{tmp_path / 'c.json'}: llama config: hidden_size is 'big'; expected a positive integer"
    )


def test_non_swiglu_activation_is_refused(tmp_path: Path) -> None:
    config = json.loads((HF / "llama-3-8b.json").read_text())
    config["hidden_act"] = "gelu"
    (tmp_path / "c.json").write_text(json.dumps(config))
    assert _problem({"hf_config": "c.json"}, tmp_path)[1] == (
        f"{tmp_path / 'c.json'}: llama config: hidden_act is 'gelu'; "
        "only SwiGLU (silu) models are mapped"
    )


def test_bad_optional_value_in_the_file_is_named(tmp_path: Path) -> None:
    config = json.loads((HF / "deepseek-v3.json").read_text())
    config["q_lora_rank"] = "wide"
    (tmp_path / "c.json").write_text(json.dumps(config))
    assert _problem({"hf_config": "c.json"}, tmp_path) == (
        ".hf_config",
        "c.json: q_lora_rank from the file: expected a positive integer",
        "wide",
    )
