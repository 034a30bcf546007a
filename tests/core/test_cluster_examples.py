"""The real-cluster files of docs/guides/real-cluster.md meet what their tools demand.

KubeRay: ``examples/cluster/kuberay.yaml`` (KubeRay 1.5+) and ``kuberay-1.4.yaml``
(1.4 and older) are checked against the RayJob CRD schemas KubeRay publishes
(``tests/core/kuberay/rayjob-<version>.schema.json``: KubeRay v1.4.2's and v1.5.0's
``ray-operator/config/crd/bases/ray.io_rayjobs.yaml``, descriptions removed; v1.6 and
v1.7 have the same group fields), with unknown fields refused as ``kubectl apply``'s
strict field validation does, and against the operator's own validation rules
(``ray-operator/controllers/ray/utils/validation.go`` from v1.5.0 on:
``validateRayGroupLabels``, ``validateRayGroupResources``) and its parsing of
``rayStartParams.resources`` (``getResourcesMap`` in ``common/pod.go``). The pod spec
fields the manifests use are in the same schema (the CRD embeds Kubernetes' pod template).

SLURM: ``examples/cluster/slurm_ray.sh`` refuses bad settings before anything runs on a
node; tests/slurm submits it to a real SLURM cluster (``nox -s slurm``).
"""

from __future__ import annotations

import copy
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from placement_core import load_config, plan

REPO = Path(__file__).resolve().parents[2]
CLUSTER = REPO / "examples" / "cluster"
SCHEMAS = Path(__file__).resolve().parent / "kuberay"
MANIFESTS = {"kuberay.yaml": "v1.5.0", "kuberay-1.4.yaml": "v1.4.2"}
DEVICE_PLUGINS = {"nvidia.com/gpu": "GPU", "huawei.com/Ascend910": "NPU"}
CLIQUE_LABEL = "nvidia.com/gpu.clique"


def documents(name: str) -> dict[str, dict[str, Any]]:
    """The manifest's documents by kind."""
    loaded = list(yaml.safe_load_all((CLUSTER / name).read_text(encoding="utf-8")))
    return {doc["kind"]: doc for doc in loaded}


def rayjob(name: str) -> dict[str, Any]:
    return documents(name)["RayJob"]


def groups(name: str) -> list[dict[str, Any]]:
    spec = rayjob(name)["spec"]["rayClusterSpec"]
    return [spec["headGroupSpec"], *spec["workerGroupSpecs"]]


def strict(schema: Any) -> Any:
    """The CRD schema with unknown fields refused (Kubernetes prunes or, with kubectl's
    strict field validation, refuses them; JSON Schema allows them by default)."""
    if isinstance(schema, dict):
        schema = {k: strict(v) for k, v in schema.items()}
        if (
            "properties" in schema
            and "additionalProperties" not in schema
            and not schema.get("x-kubernetes-preserve-unknown-fields")
        ):
            schema["additionalProperties"] = False
        return schema
    if isinstance(schema, list):
        return [strict(item) for item in schema]
    return schema


def schema_errors(manifest: dict[str, Any], version: str) -> list[str]:
    schema = json.loads((SCHEMAS / f"rayjob-{version}.schema.json").read_text())
    schema.pop("$comment")
    validator = jsonschema.Draft7Validator(strict(schema))
    return [f"{list(e.absolute_path)}: {e.message}" for e in validator.iter_errors(manifest)]


# Kubernetes' label syntax (k8s.io/apimachinery/pkg/util/validation), as the operator
# checks group labels from v1.5.0 on.
_NAME = r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_DNS1123_SUBDOMAIN = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"


def is_qualified_name(key: str) -> bool:
    prefix, _, name = key.rpartition("/")
    if prefix and (len(prefix) > 253 or not re.fullmatch(_DNS1123_SUBDOMAIN, prefix)):
        return False
    return 0 < len(name) <= 63 and re.fullmatch(_NAME, name) is not None


