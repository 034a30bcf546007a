"""``examples/cluster/slurm_submit.sh``: ``sbatch --segment=N slurm_ray.sh`` where sbatch
has the option (Slurm 24.05+, topology/block), N from SEGMENT or from the nodes'
snapshots; SEGMENT passed on to the job; nothing submitted where sbatch lacks the option.

A fake ``sbatch`` records its arguments: its ``--help`` lists ``--segment`` as Slurm
24.05's does, or not, as Debian's 22.05 (tests/slurm runs the real one)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from .test_slurm_segments import rack
from .test_snapshot_fabric import OTHER

REPO = Path(__file__).resolve().parents[2]
SUBMIT = REPO / "examples" / "cluster" / "slurm_submit.sh"
FAKE_SBATCH = """#!/usr/bin/env bash
case "$1" in
--help) printf '%s\\n' "Usage: sbatch [OPTIONS(0)...] script" "      --nodes=N" {segment}; exit 0 ;;
--version) echo "slurm {version}"; exit 0 ;;
esac
printf '%s\\n' "SEGMENT=${{SEGMENT:-}}" "$@" >"$(dirname "$0")/submitted"
echo "Submitted batch job 42"
"""


def fake_sbatch(tmp_path: Path, *, segment: bool) -> Path:
    line = '"      --segment=<segment_size>"' if segment else ""
    path = tmp_path / "bin" / "sbatch"
    path.parent.mkdir()
    version = "24.11.1" if segment else "22.05.8"
    path.write_text(FAKE_SBATCH.format(segment=line, version=version))
    path.chmod(0o755)
    return path


def submit(
    tmp_path: Path, *words: str, segment: bool = True, **settings: str
) -> subprocess.CompletedProcess[str]:
    bash = shutil.which("bash")
    if bash is None:
        pytest.skip("needs bash")
    sbatch = fake_sbatch(tmp_path, segment=segment)
    path = f"{sbatch.parent}{os.pathsep}{Path(sys.executable).parent}{os.pathsep}"
    return subprocess.run(
        [bash, str(SUBMIT), *words],
        cwd=tmp_path,
        env={"PATH": path + os.environ["PATH"], **settings},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def submitted(tmp_path: Path) -> list[str]:
    return (tmp_path / "bin" / "submitted").read_text().splitlines()


def test_the_submit_script_is_executable() -> None:
    assert os.access(SUBMIT, os.X_OK)


def test_sbatch_gets_the_segment_before_the_batch_script(tmp_path: Path) -> None:
    done = submit(
        tmp_path, "--nodes=36", "-p", "gpu", "--", "job.yaml", "train.py", "--lr=1", SEGMENT="18"
    )
    assert done.returncode == 0, done.stderr
    assert submitted(tmp_path) == [
        "SEGMENT=18",  # passed on: the batch script checks the allocation
        "--nodes=36",
        "-p",
        "gpu",
        "--segment=18",
        str(REPO / "examples" / "cluster" / "slurm_ray.sh"),
        "job.yaml",
        "train.py",
        "--lr=1",
    ]
    assert "Submitted batch job 42" in done.stdout


def test_the_segment_comes_from_the_snapshots(tmp_path: Path) -> None:
    (tmp_path / "snapshots").mkdir()
    for i, data in enumerate(rack("a", 3) + rack("b", 3, OTHER, 2)):
        (tmp_path / "snapshots" / f"node{i}.json").write_text(json.dumps(data))
    done = submit(tmp_path, "-N", "6", "--", "job.yaml", "train.py", SNAPSHOTS="snapshots/*.json")
    assert done.returncode == 0, done.stderr
    assert "--segment=3" in submitted(tmp_path)


def test_an_sbatch_without_the_option_submits_nothing_and_says_why(tmp_path: Path) -> None:
    done = submit(tmp_path, "--nodes=2", "--", "job.yaml", "train.py", segment=False, SEGMENT="2")
    assert done.returncode == 1
    assert "slurm 22.05.8 has no --segment option (Slurm 24.05 and later" in done.stderr
    assert "nothing was submitted" in done.stderr
    assert not (tmp_path / "bin" / "submitted").exists()


def test_a_node_count_that_is_not_a_multiple_of_the_segment_is_refused(tmp_path: Path) -> None:
    done = submit(tmp_path, "--nodes=20", "--", "job.yaml", "train.py", SEGMENT="18")
    assert done.returncode == 1
    assert "--nodes=20 is not a multiple of the segment, 18 nodes: ask for 18 or 36" in done.stderr
    assert not (tmp_path / "bin" / "submitted").exists()


def test_a_job_within_one_segment_needs_no_multiple(tmp_path: Path) -> None:
    done = submit(tmp_path, "--nodes=4", "--", "job.yaml", "train.py", SEGMENT="18")
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize(
    ("words", "settings", "message"),
    [
        (["--", "job.yaml", "train.py"], {"SEGMENT": "x"}, "SEGMENT: 'x' is not a node count"),
        (["--", "job.yaml", "train.py"], {}, "set SEGMENT=<nodes per NVLink domain>"),
        (["--", "job.yaml", "train.py"], {"SNAPSHOTS": "none/*.json"}, "names no file"),
        (["--segment=4", "--", "job.yaml", "train.py"], {"SEGMENT": "4"}, "is set by SEGMENT"),
        (["job.yaml", "train.py"], {"SEGMENT": "4"}, "usage: SEGMENT=N slurm_submit.sh"),
    ],
)
def test_bad_settings_are_refused_before_sbatch(
    tmp_path: Path, words: list[str], settings: dict[str, str], message: str
) -> None:
    done = submit(tmp_path, *words, **settings)
    assert done.returncode == 1
    assert message in done.stderr
    assert not (tmp_path / "bin" / "submitted").exists()
