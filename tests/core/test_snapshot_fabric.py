"""Core's snapshot reader: NVLink fabric -> Node.nvlink_domain, the snapshot schema file
(placement-native's, read from the repository), and JSON that says a key twice."""

from __future__ import annotations

import copy
import json
import logging
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from placement_core._errors import InventoryError
from placement_core._inventory import Fabric
from placement_core._sources import inventory_from_snapshots, node_from_snapshot

from .test_sources import snapshot

SCHEMA_FILE = (
    Path(__file__).resolve().parents[2]
    / "packages/placement-native/src/placement_native/snapshot.schema.json"
)
CLUSTER = "6f1d2c3b-4a59-4e8f-9a7b-0c1d2e3f4a5b"
OTHER = "0e0e0e0e-0000-4000-8000-000000000000"


def _fabric(**change: Any) -> dict[str, Any]:
    fabric = {
        "cluster_uuid": CLUSTER,
        "clique_id": 1,
        "state": "completed",
        "status": "success",
        "health_mask": 0,
    }
    fabric.update(change)
    return fabric


def tray(count: int = 4, **change: Any) -> dict[str, Any]:
    """A snapshot of an NVL72 tray whose GPUs are all registered (unless ``change``d)."""
    data = snapshot(count)
    for accelerator in data["accelerators"]:
        accelerator["fabric"] = _fabric(**change)
    return data


def _full(data: dict[str, Any]) -> dict[str, Any]:
    """``data`` with every key native writes, as the schema requires of a writer."""
    full = copy.deepcopy(data)
    full.update(
        {
            "numa_nodes": 1,
            "topology": [],
            "nvml_error": None,
            "node_rank": None,
            "host_memory_bytes": None,
        }
    )
    for accelerator in full["accelerators"]:
        accelerator.setdefault("fabric", None)
        for key in ("compute_capability", "memory_used_bytes", "processes", "error"):
            accelerator.setdefault(key, None)
        accelerator.setdefault("mig_instances", [])
    return full


def test_the_schema_file_is_a_valid_json_schema() -> None:
    jsonschema.Draft202012Validator.check_schema(json.loads(SCHEMA_FILE.read_text()))


@pytest.mark.parametrize("data", [snapshot(2), tray(4)], ids=["h100", "nvl72-tray"])
def test_what_core_reads_in_its_tests_is_what_the_schema_allows(data: dict[str, Any]) -> None:
    schema = json.loads(SCHEMA_FILE.read_text())
    jsonschema.Draft202012Validator(schema).validate(_full(data))
    node_from_snapshot(_full(data), rank=0)


def test_the_schema_refuses_a_fabric_without_its_clique() -> None:
    data = _full(tray(1))
    del data["accelerators"][0]["fabric"]["clique_id"]
    schema = json.loads(SCHEMA_FILE.read_text())
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.Draft202012Validator(schema).validate(data)


def test_every_accelerator_key_of_the_schema_is_known_to_the_reader() -> None:
    from placement_core._sources import _SnapshotAccelerator

    schema = json.loads(SCHEMA_FILE.read_text())
    written = set(schema["$defs"]["accelerator"]["properties"])
    read = set(_SnapshotAccelerator.model_fields)
    # What core reads is part of what native writes; the rest (topology detail, MIG) is
    # ignored on purpose.
    assert read <= written
    assert written - read == {"compute_capability", "mig_instances"}


def test_fabric_becomes_the_accelerators_fabric() -> None:
    node = node_from_snapshot(tray(2, health_mask=6), rank=0)
    assert node.accelerators[0].fabric == Fabric(CLUSTER, 1, "completed", "success", 6)


def test_registered_gpus_that_agree_give_the_node_its_nvlink_domain() -> None:
    assert node_from_snapshot(tray(4), rank=0).nvlink_domain == f"{CLUSTER}/1"


