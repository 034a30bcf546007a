"""``estimator: zero3`` reproduces DeepSpeed's ``estimate_zero3_model_states_mem_needs``.

The reference figures were computed by running that function's source, unchanged, from
DeepSpeed's ``deepspeed/runtime/zero/stage3.py`` at commit
edaa7221267243c7be7fb49c5d5f5c4fb97b4641, with these arguments (``num_gpus_per_node``,
``num_nodes``, ``cpu_offload``, ``cpu_offload_params``, ``zero_init``,
``additional_buffer_factor``). The parameter counts are the checkpoints' published ones
(Qwen2.5-1.5B and -7B, Llama-3-8B, Mixtral-8x7B, Qwen3-30B-A3B, DeepSeek-V3 without its
MTP layer) and their embedding matrices as the largest layer.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from placement_core._memory_zero3 import ZERO3_FIELDS, Zero3Args, parse_zero3, zero3_memory
from placement_core._problems import Issues

HF = Path(__file__).parent / "data" / "hf"

# total, largest, GPUs per node, nodes, cpu_offload, cpu_offload_params, zero_init,
# additional_buffer_factor, DeepSpeed's GPU bytes per GPU, DeepSpeed's CPU bytes per node
CASES = [
    pytest.param(
        1543714304,
        233373696,
        8,
        1,
        True,
        True,
        True,
        1.5,
        933494784,
        41680286208,
        id="qwen2.5-1.5b defaults 1 node",
    ),
    pytest.param(
        7615616512,
        544997376,
        8,
        1,
        False,
        False,
        True,
        1.5,
        19315126656,
        26159874048,
        id="qwen2.5-7b no offload",
    ),
    pytest.param(
        7615616512,
        544997376,
        8,
        1,
        False,
        False,
        False,
        1.5,
        19315126656,
        365549592576,
        id="qwen2.5-7b no offload no zero_init",
    ),
    pytest.param(
        8030261248,
        525336576,
        8,
        2,
        True,
        False,
        True,
        1.5,
        3105128960,
        96363134976,
        id="llama-3-8b optimizer offload 2 nodes",
    ),
    pytest.param(
        8030261248,
        525336576,
        8,
        2,
        True,
        False,
        False,
        1.5,
        3105128960,
        385452539904,
        id="llama-3-8b optimizer offload no zero_init",
    ),
    pytest.param(
        46702792704,
        131072000,
        8,
        4,
        True,
        True,
        False,
        1.5,
        524288000,
        2241734049792,
        id="mixtral full offload no zero_init 4 nodes",
    ),
    pytest.param(
        30532122624,
        311164928,
        4,
        1,
        False,
        False,
        True,
        1.0,
        138639211520,
        4978638848,
        id="qwen3-30b-a3b no offload 4 gpus",
    ),
    pytest.param(
        671026419200,
        926679040,
        8,
        16,
        False,
        False,
        True,
        1.25,
        98069806360,
        37067161600,
        id="deepseek-v3 no offload 16 nodes",
    ),
    pytest.param(
        671026419200,
        926679040,
        8,
        2,
        True,
        True,
        True,
        1.5,
        3706716160,
        9058856659200,
        id="deepseek-v3 full offload 2 nodes",
    ),
]


@pytest.mark.parametrize(
    ("total", "largest", "per_node", "nodes", "offload", "offload_params", "zero_init"),
    [pytest.param(*case.values[:7], id=case.id) for case in CASES],
)
def test_fields_parse_into_deepspeeds_arguments(
    total: int,
    largest: int,
    per_node: int,
    nodes: int,
    offload: bool,
    offload_params: bool,
    zero_init: bool,
) -> None:
    fields = {
        "total_params": total,
        "largest_layer_params": largest,
        "cpu_offload": offload,
        "cpu_offload_params": offload_params,
        "zero_init": zero_init,
    }
    assert parse_zero3(fields, base_dir=None) == Zero3Args(
        total, largest, offload, offload_params, zero_init, 1.5
    )


@pytest.mark.parametrize(
    (
        "total",
        "largest",
        "per_node",
        "nodes",
        "offload",
        "offload_params",
        "zero_init",
        "factor",
        "gpu",
        "cpu",
    ),
    CASES,
)
def test_figures_equal_deepspeeds(
    total: int,
    largest: int,
    per_node: int,
    nodes: int,
    offload: bool,
    offload_params: bool,
    zero_init: bool,
    factor: float,
    gpu: int,
    cpu: int,
) -> None:
    args = Zero3Args(total, largest, offload, offload_params, zero_init, factor)
    memory = zero3_memory(args, gpus=per_node * nodes, gpus_per_node=per_node)
    assert memory.weights_and_optimizer_bytes == gpu
    assert memory.host_bytes_per_node == cpu
    assert memory.activation_bytes == 0
    assert sum(size for _, size in memory.breakdown) == memory.gpu_bytes


def test_defaults_are_deepspeeds() -> None:
    assert parse_zero3({"total_params": 10, "largest_layer_params": 2}, base_dir=None) == Zero3Args(
        10, 2, cpu_offload=True, cpu_offload_params=True, zero_init=True
    )
    assert {k: ZERO3_FIELDS[k] for k in ("cpu_offload", "zero_init")} == {
        "cpu_offload": True,
        "zero_init": True,
    }
    assert ZERO3_FIELDS["additional_buffer_factor"] == 1.5


def test_parameter_offload_follows_optimizer_offload_when_not_written() -> None:
    args = parse_zero3(
        {"total_params": 10, "largest_layer_params": 2, "cpu_offload": False}, base_dir=None
    )
    assert (args.cpu_offload, args.cpu_offload_params) == (False, False)


def test_breakdown_names_the_gathered_layer_and_the_shard() -> None:
    args = Zero3Args(8_000, 100, cpu_offload=False, cpu_offload_params=False)
    memory = zero3_memory(args, gpus=8, gpus_per_node=8)
    assert memory.breakdown == (("largest_layer", 400), ("model_states_shard", 18_000))


@pytest.mark.parametrize(
    ("name", "total", "largest"),
    [
        # the published counts less what Megatron's count leaves out: Qwen2's q/k/v
        # biases, Qwen3's q/k norms, DeepSeek-V3's router score-correction biases
        ("qwen2.5-1.5b", 1_543_714_304 - 28 * (1536 + 2 * 256), 151_936 * 1536),
        ("qwen2.5-7b", 7_615_616_512 - 28 * (3584 + 2 * 512), 152_064 * 3584),
        ("llama-3-8b", 8_030_261_248, 128_256 * 4096),
        ("qwen3-30b-a3b", 30_532_122_624 - 48 * 2 * 128, 151_936 * 2048),
        ("mixtral-8x7b", 46_702_792_704, 32_000 * 4096),
        ("deepseek-v3", 671_026_419_200 - 58 * 256, 129_280 * 7168),
    ],
)
def test_counts_derive_from_hf_config(name: str, total: int, largest: int) -> None:
    args = parse_zero3({"hf_config": f"{name}.json"}, base_dir=HF)
    assert (args.total_params, args.largest_layer_params) == (total, largest)


def test_counts_derive_from_megatron_style_sizes() -> None:
    fields: dict[str, Any] = {
        "num_layers": 2,
        "hidden_size": 8,
        "ffn_hidden_size": 32,
        "num_attention_heads": 2,
        "vocab_size": 10,
        "untie_embeddings_and_output_weights": True,
    }
    args = parse_zero3(fields, base_dir=None)
    # per layer: attention 4 x 8 x 8, MLP 2 x 8 x 32, two LayerNorms 2 x 2 x 8;
    # final LayerNorm 2 x 8; embedding and output layer 2 x 10 x 8
    assert args.total_params == 2 * (256 + 512 + 32) + 16 + 160
    assert args.largest_layer_params == 8 * 32


def test_written_count_wins_over_the_derived_one() -> None:
    args = parse_zero3({"hf_config": "llama-3-8b.json", "total_params": 5}, base_dir=HF)
    assert (args.total_params, args.largest_layer_params) == (5, 128_256 * 4096)


def test_error_names_what_a_count_needs() -> None:
    with pytest.raises(Issues) as caught:
        parse_zero3({"total_params": 10}, base_dir=None)
    suffixes = {suffix for suffix, _, _ in caught.value.issues}
    assert {".num_layers", ".hidden_size", ".num_attention_heads", ".vocab_size"} <= suffixes
    assert all("largest_layer_params" in message for _, message, _ in caught.value.issues)


def test_model_sizes_beside_both_counts_are_refused() -> None:
    with pytest.raises(Issues) as caught:
        parse_zero3({"total_params": 10, "largest_layer_params": 2, "num_layers": 4}, base_dir=None)
    assert caught.value.issues == (
        (".num_layers", "total_params and largest_layer_params are written: no model needed", 4),
    )


def test_parameter_offload_without_optimizer_offload_is_refused() -> None:
    with pytest.raises(Issues) as caught:
        parse_zero3(
            {
                "total_params": 10,
                "largest_layer_params": 2,
                "cpu_offload": False,
                "cpu_offload_params": True,
            },
            base_dir=None,
        )
    assert caught.value.issues == (
        (
            ".cpu_offload_params",
            "offloading parameters needs cpu_offload: true (DeepSpeed's estimate)",
            True,
        ),
    )


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("total_params", 0, "expected a positive integer"),
        ("largest_layer_params", 1.5, "expected a positive integer"),
        ("zero_init", "yes", "expected true or false"),
        ("additional_buffer_factor", 0, "expected a positive number"),
        ("cpu_offload", 1, "expected true or false"),
    ],
)
def test_bad_values_name_the_field(field: str, value: object, message: str) -> None:
    fields: dict[str, object] = {"total_params": 10, "largest_layer_params": 2, field: value}
    with pytest.raises(Issues) as caught:
        parse_zero3(fields, base_dir=None)
    assert caught.value.issues == ((f".{field}", message, value),)


def test_unknown_field_gets_a_suggestion() -> None:
    with pytest.raises(Issues) as caught:
        parse_zero3({"total_param": 10}, base_dir=None)
    assert caught.value.issues[0] == (
        ".total_param",
        "not a field of the zero3 estimator (did you mean 'total_params'?)",
        None,
    )


@pytest.mark.parametrize(("gpus", "per_node"), [(12, 8), (4, 8), (0, 8)])
def test_gpus_must_be_whole_nodes(gpus: int, per_node: int) -> None:
    args = Zero3Args(10, 2)
    with pytest.raises(Issues) as caught:
        zero3_memory(args, gpus=gpus, gpus_per_node=per_node)
    assert caught.value.issues == (
        ("", f"expected a whole number of nodes of {per_node} GPUs each", gpus),
    )


@st.composite
def zero3_args(draw: st.DrawFn) -> Zero3Args:
    offload = draw(st.booleans())
    return Zero3Args(
        total_params=draw(st.integers(10**6, 10**12)),
        largest_layer_params=draw(st.integers(1, 10**9)),
        cpu_offload=offload,
        cpu_offload_params=offload and draw(st.booleans()),
        zero_init=draw(st.booleans()),
        additional_buffer_factor=draw(st.sampled_from([1.0, 1.25, 1.5, 2.0])),
    )


@given(zero3_args(), st.sampled_from([1, 4, 8]), st.integers(1, 16))
def test_estimates_are_positive_integers(args: Zero3Args, per_node: int, nodes: int) -> None:
    memory = zero3_memory(args, gpus=per_node * nodes, gpus_per_node=per_node)
    figures = (memory.weights_and_optimizer_bytes, memory.host_bytes_per_node)
    assert all(isinstance(n, int) and n > 0 for n in figures)


@given(zero3_args(), st.sampled_from([1, 4, 8]), st.integers(1, 16))
def test_offloading_never_raises_gpu_bytes(args: Zero3Args, per_node: int, nodes: int) -> None:
    def gpu(offload: bool, offload_params: bool) -> int:
        changed = replace(args, cpu_offload=offload, cpu_offload_params=offload_params)
        memory = zero3_memory(changed, gpus=per_node * nodes, gpus_per_node=per_node)
        return memory.weights_and_optimizer_bytes

    assert gpu(True, True) <= gpu(True, False) <= gpu(False, False)


@given(zero3_args(), st.sampled_from([1, 4, 8]), st.integers(1, 8))
def test_more_nodes_never_raise_gpu_bytes(args: Zero3Args, per_node: int, nodes: int) -> None:
    def gpu(count: int) -> int:
        memory = zero3_memory(args, gpus=per_node * count, gpus_per_node=per_node)
        return memory.weights_and_optimizer_bytes

    assert gpu(2 * nodes) <= gpu(nodes)
