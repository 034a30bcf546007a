"""The memory: section's rules: each error names its path, the value and what was expected."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from placement_core import ConfigError, load_config
from placement_core._inventory import Accelerator
from placement_core._memory import parse_headroom
from placement_core._memory_config import DEFAULT_OVERHEAD_BYTES, load_memory
from placement_core._memory_gpus import gpu_capacity
from placement_core._memory_units import parse_bytes
from placement_core._problems import Issues

CLUSTER = {"num_nodes": 1, "component_placement": {"actor": "all", "rollout": "0-7:0-3"}}
MEGATRON = {
    "estimator": "megatron",
    "num_layers": 2,
    "hidden_size": 64,
    "num_attention_heads": 4,
    "vocab_size": 1000,
    "seq_length": 128,
}


def problems(memory: object) -> list[tuple[str, str]]:
    config = load_config({"cluster": CLUSTER})
    with pytest.raises(ConfigError) as raised:
        load_memory({"memory": memory}, config, base_dir=Path())
    return [(p.path, p.message) for p in raised.value.problems]


def loaded(memory: dict[str, Any]) -> Any:
    config = load_config({"cluster": CLUSTER})
    return load_memory({"memory": memory}, config, base_dir=Path())


def test_no_section_is_none() -> None:
    assert (
        load_memory({"cluster": CLUSTER}, load_config({"cluster": CLUSTER}), base_dir=Path())
        is None
    )


def test_a_good_section_loads_with_the_default_overhead() -> None:
    spec = loaded(
        {"actor": MEGATRON, "rollout": {"estimator": "sglang", "mem_fraction_static": 0.7}}
    )
    assert list(spec.components) == ["actor", "rollout"]
    assert spec.components["rollout"].entry.overhead_bytes == DEFAULT_OVERHEAD_BYTES
    assert spec.components["actor"].trainer.tensor_model_parallel_size == 1


def test_the_section_must_be_a_mapping() -> None:
    assert problems([1, 2]) == [
        ("memory", "expected a mapping of component name to its memory entry")
    ]


def test_an_unknown_component_is_named() -> None:
    [(path, message)] = problems({"rollot": {"estimator": "fixed", "bytes": 1}})
    assert path == "memory.rollot"
    assert message == "unknown component; components: actor, rollout (did you mean 'rollout'?)"


def test_an_unknown_estimator_lists_the_choices() -> None:
    [(path, message)] = problems({"actor": {"estimator": "deepspeed"}})
    assert path == "memory.actor.estimator"
    assert message == "expected one of 'megatron', 'zero3', 'sglang', 'vllm' or 'fixed'"


def test_the_estimator_is_required() -> None:
    assert ("memory.actor.estimator", "required key is missing") in problems({"actor": {}})


@pytest.mark.parametrize(
    ("estimator", "key"),
    [("sglang", "mem_fraction_static"), ("vllm", "gpu_memory_utilization"), ("fixed", "bytes")],
)
def test_each_simple_estimator_needs_its_key(estimator: str, key: str) -> None:
    assert problems({"rollout": {"estimator": estimator}}) == [
        (f"memory.rollout.{key}", f"required key is missing: estimator {estimator} needs {key}")
    ]


def test_a_key_of_another_estimator_is_an_error() -> None:
    assert problems(
        {
            "rollout": {
                "estimator": "vllm",
                "gpu_memory_utilization": 0.5,
                "mem_fraction_static": 0.7,
            }
        }
    ) == [
        (
            "memory.rollout.mem_fraction_static",
            "mem_fraction_static belongs to estimator sglang, not to this entry's vllm",
        )
    ]


def test_a_trainer_field_on_a_rollout_engine_is_an_error() -> None:
    assert problems(
        {"rollout": {"estimator": "sglang", "mem_fraction_static": 0.7, "num_layers": 2}}
    ) == [
        (
            "memory.rollout.num_layers",
            "num_layers is a field of estimators megatron and zero3, not of this entry's sglang",
        )
    ]


@pytest.mark.parametrize("fraction", [0, 1.5, "0.7", True])
def test_a_fraction_is_in_0_1(fraction: object) -> None:
    assert problems({"rollout": {"estimator": "sglang", "mem_fraction_static": fraction}}) == [
        (
            "memory.rollout.mem_fraction_static",
            "expected a fraction of the GPU's memory, a number > 0 and <= 1",
        )
    ]


def test_offload_is_a_boolean() -> None:
    assert problems({"rollout": {"estimator": "fixed", "bytes": 1, "offload": "yes"}}) == [
        ("memory.rollout.offload", "expected true or false")
    ]


def test_a_megatron_field_error_has_its_path() -> None:
    found = problems({"actor": {**MEGATRON, "tensor_model_parallel_size": 0}})
    assert [path for path, _ in found] == ["memory.actor.tensor_model_parallel_size"]


def test_an_unknown_key_is_reported_with_a_suggestion() -> None:
    [(path, message)] = problems({"actor": {**MEGATRON, "num_layer": 2}})
    assert path == "memory.actor.num_layer"
    assert message.startswith("unknown key; allowed keys: estimator, offload")
    assert message.endswith("(did you mean 'num_layers'?)")


def test_every_problem_is_reported_together() -> None:
    found = problems(
        {
            "actor": {"estimator": "fixed"},
            "rollout": {"estimator": "sglang", "mem_fraction_static": 2},
            "critic": {"estimator": "fixed", "bytes": 1},
        }
    )
    assert [path for path, _ in found] == [
        "memory.actor.bytes",
        "memory.rollout.mem_fraction_static",
        "memory.critic",
    ]


def test_phases_name_components_with_entries() -> None:
    found = problems(
        {
            "actor": {"estimator": "fixed", "bytes": 1},
            "phases": {"both": ["actor", "rollout"], "none": []},
        }
    )
    assert found == [
        ("memory.phases.both", "'rollout' has no entry in memory: (entries: actor)"),
        ("memory.phases.none", "expected a non-empty list of component names"),
    ]


def test_phases_load_in_order() -> None:
    spec = loaded(
        {
            "actor": {"estimator": "fixed", "bytes": 1},
            "rollout": {"estimator": "fixed", "bytes": 1},
            "phases": {"both": ["actor", "rollout"]},
        }
    )
    assert spec.phases == (("both", ("actor", "rollout")),)


@pytest.mark.parametrize(
    ("text", "size"),
    [
        (0, 0),
        (1024, 1024),
        ("80GiB", 80 << 30),
        ("1.5 TB", 1_500_000_000_000),
        ("512mib", 512 << 20),
    ],
)
def test_byte_sizes(text: object, size: int) -> None:
    assert parse_bytes(text) == size


@pytest.mark.parametrize("text", ["-1", -1, "80 GiBs", "lots", 1.5, True, "2EiB"])
def test_bad_byte_sizes(text: object) -> None:
    with pytest.raises(Issues, match="expected a byte count"):
        parse_bytes(text)


def test_bytes_of_a_fixed_entry_accept_sizes() -> None:
    spec = loaded({"rollout": {"estimator": "fixed", "bytes": "20GiB"}})
    assert spec.components["rollout"].entry.bytes == 20 << 30


def test_headroom_percent_and_bytes() -> None:
    assert parse_headroom("10%").usable(1000) == 900
    assert parse_headroom("4GiB").usable(10 << 30) == 6 << 30


@pytest.mark.parametrize(
    ("model", "gib"),
    [
        ("NVIDIA H100 80GB HBM3", 79.6),
        ("NVIDIA H200", 140.4),
        ("NVIDIA GB200", 186.0),
        ("NVIDIA B200", 180.0),
        ("NVIDIA A100-SXM4-40GB", 40.0),
        ("NVIDIA A100-SXM4-80GB", 80.0),
        ("NVIDIA L40S", 45.0),
        ("AMD Instinct MI300X", 192.0),
        ("Ascend910B", 64.0),
    ],
)
def test_the_table_of_gpu_models(model: str, gib: float) -> None:
    size = gpu_capacity(Accelerator(index=0, model=model))
    assert size is not None
    assert round(size / (1 << 30), 1) == gib


def test_an_unknown_model_has_no_capacity() -> None:
    assert gpu_capacity(Accelerator(index=0, model="Mystery-9000")) is None
    assert gpu_capacity(Accelerator(index=0)) is None


def test_inventory_entries_take_memory_sizes() -> None:
    config = load_config(
        {
            "cluster": {
                **CLUSTER,
                "inventory": [
                    {
                        "node_ranks": 0,
                        "accelerators": {"count": 8, "memory_bytes": "80GiB"},
                        "host_memory_bytes": "1TiB",
                    }
                ],
            }
        }
    )
    assert config.inventory[0].accelerators.memory_bytes == 80 << 30
    assert config.inventory[0].host_memory_bytes == 1 << 40


def test_inventory_memory_sizes_are_checked() -> None:
    with pytest.raises(ConfigError) as raised:
        load_config(
            {
                "cluster": {
                    **CLUSTER,
                    "inventory": [
                        {"node_ranks": 0, "accelerators": {"count": 8}, "host_memory_bytes": "big"}
                    ],
                }
            }
        )
    [problem] = raised.value.problems
    assert problem.path == "cluster.inventory[0].host_memory_bytes"
    assert problem.message.startswith("expected a byte count")