def test_a_node_without_fabric_has_no_domain_and_no_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING):
        inventory = inventory_from_snapshots([snapshot(8)])
    assert inventory.nodes[0].nvlink_domain is None
    assert inventory.warnings == ()
    assert caplog.records == []


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ({"state": "in_progress"}, "state in_progress, status success"),
        ({"state": "not_started"}, "state not_started"),
        ({"state": "not_supported"}, "state not_supported"),
        ({"status": "not_ready"}, "status not_ready"),
    ],
)
def test_an_unregistered_gpu_leaves_the_node_without_domain_with_a_warning(
    change: dict[str, Any], why: str
) -> None:
    data = tray(4)
    data["accelerators"][2]["fabric"].update(change)
    inventory = inventory_from_snapshots([data])
    assert inventory.nodes[0].nvlink_domain is None
    [warning] = inventory.warnings
    assert "node 0 has no NVLink domain" in warning
    assert "accelerator 2 is not registered" in warning
    assert why in warning


def test_gpus_that_disagree_leave_the_node_without_domain() -> None:
    data = tray(4)
    data["accelerators"][3]["fabric"]["cluster_uuid"] = OTHER
    inventory = inventory_from_snapshots([data])
    assert inventory.nodes[0].nvlink_domain is None
    assert "2 NVLink domains" in inventory.warnings[0]
    assert OTHER in inventory.warnings[0]


def test_another_clique_is_another_domain() -> None:
    data = tray(2)
    data["accelerators"][1]["fabric"]["clique_id"] = 2
    inventory = inventory_from_snapshots([data])
    assert inventory.nodes[0].nvlink_domain is None
    assert f"accelerator 0 in {CLUSTER}/1, accelerator 1 in {CLUSTER}/2" in inventory.warnings[0]


def test_some_gpus_without_fabric_leave_the_node_without_domain() -> None:
    data = tray(4)
    data["accelerators"][1]["fabric"] = None
    inventory = inventory_from_snapshots([data])
    assert inventory.nodes[0].nvlink_domain is None
    assert "accelerator(s) 1 report no NVLink fabric" in inventory.warnings[0]


def test_node_from_snapshot_logs_the_domain_warning(caplog: pytest.LogCaptureFixture) -> None:
    data = tray(2, state="in_progress")
    with caplog.at_level(logging.WARNING, logger="placement_core._sources"):
        node_from_snapshot(data, rank=5)
    assert "node 5 has no NVLink domain" in caplog.text


def test_the_plan_repeats_the_domain_warning() -> None:
    from placement_core import load_config, plan

    config = load_config({"cluster": {"num_nodes": 1, "component_placement": {"actor": "0"}}})
    result = plan(config, inventory_from_snapshots([tray(4, status="not_ready")]))
    assert any("has no NVLink domain" in w for w in result.warnings)


@pytest.mark.parametrize(
    ("fabric", "field"),
    [
        ({"cluster_uuid": CLUSTER}, "accelerators.0.fabric.clique_id"),
        (_fabric(clique_id=-1), "accelerators.0.fabric.clique_id"),
        (_fabric(clique_id="1"), "accelerators.0.fabric.clique_id"),
        (_fabric(state=3), "accelerators.0.fabric.state"),
        ("rack-1", "accelerators.0.fabric"),
    ],
)
def test_a_malformed_fabric_is_an_error_naming_the_field(fabric: object, field: str) -> None:
    data = tray(1)
    data["accelerators"][0]["fabric"] = fabric
    with pytest.raises(InventoryError) as caught:
        node_from_snapshot(data, rank=0)
    assert field in str(caught.value).replace("[", ".").replace("]", "")


def test_a_snapshot_with_a_key_given_twice_is_refused(tmp_path: Path) -> None:
    text = json.dumps(snapshot(1))
    path = tmp_path / "node.json"
    path.write_text(text[:-1] + ', "cpus": 4}')
    with pytest.raises(InventoryError, match="key 'cpus' appears twice"):
        node_from_snapshot(path, rank=0)


def test_a_key_given_twice_deep_inside_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "node.json"
    document = snapshot(1)
    document["accelerators"][0]["uuid"] = "GPU-0"
    path.write_text(json.dumps(document).replace('"uuid": "GPU-0"', '"uuid": "a", "uuid": "b"'))
    with pytest.raises(InventoryError, match="key 'uuid' appears twice") as caught:
        node_from_snapshot(path, rank=0)
    assert str(path) in str(caught.value)
