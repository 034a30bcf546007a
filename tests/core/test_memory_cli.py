"""Will it fit, through the `placement` command: refusals, fits, hosts, headroom, JSON."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from placement_core._cli import main

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
QWEN = EXAMPLES / "memory_qwen7b_sglang.yaml"
GIB = 1 << 30

Run = Callable[..., tuple[int, str, str]]


@pytest.fixture
def run(capsys: pytest.CaptureFixture[str]) -> Run:
    """Run the CLI in-process; return (exit status, stdout, stderr)."""

    def invoke(*argv: str) -> tuple[int, str, str]:
        try:
            status = main(list(argv))
        except SystemExit as exit_:
            status = exit_.code if isinstance(exit_.code, int) else 1
        captured = capsys.readouterr()
        assert "Traceback" not in captured.err
        return status, captured.out, captured.err

    return invoke


def qwen(**changes: Any) -> dict[str, Any]:
    """The worked example's document, with ``memory.<component>.<key>`` changes."""
    document: dict[str, Any] = yaml.safe_load(QWEN.read_text(encoding="utf-8"))
    for path, value in changes.items():
        component, key = path.split("__")
        if value is None:
            document["memory"][component].pop(key, None)
        else:
            document["memory"][component][key] = value
    return document


@pytest.fixture
def write(tmp_path: Path) -> Callable[[dict[str, Any]], str]:
    def save(document: dict[str, Any]) -> str:
        path = tmp_path / "job.yaml"
        path.write_text(yaml.safe_dump(document, sort_keys=False), encoding="utf-8")
        return str(path)

    return save


def test_the_worked_example_fits_offloaded(run: Run) -> None:
    status, out, err = run("validate", str(QWEN))
    assert status == 0, err
    assert "memory: fits: peak 57.8 GiB of 79.6 GiB (node 0, GPU 0, phase rollout)" in out


def test_the_worked_example_is_refused_without_offload(run: Run, write: Any) -> None:
    path = write(qwen(actor__offload=None, rollout__offload=None))
    status, _, err = run("validate", path)
    assert status == 1
    assert "memory: will not fit: 8 GPUs over capacity" in err
    assert "node 0, GPUs 0-7 (8 GPUs alike), phase actor: 98.3 GiB > 79.6 GiB capacity" in err
    assert "weights and optimizer 31.9 GiB, activations 8.7 GiB, other 1.0 GiB" in err
    assert "rollout 56.8 GiB resident" in err
    assert "offload rollout while actor runs (memory.rollout.offload: true)" in err
    assert "a lower mem_fraction_static for rollout" in err


def test_plan_refuses_with_exit_1_but_still_prints_the_plan(run: Run, write: Any) -> None:
    path = write(qwen(actor__offload=None, rollout__offload=None))
    status, out, err = run("plan", path)
    assert status == 1
    assert "memory: WILL NOT FIT" in out
    assert "will not fit" in err


def test_suggests_the_distributed_optimizer_when_it_is_off(run: Run, write: Any) -> None:
    path = write(qwen(actor__use_distributed_optimizer=False, rollout__offload=None))
    status, _, err = run("validate", path)
    assert status == 1
    assert (
        "the distributed optimizer for actor (memory.actor.use_distributed_optimizer: true)" in err
    )


def test_only_one_side_offloaded_still_refuses_in_the_other_phase(run: Run, write: Any) -> None:
    path = write(qwen(actor__offload=None))
    status, _, err = run("validate", path)
    assert status == 1
    assert "phase rollout" in err
    assert "phase actor:" not in err  # the rollout is offloaded while the actor trains


def test_headroom_in_percent_refuses_a_tight_fit(run: Run) -> None:
    status, _, err = run("validate", str(QWEN), "--memory-headroom", "30%")
    assert status == 1
    assert "57.8 GiB > 55.8 GiB usable of 79.6 GiB capacity" in err


def test_headroom_in_bytes_that_leaves_room_fits(run: Run) -> None:
    status, _, _ = run("validate", str(QWEN), "--memory-headroom", "4GiB")
    assert status == 0


