"""The NVLink domain as the Ray label ``placement.io/nvlink-domain``: what ``python -m
placement_ray labels`` prints for ``ray start``, and discovery refusing a node whose
label contradicts its snapshot."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from placement_ray import ClusterError
from placement_ray.__main__ import main
from placement_ray._discovery import build_inventory
from placement_ray._domain_label import (
    DOMAIN_LABEL,
    check_domain_label,
    domain_label_value,
    domain_selector,
    snapshot_labels,
)
from placement_ray._node_order import NodeFacts

CLUSTER = "6f1d2c3b-4a59-4e8f-9a7b-0c1d2e3f4a5b"
GPU = {
    "type": "nvidia",
    "model": "NVIDIA GB200",
    "pci_bus_id": "00000000:19:00.0",
    "memory_bytes": 1,
    "numa_node": 0,
    "cpu_affinity": "0-55",
    "mig": False,
}


def tray(clique: int = 3, **rest: Any) -> dict[str, Any]:
    """A snapshot of an NVL72 tray of two GPUs registered in clique ``clique``."""
    fabric = {
        "cluster_uuid": CLUSTER,
        "clique_id": clique,
        "state": "completed",
        "status": "success",
        "health_mask": 0,
    }
    accelerators = [{**GPU, "index": i, "uuid": f"GPU-{i}", "fabric": fabric} for i in (0, 1)]
    return {"schema": 1, "hostname": "gb-01", "ip": "10.0.0.1", "cpus": 8,
            "accelerators": accelerators, "links": [], **rest}  # fmt: skip


def test_a_domain_becomes_a_label_value_without_its_slash() -> None:
    assert domain_label_value(f"{CLUSTER}/3") == f"{CLUSTER}.3"
    assert domain_label_value("rack-a") == "rack-a"


@pytest.mark.parametrize("domain", ["rack a", "-rack", "x" * 64])
def test_a_domain_that_makes_no_label_value_is_refused(domain: str) -> None:
    with pytest.raises(ClusterError, match="makes no Ray label value"):
        domain_label_value(domain)


def test_snapshot_labels_give_rank_and_domain() -> None:
    assert snapshot_labels(tray(node_rank=4)) == {"node-rank": "4", DOMAIN_LABEL: f"{CLUSTER}.3"}


def test_a_node_without_fabric_gets_no_domain_label() -> None:
    cpu = {"schema": 1, "hostname": "cpu", "ip": "10.0.0.2", "cpus": 8, "accelerators": [],
           "links": [], "nvml_error": "libnvidia-ml.so.1 not found", "node_rank": 0}  # fmt: skip
    assert snapshot_labels(cpu) == {"node-rank": "0"}


def test_the_labels_command_prints_what_ray_start_takes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "node2.json"
    path.write_text(json.dumps(tray(node_rank=2)))
    assert main(["labels", str(path)]) == 0
    assert capsys.readouterr().out == f"node-rank=2,{DOMAIN_LABEL}={CLUSTER}.3\n"


def test_the_labels_command_reports_a_bad_snapshot(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "node.json"
    path.write_text(json.dumps(tray(cpus="many")))
    assert main(["labels", str(path)]) == 2
    assert "cpus" in capsys.readouterr().err


def test_a_label_that_agrees_with_the_snapshot_passes() -> None:
    check_domain_label(0, "n0", {DOMAIN_LABEL: f"{CLUSTER}.3"}, f"{CLUSTER}/3")
    check_domain_label(0, "n0", {}, f"{CLUSTER}/3")  # no label: nothing to contradict


def test_discovery_refuses_a_label_that_contradicts_the_snapshot() -> None:
    facts = NodeFacts(
        "n0",
        "10.0.0.1",
        "gb-01",
        labels={DOMAIN_LABEL: f"{CLUSTER}.9"},
        resources={"GPU": 2, "CPU": 8},
        snapshot=tray(),
    )
    with pytest.raises(ClusterError) as caught:
        build_inventory([facts])
    assert str(caught.value) == (
        f"node 0 (n0) carries the label {DOMAIN_LABEL}={CLUSTER}.9 but its snapshot reports "
        f"domain '{CLUSTER}/3': start the node with the labels `python -m placement_ray "
        "labels` prints there"
    )


def test_a_pinned_bundle_also_asks_for_its_nodes_domain() -> None:
    assert domain_selector({DOMAIN_LABEL: f"{CLUSTER}.3", "node-rank": "0"}) == {
        DOMAIN_LABEL: f"{CLUSTER}.3"
    }
    assert domain_selector({"node-rank": "0"}) == {}