def is_label_value(value: str) -> bool:
    return value == "" or (len(value) <= 63 and re.fullmatch(_NAME, value) is not None)


def operator_resources(params: dict[str, str]) -> dict[str, float]:
    """``getResourcesMap``: trim quotes, backticks and spaces, then JSON."""
    if "resources" not in params:
        return {}
    parsed = json.loads(params["resources"].strip("'\"` "))
    assert isinstance(parsed, dict)
    assert all(isinstance(v, int | float) for v in parsed.values())
    return parsed


RAY_START_RESOURCE_KEYS = ("num-cpus", "num-gpus", "memory", "resources")


def operator_errors_from_1_5(group: dict[str, Any], name: str) -> list[str]:
    """What KubeRay 1.5+'s ValidateRayClusterSpec says of one group (labels, resources)."""
    params = group.get("rayStartParams", {})
    errors = []
    if "labels" in params:
        errors.append(f"rayStartParams['labels'] is not supported for {name} group")
    if any(params.get(key) for key in RAY_START_RESOURCE_KEYS) and group.get("resources"):
        errors.append(f"resource fields should not be set in both places for {name} group")
    for key, value in group.get("labels", {}).items():
        if not is_qualified_name(key):
            errors.append(f"invalid label key for {name} group: {key!r}")
        if not is_label_value(value):
            errors.append(f"invalid label value for key {key!r} in {name} group: {value!r}")
    return errors


def ray_labels(group: dict[str, Any]) -> dict[str, str]:
    """The Ray labels a group's nodes get, from whichever place the manifest uses."""
    if "labels" in group:
        return dict(group["labels"])
    text = group["rayStartParams"].get("labels", "")
    return dict(pair.split("=", 1) for pair in text.split(",") if pair)


def ray_resources(group: dict[str, Any]) -> dict[str, float]:
    """The accelerator resources Ray gets: the operator's num-gpus from a ``*gpu`` limit,
    custom ones from group ``resources`` (1.5+) or ``rayStartParams.resources``."""
    (container,) = group["template"]["spec"]["containers"]
    limits = container["resources"]["limits"]
    gpus = [float(v) for k, v in limits.items() if k.endswith("gpu")]
    found = {"GPU": sum(gpus)} if gpus else {}
    found.update(operator_resources(group["rayStartParams"]))
    found.update({k: float(v) for k, v in group.get("resources", {}).items()})
    return found


@pytest.mark.parametrize(("name", "version"), MANIFESTS.items())
def test_the_rayjob_matches_its_kuberay_crd_schema(name: str, version: str) -> None:
    assert schema_errors(rayjob(name), version) == []


def test_group_level_labels_are_unknown_to_kuberay_1_4() -> None:
    errors = schema_errors(rayjob("kuberay.yaml"), "v1.4.2")
    assert errors
    assert all("'labels'" in e or "'resources'" in e for e in errors), errors


def test_the_1_5_manifest_passes_the_operators_group_validation() -> None:
    spec = rayjob("kuberay.yaml")["spec"]["rayClusterSpec"]
    named = [("Head", spec["headGroupSpec"])]
    named += [(g["groupName"], g) for g in spec["workerGroupSpecs"]]
    assert [e for name, group in named for e in operator_errors_from_1_5(group, name)] == []


def test_the_1_4_manifest_is_what_1_5_refuses() -> None:
    # rayStartParams labels: the InvalidRayClusterSpec of issue 29; hence two files.
    head = rayjob("kuberay-1.4.yaml")["spec"]["rayClusterSpec"]["headGroupSpec"]
    assert operator_errors_from_1_5(head, "Head") == [
        "rayStartParams['labels'] is not supported for Head group"
    ]


@pytest.mark.parametrize(
    ("key", "good"),
    [
        ("node-rank", True),
        ("placement.io/nvlink-domain", True),
        ("Node_Rank.x", True),
        ("-rank", False),
        ("a/b/c", False),
        ("UPPER.io/x", False),
        ("x" * 64, False),
    ],
)
def test_label_keys_follow_kubernetes_qualified_names(key: str, good: bool) -> None:
    assert is_qualified_name(key) is good


