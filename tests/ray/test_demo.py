"""The demo's configs plan as the demo expects (offline, no cluster needed)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import placement_ray.demo
from placement_core import plan
from placement_core._inventory import Inventory
from placement_ray.demo.run import GPUS_PER_NODE, NUM_NODES, Checks, _examples_dir, shown_path

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.mark.parametrize("name", ["demo_colocated_strided.yaml", "demo_heterogeneous.yaml"])
def test_the_demo_ships_its_configs_equal_to_the_repository_examples(name: str) -> None:
    # Inside the package, so ``python -m placement_ray.demo`` runs from any directory.
    packaged = _examples_dir() / name
    assert packaged.is_relative_to(Path(placement_ray.demo.__file__).parent)
    assert packaged.read_text() == (EXAMPLES / name).read_text()


def test_the_demo_finds_its_configs_from_any_directory(tmp_path: Path) -> None:
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            "from placement_ray.demo.run import _examples_dir, "
            "_missing_examples; raise SystemExit(_missing_examples(_examples_dir()))",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr


def test_colocated_strided_demo_puts_rollout_across_trainer_shards() -> None:
    result = plan(
        EXAMPLES / "demo_colocated_strided.yaml", Inventory.uniform(NUM_NODES, GPUS_PER_NODE)
    )
    rollout = result.components["rollout"]
    assert [(p.node_rank, p.hardware_ranks) for p in rollout[:4]] == [
        (0, (0, 2)),
        (0, (1, 3)),
        (0, (4, 6)),
        (0, (5, 7)),
    ]
    assert {p.node_rank for p in rollout[4:]} == {1}
    assert len(result.components["actor"]) == 16


def test_heterogeneous_demo_has_group_env_robots_and_agents() -> None:
    result = plan(EXAMPLES / "demo_heterogeneous.yaml", Inventory.uniform(NUM_NODES, GPUS_PER_NODE))
    assert result.env("actor", 1)["DEMO_GROUP"] == "train"
    assert result.env("rollout", 3)["DEMO_GROUP"] == "infer"
    assert [p.hardware_type for p in result.components["env"]] == ["Franka", "Franka"]
    assert "DEMO_GROUP" not in result.env("agent", 0)
    assert {p.node_rank for p in result.components["agent"]} == {3}


def test_checks_record_each_mismatch() -> None:
    checks = Checks()
    assert checks.expect("rank", "1", "1") == "ok"
    assert checks.expect("gpus", "0,1", "0,2") == "MISMATCH"
    assert checks.checked == 2
    assert checks.problems == ["gpus: reported '0,1', planned '0,2'"]


def test_demo_shows_paths_inside_the_working_directory_relative(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert shown_path(str(tmp_path / ".nox" / "demo" / "bin" / "python")) == (
        "./.nox/demo/bin/python"
    )


def test_demo_masks_paths_elsewhere(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "work").mkdir()
    monkeypatch.chdir(tmp_path / "work")
    monkeypatch.setattr(sys, "prefix", str(tmp_path / "venv"))
    assert shown_path(str(tmp_path / "venv" / "bin" / "python")) == "<sys.prefix>/bin/python"
    assert shown_path("/opt/somewhere/bin/python3") == ".../python3"