@pytest.mark.parametrize("bad", ["ten", "100%", "-3%", "4 parsecs"])
def test_a_bad_headroom_is_a_usage_error(run: Run, bad: str) -> None:
    status, _, err = run("validate", str(QWEN), f"--memory-headroom={bad}")
    assert status == 2
    assert "--memory-headroom" in err
    assert "expected a percentage of each GPU's memory such as '10%'" in err


def test_host_shortfall_is_refused(run: Run, write: Any) -> None:
    document = qwen()
    document["cluster"]["inventory"][0]["host_memory_bytes"] = "128GiB"
    status, _, err = run("validate", write(document))
    assert status == 1
    assert "memory: will not fit: 1 host over capacity" in err
    assert "node 0 host memory: 255.3 GiB > 128.0 GiB capacity (actor 255.3 GiB)" in err


def test_unknown_host_memory_is_a_note_not_a_refusal(run: Run, write: Any) -> None:
    document = qwen()
    del document["cluster"]["inventory"][0]["host_memory_bytes"]
    status, _, err = run("validate", write(document))
    assert status == 0
    assert "host memory of node 0 unknown: host use not checked" in err


def test_unknown_gpu_capacity_is_an_error_naming_what_to_give(run: Run, write: Any) -> None:
    document = qwen()
    document["cluster"]["inventory"][0]["accelerators"]["model"] = "Mystery-9000"
    status, _, err = run("validate", write(document))
    assert status == 1
    assert "the capacity of node 0's accelerator 0 is unknown" in err
    assert "give inventory accelerators memory_bytes" in err


def test_declared_memory_bytes_beats_the_model_table(run: Run, write: Any) -> None:
    document = qwen()
    document["cluster"]["inventory"][0]["accelerators"]["memory_bytes"] = "40GiB"
    status, _, err = run("validate", write(document))
    assert status == 1
    assert "> 40.0 GiB capacity" in err


def test_declared_phases_make_components_active_together(run: Run, write: Any) -> None:
    document = qwen()
    document["memory"]["phases"] = {"async": ["actor", "rollout"]}
    status, _, err = run("validate", write(document))
    assert status == 1
    assert "phase async: 98.3 GiB" in err
    assert "actor 41.6 GiB active" in err
    assert "rollout 56.8 GiB active" in err


def test_components_on_separate_gpus_run_at_once_and_fit(run: Run, write: Any) -> None:
    document = qwen(actor__offload=None, rollout__offload=None)
    document["cluster"]["num_nodes"] = 2
    document["cluster"]["component_placement"] = {"actor": "0-7", "rollout": "8-15:0-3"}
    document["cluster"]["inventory"][0]["node_ranks"] = "0-1"
    status, out, err = run("validate", write(document))
    assert status == 0, err
    assert "memory: fits: peak 56.8 GiB of 79.6 GiB (node 1, GPU 0, phase rollout)" in out


def test_a_component_without_an_entry_is_noted(run: Run, write: Any) -> None:
    document = qwen()
    document["cluster"]["component_placement"]["reward"] = "0-7"
    status, _, err = run("validate", write(document))
    assert status == 0
    assert "memory: reward has no entry: not counted" in err


def test_json_contract(run: Run) -> None:
    status, out, _ = run("plan", str(QWEN), "--format", "json")
    assert status == 0
    memory = json.loads(out)["memory"]
    assert set(memory) == {"fits", "gpus", "hosts"}
    assert memory["fits"] is True
    assert len(memory["gpus"]) == 8
    gpu = memory["gpus"][0]
    assert set(gpu) == {"node_rank", "accelerator", "capacity_bytes", "fits", "phases"}
    assert (gpu["node_rank"], gpu["accelerator"], gpu["capacity_bytes"]) == (0, 0, 81_559 << 20)
    assert set(gpu["phases"]) == {"actor", "rollout"}
    phase = gpu["phases"]["actor"]
    assert set(phase) == {"total_bytes", "fits", "components"}
    actor = phase["components"]["actor"]
    assert set(actor) == {"active", "bytes", "weights_and_optimizer", "activations", "other"}
    assert actor["active"] is True
    assert actor["bytes"] == actor["weights_and_optimizer"] + actor["activations"] + GIB
    assert actor["other"] == GIB
    rollout = phase["components"]["rollout"]
    assert (rollout["active"], rollout["bytes"], rollout["other"]) == (False, GIB, GIB)
    assert phase["total_bytes"] == actor["bytes"] + rollout["bytes"]
    host = memory["hosts"][0]
    assert set(host) == {"node_rank", "capacity_bytes", "total_bytes", "fits", "components"}
    assert host["capacity_bytes"] == 2 << 40
    assert host["components"]["actor"]["bytes"] == 8 * actor["weights_and_optimizer"]