@pytest.mark.parametrize(
    ("text", "parsed"),
    [('{"NPU": 8}', {"NPU": 8}), ("'{\"NPU\": 8}'", {"NPU": 8}), ('"{"NPU": 8}"', {"NPU": 8})],
)
def test_resources_strings_the_operator_parses(text: str, parsed: dict[str, float]) -> None:
    assert operator_resources({"resources": text}) == parsed


def test_the_escaped_resources_string_is_what_the_operator_cannot_parse() -> None:
    with pytest.raises(json.JSONDecodeError):
        operator_resources({"resources": '"{\\"NPU\\": 8}"'})


@pytest.mark.parametrize("name", MANIFESTS)
def test_every_ray_node_has_a_distinct_rank_from_zero(name: str) -> None:
    ranks = []
    for group in groups(name):
        assert group.get("replicas", 1) == 1  # one pod per rank: a group shares its arguments
        rank = ray_labels(group)["node-rank"]
        (container,) = group["template"]["spec"]["containers"]
        env = {e["name"]: e["value"] for e in container["env"]}
        assert env["PLACEMENT_NODE_RANK"] == rank
        ranks.append(int(rank))
    assert sorted(ranks) == list(range(len(ranks)))


@pytest.mark.parametrize("name", MANIFESTS)
def test_each_groups_ray_resources_match_its_devices(name: str) -> None:
    kinds = set()
    for group in groups(name):
        (container,) = group["template"]["spec"]["containers"]
        limits = container["resources"]["limits"]
        plugins = {DEVICE_PLUGINS[k]: float(v) for k, v in limits.items() if k in DEVICE_PLUGINS}
        assert ray_resources(group) == plugins
        assert container["resources"]["requests"] == limits
        kinds.update(plugins)
    assert kinds == {"GPU", "NPU"}


def test_the_two_manifests_are_one_job() -> None:
    """kuberay-1.4.yaml is kuberay.yaml with labels and resources in rayStartParams."""
    moved = copy.deepcopy(rayjob("kuberay.yaml"))
    spec = moved["spec"]["rayClusterSpec"]
    for group in [spec["headGroupSpec"], *spec["workerGroupSpecs"]]:
        labels = group.pop("labels")
        group["rayStartParams"]["labels"] = ",".join(f"{k}={v}" for k, v in labels.items())
        if "resources" in group:
            custom = {k: int(v) for k, v in group.pop("resources").items()}
            group["rayStartParams"]["resources"] = json.dumps(custom)
    assert moved == rayjob("kuberay-1.4.yaml")
    assert documents("kuberay.yaml")["ConfigMap"] == documents("kuberay-1.4.yaml")["ConfigMap"]


def nvidia_groups(name: str) -> Iterator[dict[str, Any]]:
    for group in groups(name):
        (container,) = group["template"]["spec"]["containers"]
        if "nvidia.com/gpu" in container["resources"]["limits"]:
            yield group


@pytest.mark.parametrize("name", MANIFESTS)
def test_the_nvidia_groups_share_one_nvlink_domain(name: str) -> None:
    found = list(nvidia_groups(name))
    assert len(found) == 2
    for group in found:
        pod_labels = group["template"]["metadata"]["labels"]
        (term,) = group["template"]["spec"]["affinity"]["podAffinity"][
            "requiredDuringSchedulingIgnoredDuringExecution"
        ]
        assert term["topologyKey"] == CLIQUE_LABEL
        selector = term["labelSelector"]["matchLabels"]
        assert selector.items() <= pod_labels.items()  # the first pod may schedule alone
        assert selector == {"placement.io/domain-group": "trainers"}


