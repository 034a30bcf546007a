"""The real-cluster artifacts of docs/guides/real-cluster.md do what the guide says.

The KubeRay manifest is checked for structure (every Ray node labelled with a distinct
rank, each worker group's Ray resources matching its device plugin's). The SLURM batch
script runs here with stand-ins for ``srun``, ``scontrol``, ``ray``, ``python`` and
``placement`` that log their calls: every node is snapshotted, the job is planned
offline, Ray starts on every node with its SLURM node id as its rank, then the job runs.
(``nox -s lint`` runs shellcheck on it.)
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
CLUSTER = REPO / "examples" / "cluster"
DEVICE_PLUGINS = {"nvidia.com/gpu": "GPU", "huawei.com/Ascend910": "NPU"}


@pytest.fixture(scope="module")
def manifest() -> dict[str, Any]:
    document = yaml.safe_load((CLUSTER / "kuberay.yaml").read_text(encoding="utf-8"))
    assert isinstance(document, dict)
    return document


def groups(manifest: dict[str, Any]) -> list[dict[str, Any]]:
    return [manifest["spec"]["headGroupSpec"], *manifest["spec"]["workerGroupSpecs"]]


def ray_resources(group: dict[str, Any]) -> dict[str, float]:
    params = group["rayStartParams"]
    found = {"GPU": float(params["num-gpus"])} if "num-gpus" in params else {}
    if "resources" in params:
        found.update(yaml.safe_load(params["resources"].strip('"').replace('\\"', '"')))
    return found


def test_the_manifest_is_a_raycluster(manifest: dict[str, Any]) -> None:
    assert (manifest["apiVersion"], manifest["kind"]) == ("ray.io/v1", "RayCluster")
    assert manifest["spec"]["workerGroupSpecs"]


def test_every_ray_node_has_a_distinct_rank_from_zero(manifest: dict[str, Any]) -> None:
    ranks = []
    for group in groups(manifest):
        assert group.get("replicas", 1) == 1  # one pod per rank: a group shares its arguments
        label = group["rayStartParams"]["labels"]
        assert label.startswith("node-rank=")
        (container,) = group["template"]["spec"]["containers"]
        env = {e["name"]: e["value"] for e in container["env"]}
        assert env["PLACEMENT_NODE_RANK"] == label.removeprefix("node-rank=")
        ranks.append(int(env["PLACEMENT_NODE_RANK"]))
    assert sorted(ranks) == list(range(len(ranks)))


def test_each_worker_groups_ray_resources_match_its_devices(manifest: dict[str, Any]) -> None:
    kinds = set()
    for group in manifest["spec"]["workerGroupSpecs"]:
        (container,) = group["template"]["spec"]["containers"]
        limits = container["resources"]["limits"]
        plugins = {DEVICE_PLUGINS[k]: float(v) for k, v in limits.items() if k in DEVICE_PLUGINS}
        assert ray_resources(group) == plugins
        assert container["resources"]["requests"] == limits
        kinds.update(plugins)
    assert kinds == {"GPU", "NPU"}


def test_the_head_holds_no_accelerator(manifest: dict[str, Any]) -> None:
    assert ray_resources(manifest["spec"]["headGroupSpec"]) == {}


STAND_INS = {
    "scontrol": 'echo "$CALLS_HOSTS" | tr " " "\\n"',
    "hostname": "echo 10.0.0.1 fe80::1",
    # srun runs its command once per node of the step, with that node's SLURM_NODEID.
    "srun": (
        'nodes=1; while [ "${1#-}" != "$1" ]; do\n'
        '  case "$1" in --nodes=*) nodes=${1#--nodes=};; -w) shift;; esac; shift\n'
        "done\n"
        'i=0; while [ "$i" -lt "$nodes" ]; do SLURM_NODEID=$i "$@"; i=$((i + 1)); done'
    ),
    "ray": 'echo "ray $* rank=${PLACEMENT_NODE_RANK:-}" >> "$CALLS_LOG"',
    "placement": 'echo "placement $*" >> "$CALLS_LOG"',
    "python": (
        'if [ "$1" = "-m" ]; then\n'
        '  echo "snapshot rank=$PLACEMENT_NODE_RANK" >> "$CALLS_LOG"\n'
        '  echo "{\\"schema\\": 1, \\"node_rank\\": $PLACEMENT_NODE_RANK}"\n'
        # Like Cluster(n): return once n nodes have started Ray.
        'elif [ "$1" = "-" ]; then cat > /dev/null\n'
        '  n=0; until [ "$(grep -c "^ray start" "$CALLS_LOG")" -ge "$2" ]; do\n'
        '    n=$((n + 1)); [ "$n" -lt 300 ] || exit 1; sleep 0.1\n'
        "  done\n"
        '  echo "wait for $2 nodes" >> "$CALLS_LOG"\n'
        'else echo "job $*" >> "$CALLS_LOG"; fi'
    ),
}


@pytest.fixture(scope="module")
def slurm_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[str], Path]:
    bash = shutil.which("bash")
    if bash is None:
        pytest.skip("needs bash")
    root = tmp_path_factory.mktemp("slurm")
    bin_dir = root / "bin"
    bin_dir.mkdir()
    for name, body in STAND_INS.items():
        path = bin_dir / name
        path.write_text(f"#!{bash}\n{body}\n", encoding="utf-8")
        path.chmod(0o755)
    for tool in ("bash", "awk", "mkdir", "cat", "tr", "sleep", "grep"):
        found = shutil.which(tool)
        assert found is not None, tool
        (bin_dir / tool).symlink_to(found)
    log = root / "calls.log"
    env = {
        "PATH": str(bin_dir),
        "CALLS_LOG": str(log),
        "CALLS_HOSTS": "gpu-a gpu-b gpu-c",
        "SLURM_JOB_ID": "77",
        "SLURM_JOB_NUM_NODES": "3",
        "SLURM_JOB_NODELIST": "gpu-[a-c]",
        "HOME": str(root),
    }
    done = subprocess.run(
        [bash, str(CLUSTER / "slurm_ray.sh"), "job.yaml", "train.py", "--steps", "3"],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return log.read_text(encoding="utf-8").splitlines(), root


def test_slurm_snapshots_every_node_tagged_with_its_rank(
    slurm_run: tuple[list[str], Path],
) -> None:
    calls, root = slurm_run
    assert [c for c in calls if c.startswith("snapshot")] == [
        "snapshot rank=0",
        "snapshot rank=1",
        "snapshot rank=2",
    ]
    written = sorted(p.name for p in (root / "snapshots-77").iterdir())
    assert written == ["node0.json", "node1.json", "node2.json"]


def test_slurm_plans_offline_on_the_snapshots_before_ray_starts(
    slurm_run: tuple[list[str], Path],
) -> None:
    calls, _ = slurm_run
    plans = [i for i, c in enumerate(calls) if c.startswith("placement ")]
    starts = [i for i, c in enumerate(calls) if c.startswith("ray start")]
    assert calls[plans[0]].startswith("placement validate job.yaml --inventory snapshots-77/")
    assert "--format table" in calls[plans[1]]
    assert max(plans) < min(starts)


def test_slurm_starts_ray_on_every_node_with_its_slurm_node_id_as_rank(
    slurm_run: tuple[list[str], Path],
) -> None:
    calls, _ = slurm_run
    starts = [c for c in calls if c.startswith("ray start")]
    assert len(starts) == 3
    assert starts[0].startswith("ray start --head --node-ip-address=10.0.0.1 --port=6379")
    for rank, call in enumerate(starts):
        assert f"--labels=node-rank={rank}" in call
        assert call.endswith(f"rank={rank}")
    assert all("--address=10.0.0.1:6379" in c for c in starts[1:])


def test_slurm_runs_the_job_last_once_every_node_is_up(
    slurm_run: tuple[list[str], Path],
) -> None:
    calls, _ = slurm_run
    assert calls[-2:] == ["wait for 3 nodes", "job train.py job.yaml --steps 3"]


def test_the_slurm_script_is_executable() -> None:
    assert os.access(CLUSTER / "slurm_ray.sh", os.X_OK)