def test_json_trainer_figures_are_the_estimators_own(run: Run) -> None:
    from placement_core._memory_megatron import megatron_memory, parse_megatron

    fields = {
        k: v for k, v in qwen()["memory"]["actor"].items() if k not in {"estimator", "offload"}
    }
    expected = megatron_memory(parse_megatron(fields, base_dir=None), gpus=8)
    _, out, _ = run("plan", str(QWEN), "--format", "json")
    actor = json.loads(out)["memory"]["gpus"][0]["phases"]["actor"]["components"]["actor"]
    assert actor["weights_and_optimizer"] == expected.weights_and_optimizer_bytes
    assert actor["activations"] == expected.activation_bytes


def test_overhead_is_overridable_and_reported_apart(run: Run, write: Any) -> None:
    path = write(qwen(actor__overhead_bytes="2GiB"))
    _, out, _ = run("plan", path, "--format", "json")
    actor = json.loads(out)["memory"]["gpus"][0]["phases"]["actor"]["components"]["actor"]
    assert actor["other"] == 2 * GIB


@pytest.mark.parametrize("fmt", ["svg", "html"])
def test_pictures_draw_a_bar_per_phase_with_bytes_on_hover(run: Run, fmt: str) -> None:
    status, out, _ = run("plan", str(QWEN), "--format", fmt)
    assert status == 0
    assert "MEMORY: fits" in out
    assert out.count('class="tip memseg"') == 4  # 2 phases x 2 components
    assert "phase rollout: rollout active 56.8 GiB" in out


def test_the_table_shows_each_gpus_peak_against_capacity(run: Run) -> None:
    _, out, _ = run("plan", str(QWEN))
    assert "memory: fits (1 kind of GPU)" in out
    assert "0      0-7   57.8 GiB  79.6 GiB  rollout" in out


def test_a_broken_memory_section_is_checked_even_without_an_inventory(run: Run, write: Any) -> None:
    document = qwen(rollout__mem_fraction_static=1.5)
    del document["cluster"]["inventory"]
    status, _, err = run("validate", write(document))
    assert status == 1
    assert "memory.rollout.mem_fraction_static" in err
    assert "expected a fraction of the GPU's memory, a number > 0 and <= 1" in err


def test_snapshots_give_gpu_and_host_memory(run: Run, write: Any, tmp_path: Path) -> None:
    document = qwen()
    del document["cluster"]["inventory"]
    gpus = [{"index": i, "type": "nvidia", "memory_bytes": 80 << 30} for i in range(8)]
    snapshot = {"schema": 1, "accelerators": gpus, "host_memory_bytes": 64 << 30}
    (tmp_path / "node0.json").write_text(json.dumps(snapshot), encoding="utf-8")
    status, _, err = run("validate", write(document), "-i", str(tmp_path / "node0.json"))
    assert status == 1
    assert "node 0 host memory: 255.3 GiB > 64.0 GiB capacity" in err


def test_a_report_and_a_refusal_pickle() -> None:
    import pickle

    from placement_core import DoesNotFitError, check_memory, plan, require_fit

    document = qwen(actor__offload=None, rollout__offload=None)
    report = check_memory(plan(document), document["memory"], base_dir=EXAMPLES)
    assert pickle.loads(pickle.dumps(report)).to_dict() == report.to_dict()
    with pytest.raises(DoesNotFitError) as refused:
        require_fit(report)
    again = pickle.loads(pickle.dumps(refused.value))
    assert (str(again), again.path) == (str(refused.value), "memory")
