"""An RLinf job (--model-parallel) is checked from the keys RLinf itself sizes memory with."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from placement_core._cli import main

#: Qwen2.5-7B's Hugging Face config.json (the sizes RLinf's checkpoint converter reads).
QWEN25_7B = {
    "architectures": ["Qwen2ForCausalLM"],
    "model_type": "qwen2",
    "hidden_size": 3584,
    "intermediate_size": 18944,
    "num_attention_heads": 28,
    "num_hidden_layers": 28,
    "num_key_value_heads": 4,
    "vocab_size": 152064,
    "tie_word_embeddings": False,
    "max_position_embeddings": 32768,
    "rms_norm_eps": 1e-06,
}


def job(model: Path, *, offload: bool, backend: str = "sglang") -> dict[str, Any]:
    """A reasoning job shaped like RLinf's examples/reasoning/config/math/*-megatron.yaml."""
    return {
        "cluster": {
            "num_nodes": 1,
            "component_placement": {"actor,rollout,reward": "all"},
        },
        "runner": {"seq_length": 4096},
        "rollout": {
            "gpu_memory_utilization": 0.7,
            "rollout_backend": backend,
            "tensor_parallel_size": 2,
            "model": {"model_path": str(model)},
        },
        "actor": {
            "training_backend": "megatron",
            "offload_optimizer": offload,
            "offload_weight": offload,
            "offload_grad": offload,
            "model": {
                "tensor_model_parallel_size": 2,
                "sequence_parallel": True,
                "recompute_granularity": "selective",
                "seq_length": "${runner.seq_length}",
            },
            "optim": {"use_distributed_optimizer": True},
        },
    }


@pytest.fixture
def model(tmp_path: Path) -> Path:
    folder = tmp_path / "Qwen2.5-7B"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(QWEN25_7B), encoding="utf-8")
    return folder


def plan(
    tmp_path: Path, document: dict[str, Any], capsys: pytest.CaptureFixture[str], *extra: str
) -> tuple[int, str, str]:
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(document), encoding="utf-8")
    inventory = tmp_path / "node0.json"
    gpus = [{"index": i, "type": "nvidia", "memory_bytes": 81_559 << 20} for i in range(8)]
    inventory.write_text(json.dumps({"schema": 1, "accelerators": gpus}), encoding="utf-8")
    status = main(["plan", str(path), "--model-parallel", "-i", str(inventory), *extra])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def test_colocated_without_offloading_the_actor_is_refused(
    tmp_path: Path, model: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status, _, err = plan(tmp_path, job(model, offload=False), capsys)
    assert status == 1
    assert "phase rollout" in err
    assert "offload actor while rollout runs" in err
    assert "phase actor:" not in err  # RLinf releases a collocated rollout's memory


def test_rlinfs_offload_flags_make_it_fit(
    tmp_path: Path, model: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status, out, err = plan(tmp_path, job(model, offload=True), capsys, "-f", "json")
    assert status == 0, err
    memory = json.loads(out)["memory"]
    assert memory["fits"] is True
    phases = memory["gpus"][0]["phases"]
    assert phases["rollout"]["components"]["rollout"]["weights_and_optimizer"] == int(
        0.7 * (81_559 << 20)
    )
    assert phases["actor"]["components"]["actor"]["active"] is True
    assert "reward has no entry: not counted" in err


def test_vllm_backend_reads_the_same_fraction(
    tmp_path: Path, model: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    document = job(model, offload=True, backend="vllm")
    document["rollout"]["gpu_memory_utilization"] = 0.99
    status, _, err = plan(tmp_path, document, capsys)
    assert status == 1
    assert "a lower gpu_memory_utilization for rollout" in err


def test_a_model_not_on_this_machine_is_a_note(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status, _, err = plan(tmp_path, job(tmp_path / "absent", offload=False), capsys)
    assert status == 0
    assert "actor not estimated:" in err
    assert "(from rollout.model.model_path) is not on this machine" in err


def test_a_memory_section_takes_precedence(
    tmp_path: Path, model: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    document = job(model, offload=False)
    document["memory"] = {"rollout": {"estimator": "fixed", "bytes": "1GiB"}}
    status, _, err = plan(tmp_path, document, capsys)
    assert status == 0, err
    assert "actor, reward have no entry: not counted" in err
