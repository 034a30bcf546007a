"""examples/cluster/slurm_ray.sh submitted with sbatch to a real two-node SLURM cluster.

Each job runs the script as docs/guides/real-cluster.md says: from a shared submit
directory, in the job's environment, and with a stale ``~/.ray/auth_token`` in its home
(any earlier local ``ray.init()`` leaves one), which must not decide anything. The job
(``job.py``) launches workers through placement-ray and prints, per worker, the
``node-rank`` label and ``PLACEMENT_NODE_RANK`` its node gave it.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from .slurm_cluster import REPO, SlurmCluster, interfaces

HERE = Path(__file__).resolve().parent
SCRIPT = REPO / "examples" / "cluster" / "slurm_ray.sh"
SUBMIT = REPO / "examples" / "cluster" / "slurm_submit.sh"


@dataclass(frozen=True)
class Finished:
    status: int
    log: str
    job_dir: Path
    seconds: float


def submit(slurm: SlurmCluster, name: str, config: str, **settings: str) -> Finished:
    """sbatch the script on both nodes, wait for the job, return its status and log."""
    submit_dir = slurm.root / name
    home = submit_dir / "home"
    (home / ".ray").mkdir(parents=True)
    (home / ".ray" / "auth_token").write_text("a-stale-token-from-an-earlier-ray-init")
    for path in (HERE / config, HERE / "job.py"):
        shutil.copy(path, submit_dir)
    env = {
        **slurm.env,
        "HOME": str(home),
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        "RAY_USAGE_STATS_ENABLED": "0",
        "NODE_IFACE": "lo",
        "RAY_WAIT_S": "150",
        # Two Ray nodes on a loaded two-core machine: no dashboard, and time for each
        # node's agent to start (the raylet gives up after 30 s by default).
        "RAY_HEAD_ARGS": "--include-dashboard=false",
        "RAY_agent_register_timeout_ms": "180000",
        **settings,
    }
    # Ray's CLI joins no worker node with RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0; in this
    # namespace every address Ray can find is a loopback one anyway.
    for stale in (
        "RAY_ADDRESS",
        "RAY_AUTH_MODE",
        "RAY_AUTH_TOKEN",
        "RAY_AUTH_TOKEN_PATH",
        "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER",
    ):
        env.pop(stale, None)
    started = time.monotonic()
    done = subprocess.run(
        [
            "sbatch",
            "--wait",
            "--nodes=2",
            f"--output={submit_dir}/job.out",
            str(SCRIPT),
            config,
            "job.py",
        ],
        cwd=submit_dir,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    seconds = time.monotonic() - started
    log = (submit_dir / "job.out").read_text() if (submit_dir / "job.out").exists() else ""
    job_id = done.stdout.split()[-1] if done.stdout.split() else "?"
    return Finished(done.returncode, log, submit_dir / f"placement-{job_id}", seconds)


def worker_lines(log: str) -> list[str]:
    return sorted(line for line in log.splitlines() if line.startswith("worker "))


def assert_no_process_left(slurm: SlurmCluster) -> None:
    deadline = time.monotonic() + 30
    while (left := slurm.leftovers()) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert left == {}, f"processes left after the job: {left}"


def assert_clean_end(log: str) -> None:
    for word in ("CANCELLED", "Killed", "error", "Traceback"):
        assert word not in log, f"{word!r} in a successful job's log:\n{log}"
    assert log.rstrip().endswith("Ray stopped on 2 node(s)")


@pytest.fixture(scope="module")
def cpu_only(slurm: SlurmCluster) -> Finished:
    (slurm.root / "cpu").mkdir()
    return submit(slurm, "cpu", "cpu_only.yaml")


@pytest.fixture(scope="module")
def musa(slurm: SlurmCluster, cpu_only: Finished) -> Finished:
    (slurm.root / "musa").mkdir()
    # SEGMENT=2 on nodes without an NVLink domain: a split job, run on with a warning.
    return submit(
        slurm,
        "musa",
        "musa.yaml",
        RAY_AUTH="disabled",
        RAY_RESOURCES='{"MUSA": 2}',
        SEGMENT="2",
        SEGMENT_SPLIT="warn",
    )


def test_cpu_only_job_succeeds_with_token_auth(cpu_only: Finished) -> None:
    assert cpu_only.status == 0, cpu_only.log


def test_cpu_only_workers_see_their_nodes_ranks(cpu_only: Finished) -> None:
    assert worker_lines(cpu_only.log) == [
        f"worker {rank}: label node-rank={rank} env PLACEMENT_NODE_RANK={rank} "
        "MUSA_VISIBLE_DEVICES=None"
        for rank in (0, 1)
    ]


def test_cpu_only_job_plans_without_accept_partial(cpu_only: Finished) -> None:
    assert "accept-partial" not in cpu_only.log
    assert "warning" not in cpu_only.log


def test_token_auth_uses_the_jobs_own_token(cpu_only: Finished) -> None:
    token = (cpu_only.job_dir / "ray_auth_token").read_text().strip()
    assert re.fullmatch("[0-9a-f]{64}", token)
    assert (cpu_only.job_dir / "ray_auth_token").stat().st_mode & 0o077 == 0


def test_cpu_only_log_ends_cleanly(cpu_only: Finished) -> None:
    assert_clean_end(cpu_only.log)


def test_cpu_only_leaves_no_process(slurm: SlurmCluster, cpu_only: Finished) -> None:
    assert_no_process_left(slurm)


def test_musa_job_succeeds_with_auth_disabled(musa: Finished) -> None:
    assert musa.status == 0, musa.log


def test_musa_workers_see_their_ranks_and_devices(musa: Finished) -> None:
    assert worker_lines(musa.log) == [
        f"worker {w}: label node-rank={w // 2} env PLACEMENT_NODE_RANK={w // 2} "
        f"MUSA_VISIBLE_DEVICES={w % 2}"
        for w in range(4)
    ]


def test_musa_job_split_across_domains_runs_with_a_warning(musa: Finished) -> None:
    assert "slurm_ray.sh: warning: the job's 2 nodes are not whole segments of 2" in musa.log
    assert "no NVLink domain" in musa.log


def test_musa_log_ends_cleanly(musa: Finished) -> None:
    assert_clean_end(musa.log)


def test_musa_leaves_no_process(slurm: SlurmCluster, musa: Finished) -> None:
    assert_no_process_left(slurm)


def test_json_in_ray_extra_args_fails_before_the_nodes(slurm: SlurmCluster) -> None:
    (slurm.root / "badargs").mkdir()
    done = submit(slurm, "badargs", "cpu_only.yaml", RAY_EXTRA_ARGS='--resources={"MUSA": 8}')
    assert done.status != 0
    assert "RAY_EXTRA_ARGS: " in done.log
    assert "RAY_RESOURCES=" in done.log
    assert done.seconds < 30


def test_a_failing_ray_start_ends_the_job_fast(slurm: SlurmCluster) -> None:
    (slurm.root / "badstart").mkdir()
    done = submit(slurm, "badstart", "cpu_only.yaml", RAY_EXTRA_ARGS="--no-such-option")
    assert done.status != 0
    assert "ray start exited" in done.log
    assert done.seconds < 150
    assert_no_process_left(slurm)


def test_the_cluster_has_only_the_loopback_interface(slurm: SlurmCluster) -> None:
    assert interfaces() == ["lo"]


def test_a_job_split_across_domains_fails_before_ray_starts(slurm: SlurmCluster) -> None:
    (slurm.root / "split").mkdir()
    done = submit(slurm, "split", "cpu_only.yaml", SEGMENT="2")
    assert done.status != 0
    assert "the job's 2 nodes are not whole segments of 2 node(s)" in done.log
    assert "SEGMENT_SPLIT=warn runs a split job anyway" in done.log
    assert not (done.job_dir / "head-up").exists()  # Ray never started
    assert done.seconds < 60


def test_submitting_with_segments_where_sbatch_has_no_segment_option(
    slurm: SlurmCluster,
) -> None:
    """Debian's SLURM 22.05 has no --segment (Slurm 24.05+): nothing is submitted."""
    done = subprocess.run(
        [str(SUBMIT), "--nodes=2", "--", "cpu_only.yaml", "job.py"],
        cwd=slurm.root,
        env={**slurm.env, "SEGMENT": "2"},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 1
    assert "has no --segment option (Slurm 24.05 and later" in done.stderr
    assert "nothing was submitted" in done.stderr
    queue = subprocess.run(
        ["squeue", "--noheader"], env=slurm.env, capture_output=True, text=True, check=True
    )
    assert queue.stdout.strip() == ""