@pytest.mark.parametrize("name", MANIFESTS)
def test_the_job_config_plans_on_the_manifests_nodes(name: str) -> None:
    docs = documents(name)
    config = load_config(yaml.safe_load(docs["ConfigMap"]["data"]["job.yaml"]))
    assert config.num_nodes == len(groups(name))
    plan(config)
    head = rayjob(name)["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]
    (mount,) = head["containers"][0]["volumeMounts"]
    (volume,) = head["volumes"]
    assert volume["configMap"]["name"] == docs["ConfigMap"]["metadata"]["name"]
    assert f"{mount['mountPath']}/job.yaml" in rayjob(name)["spec"]["entrypoint"]


@pytest.mark.parametrize("name", MANIFESTS)
def test_every_image_is_a_placement_build(name: str) -> None:
    for group in groups(name):
        (container,) = group["template"]["spec"]["containers"]
        assert "placement-ray" in container["image"]
        assert not container["image"].startswith("rayproject/")  # those lack placement


def test_the_dockerfile_installs_the_three_packages_on_rays_image() -> None:
    text = (CLUSTER / "Dockerfile").read_text(encoding="utf-8")
    assert re.search(r"^ARG RAY_IMAGE=rayproject/ray:2\.60\.0-py311-gpu$", text, re.M)
    assert re.search(r"^FROM \$\{RAY_IMAGE\}$", text, re.M)
    (run,) = re.findall(r"^RUN pip install (.*?)(?<!\\)$", text, re.M | re.S)
    for package in ("placement-core", "placement-native", "placement-ray"):
        assert f"/tmp/placement/{package}" in run
        assert re.search(rf"^COPY .*packages/{package} /tmp/placement/{package}$", text, re.M)


# ------------------------------------------------------------------------------- SLURM


def test_the_slurm_script_is_executable() -> None:
    assert os.access(CLUSTER / "slurm_ray.sh", os.X_OK)


@pytest.mark.parametrize(
    ("setting", "words"),
    [
        ({"RAY_EXTRA_ARGS": '--resources={"MUSA": 8}'}, "RAY_EXTRA_ARGS: "),
        ({"RAY_EXTRA_ARGS": "--port=7000"}, "is set by the script"),
        ({"RAY_HEAD_ARGS": "num-cpus=0"}, "RAY_HEAD_ARGS: "),
        ({"RAY_RESOURCES": '{"MUSA": "eight"}'}, "RAY_RESOURCES: "),
        ({"RAY_RESOURCES": "MUSA=8"}, "RAY_RESOURCES: "),
        ({"RAY_AUTH": "off"}, "RAY_AUTH: 'off' is not one of token, disabled"),
        ({"RAY_PORT": "70000"}, "RAY_PORT: "),
        ({"SEGMENT": "0"}, "SEGMENT: '0' is not a node count"),
        ({"SEGMENT_SPLIT": "maybe"}, "SEGMENT_SPLIT: 'maybe' is not one of fail, warn"),
    ],
)
def test_the_slurm_script_refuses_bad_settings_before_the_nodes(
    tmp_path: Path, setting: dict[str, str], words: str
) -> None:
    bash = shutil.which("bash")
    if bash is None:
        pytest.skip("needs bash")
    (tmp_path / "job.yaml").write_text("cluster: {}\n")
    (tmp_path / "train.py").write_text("")
    env = {
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        "SLURM_JOB_ID": "77",
        "SLURM_JOB_NUM_NODES": "2",
        **setting,
    }
    done = subprocess.run(
        [bash, str(CLUSTER / "slurm_ray.sh"), "job.yaml", "train.py"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 1
    assert words in done.stderr
    assert not (tmp_path / "placement-77").exists()  # nothing made, nothing started


def test_the_slurm_script_outside_a_job_says_to_use_sbatch(tmp_path: Path) -> None:
    bash = shutil.which("bash")
    if bash is None:
        pytest.skip("needs bash")
    done = subprocess.run(
        [bash, str(CLUSTER / "slurm_ray.sh"), "job.yaml", "train.py"],
        cwd=tmp_path,
        env={"PATH": os.environ["PATH"]},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode != 0
    assert "submit with sbatch" in done.stderr
