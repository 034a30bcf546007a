"""Inventories from the config, node snapshots and --accelerators-per-node.

See docs/concepts/cluster-config.md#where-the-inventory-comes-from and
docs/concepts/node-snapshot.md.
"""

from __future__ import annotations

import itertools
import json
import random
from pathlib import Path
from typing import Any

import pytest

from placement_core._config import load_config
from placement_core._errors import InventoryError
from placement_core._inventory import HardwareDevice, Inventory
from placement_core._sources import (
    attach_hardware,
    inventory_for,
    inventory_from_config,
    inventory_from_snapshots,
    node_from_snapshot,
)

_MACHINES = itertools.count()


def snapshot(count: int = 2, **rest: Any) -> dict[str, Any]:
    """A node snapshot (docs/concepts/node-snapshot.md) with ``count`` H100s of a machine
    of its own (UUIDs ``GPU-<machine>-<index>``)."""
    machine = next(_MACHINES)
    document: dict[str, Any] = {
        "schema": 1,
        "hostname": "gpu-a",
        "ip": "10.0.0.7",
        "cpus": 128,
        "accelerators": [
            {
                "index": i,
                "type": "nvidia",
                "model": "NVIDIA H100 80GB HBM3",
                "uuid": f"GPU-{machine}-{i}",
                "pci_bus_id": f"00000000:{18 + i:02X}:00.0",
                "memory_bytes": 85520809984,
                "numa_node": 0,
                "cpu_affinity": "0-55,112-167",
                "mig": False,
            }
            for i in range(count)
        ],
        "links": [[0, 1, "NV18"]] if count >= 2 else [],
        "driver": "580.159.04",
        "source": "nvml-cffi",
    }
    document.update(rest)
    return document


def config(num_nodes: int = 2, **section: Any) -> Any:
    section.setdefault("component_placement", {"actor": "0"})
    return load_config({"cluster": {"num_nodes": num_nodes, **section}})


def accel_counts(inventory: Inventory) -> list[int]:
    return [len(node.accelerators) for node in inventory.nodes]


# ----------------------------------------------------------------------------- snapshots


def test_snapshot_becomes_a_node() -> None:
    node = node_from_snapshot(snapshot(), rank=3)
    assert (node.rank, node.node_id, node.hostname, node.ip, node.cpus) == (
        3,
        "node-3",
        "gpu-a",
        "10.0.0.7",
        128,
    )
    first = node.accelerators[0]
    assert first.uuid is not None
    assert first.uuid.endswith("-0")
    assert first.pci_bus_id == "00000000:12:00.0"
    assert first.memory_bytes == 85520809984
    assert first.numa_node == 0
    assert first.cpu_affinity == "0-55,112-167"
    assert node.accelerator_type == "nvidia"


def test_snapshot_file(tmp_path: Path) -> None:
    path = tmp_path / "node.json"
    path.write_text(json.dumps(snapshot(8)))
    assert len(node_from_snapshot(path, rank=0).accelerators) == 8


def test_snapshot_without_nvml_is_refused_unless_accepted() -> None:
    data = snapshot(0, nvml_error="libnvidia-ml.so.1 not found")
    with pytest.raises(InventoryError, match="could not read the node's accelerators"):
        node_from_snapshot(data, rank=0)
    assert node_from_snapshot(data, rank=0, accept_partial=True).accelerators == ()


def test_a_short_snapshot_and_a_gpu_entry_with_an_error_read_alike() -> None:
    short = snapshot(0, nvml_error="NVML_ERROR_DRIVER_NOT_LOADED")
    faulty = snapshot(2)
    faulty["accelerators"][1]["error"] = "NVML_ERROR_GPU_IS_LOST"
    inventory = inventory_from_snapshots([short, faulty], accept_partial=True)
    assert list(inventory.shortfalls) == [
        "snapshot #0: node 0: planned without accelerators (left out): the snapshot could "
        "not read the node's accelerators ('NVML_ERROR_DRIVER_NOT_LOADED')",
        "snapshot #1: node 1: planned without accelerator 1 (left out): accelerator 1 "
        "failed a query when the snapshot was taken ('NVML_ERROR_GPU_IS_LOST')",
    ]
    for data, rank in ((short, 0), (faulty, 1)):
        with pytest.raises(InventoryError) as caught:
            node_from_snapshot(data, rank=rank)
        assert caught.value.reason.endswith(
            "and take the snapshot again, or accept the snapshot knowingly "
            "(--accept-partial, accept_partial=True) to plan node "
            f"{rank} without {'accelerators' if rank == 0 else 'accelerator 1'}"
        )


def test_node_declared_cpu_only_is_not_partial_without_a_driver() -> None:
    # A CPU head or agent node has no NVIDIA driver: its snapshot's nvml_error is expected
    # once the config's inventory: section says the node has no accelerators.
    no_driver = snapshot(0, nvml_error="libnvidia-ml.so.1 not found")
    cfg = config(2, inventory=[{"node_ranks": 0, "accelerators": {"count": 0}}])
    inventory = inventory_for(cfg, snapshots=[no_driver, snapshot(8)])
    assert accel_counts(inventory) == [0, 8]
    assert inventory.shortfalls == ()


def test_node_declared_nvidia_without_a_driver_is_still_refused() -> None:
    no_driver = snapshot(0, nvml_error="libnvidia-ml.so.1 not found")
    cfg = config(2, inventory=[{"node_ranks": 0, "accelerators": {"count": 8}}])
    with pytest.raises(InventoryError, match="could not read the node's accelerators"):
        inventory_for(cfg, snapshots=[no_driver, snapshot(8)])


def test_node_declared_cpu_only_keeps_what_its_snapshot_lists() -> None:
    cfg = config(1, inventory=[{"node_ranks": 0, "accelerators": {"count": 0}}])
    assert accel_counts(inventory_for(cfg, snapshots=[snapshot(2)])) == [2]


def test_snapshot_unknown_keys_are_allowed() -> None:
    data = snapshot(1, numa_nodes=2)
    data["accelerators"][0]["compute_capability"] = "9.0"
    assert node_from_snapshot(data, rank=0).accelerators[0].index == 0


def test_snapshot_accelerators_are_sorted_by_index() -> None:
    data = snapshot(3)
    data["accelerators"].reverse()
    assert node_from_snapshot(data, rank=0).accelerator_ids == (0, 1, 2)


@pytest.mark.parametrize(
    ("change", "field", "reason"),
    [
        ({"schema": 2}, "schema", "unsupported snapshot schema 2"),
        ({"schema": True}, "schema", "unsupported snapshot schema"),
        ({"cpus": "many"}, "cpus", "expected an integer"),
        ({"cpus": -1}, "cpus", ">= 0"),
        ({"accelerators": None}, "accelerators", "expected a list"),
        ({"hostname": 5}, "hostname", "expected a string"),
    ],
)
def test_malformed_snapshot_names_file_and_field(
    tmp_path: Path, change: dict[str, Any], field: str, reason: str
) -> None:
    path = tmp_path / "node3.json"
    path.write_text(json.dumps(snapshot() | change))
    with pytest.raises(InventoryError) as caught:
        node_from_snapshot(path, rank=0)
    assert caught.value.path == f"{path}: {field}"
    assert reason in caught.value.reason


def test_malformed_accelerator_entry() -> None:
    data = snapshot(2)
    data["accelerators"][1]["index"] = "1"
    data["accelerators"][1]["type"] = "cuda"
    with pytest.raises(InventoryError) as caught:
        node_from_snapshot(data, rank=0)
    assert caught.value.path == "snapshot #0: accelerators[1].index"
    assert "and 1 more: accelerators[1].type" in caught.value.reason


def test_snapshot_missing_schema() -> None:
    with pytest.raises(InventoryError, match="not a node snapshot"):
        node_from_snapshot({"hostname": "x"}, rank=0)


def test_repeated_accelerator_index() -> None:
    data = snapshot(2)
    data["accelerators"][1]["index"] = 0
    with pytest.raises(InventoryError, match="index 0 appears twice"):
        node_from_snapshot(data, rank=0)


def test_snapshot_invalid_json(tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text('{"schema": 1,\n "accelerators": [}')
    with pytest.raises(InventoryError) as caught:
        node_from_snapshot(path, rank=0)
    assert caught.value.path == f"{path}:2:19"


def test_snapshot_must_be_an_object(tmp_path: Path) -> None:
    path = tmp_path / "list.json"
    path.write_text("[1, 2]")
    with pytest.raises(InventoryError, match="expected a JSON object"):
        node_from_snapshot(path, rank=0)


def test_missing_snapshot_file(tmp_path: Path) -> None:
    with pytest.raises(InventoryError, match="no such snapshot file"):
        node_from_snapshot(tmp_path / "nope.json", rank=0)


def test_snapshot_rank_from_its_node_rank_field() -> None:
    assert node_from_snapshot(snapshot(node_rank=5)).rank == 5
    with pytest.raises(InventoryError, match="carries no node_rank"):
        node_from_snapshot(snapshot())


def test_snapshots_in_file_order() -> None:
    inventory = inventory_from_snapshots([snapshot(1, hostname="a"), snapshot(2, hostname="b")])
    assert [n.hostname for n in inventory.nodes] == ["a", "b"]
    assert accel_counts(inventory) == [1, 2]


def test_snapshots_by_node_rank_field() -> None:
    inventory = inventory_from_snapshots(
        [snapshot(1, hostname="b", node_rank=1), snapshot(2, hostname="a", node_rank=0)]
    )
    assert [n.hostname for n in inventory.nodes] == ["a", "b"]


def test_snapshots_mixing_ranked_and_unranked() -> None:
    with pytest.raises(InventoryError, match="some snapshots carry a node_rank"):
        inventory_from_snapshots([snapshot(node_rank=1), snapshot()])


def test_two_snapshots_for_one_node() -> None:
    with pytest.raises(InventoryError, match="node 0 already comes from snapshot"):
        inventory_from_snapshots([snapshot(node_rank=0), snapshot(node_rank=0)])


def test_snapshots_must_cover_every_node() -> None:
    with pytest.raises(InventoryError, match=r"no snapshot for node\(s\) 1"):
        inventory_from_snapshots([snapshot(node_rank=0), snapshot(node_rank=2)], num_nodes=3)


def test_snapshots_give_mixed_nodes() -> None:
    amd = snapshot(4)
    for entry in amd["accelerators"]:
        entry["type"] = "amd"
    inventory = inventory_from_snapshots([snapshot(8), amd, snapshot(0)])
    assert accel_counts(inventory) == [8, 4, 0]
    assert [n.accelerator_type for n in inventory.nodes] == ["nvidia", "amd", None]


# ----------------------------------------------------------------------------- the config


def test_config_inventory_section() -> None:
    cfg = config(
        4,
        inventory=[
            {"node_ranks": "0-1", "accelerators": {"type": "nvidia", "model": "A800", "count": 8}},
            {"node_ranks": 3, "accelerators": {"type": "ascend", "count": 4}},
        ],
    )
    inventory = inventory_from_config(cfg)
    assert inventory is not None
    assert accel_counts(inventory) == [8, 8, 0, 4]
    assert inventory.nodes[0].accelerators[0].model == "A800"
    assert inventory.nodes[3].accelerator_type == "ascend"
    assert [n.node_id for n in inventory.nodes] == ["node-0", "node-1", "node-2", "node-3"]


def test_config_without_inventory_section() -> None:
    assert inventory_from_config(config()) is None


def test_no_source_at_all_is_an_error() -> None:
    with pytest.raises(InventoryError, match="--accelerators-per-node"):
        inventory_for(config())


def test_accelerators_per_node_shortcut() -> None:
    assert accel_counts(inventory_for(config(3), accelerators_per_node=8)) == [8, 8, 8]
    assert accel_counts(inventory_for(config(2), accelerators_per_node=0)) == [0, 0]


@pytest.mark.parametrize("value", [-1, True, 2.5, "8"])
def test_accelerators_per_node_must_be_a_count(value: Any) -> None:
    with pytest.raises(InventoryError, match="expected an integer from 0 to 1024"):
        inventory_for(config(), accelerators_per_node=value)


def test_precedence_snapshot_then_config_then_shortcut() -> None:
    cfg = config(
        3,
        inventory=[{"node_ranks": "0-1", "accelerators": {"type": "nvidia", "count": 4}}],
    )
    inventory = inventory_for(cfg, snapshots=[snapshot(2, node_rank=0)], accelerators_per_node=1)
    assert accel_counts(inventory) == [2, 4, 1]
    assert inventory.nodes[0].hostname == "gpu-a"


def test_snapshot_rank_beyond_the_config() -> None:
    with pytest.raises(InventoryError, match="out of range: the config has 2 node"):
        inventory_for(config(2), snapshots=[snapshot(node_rank=2)])


def test_too_many_snapshots_in_file_order() -> None:
    with pytest.raises(InventoryError, match="snapshot #2 \\(node 2\\) is out of range"):
        inventory_for(config(2), snapshots=[snapshot(), snapshot(), snapshot()])


def test_fewer_snapshots_than_nodes_fall_back() -> None:
    inventory = inventory_for(config(3), snapshots=[snapshot(8)], accelerators_per_node=2)
    assert accel_counts(inventory) == [8, 2, 2]


def test_nodes_without_a_snapshot_are_named() -> None:
    with pytest.raises(
        InventoryError, match=r"1 snapshot\(s\) for 4 nodes: no snapshot for node\(s\) 1-3,"
    ):
        inventory_for(config(4), snapshots=[snapshot(8)])


def test_nodes_without_a_snapshot_may_be_described_by_the_inventory_section() -> None:
    cfg = config(
        3, inventory=[{"node_ranks": "1-2", "accelerators": {"type": "nvidia", "count": 4}}]
    )
    assert accel_counts(inventory_for(cfg, snapshots=[snapshot(8)])) == [8, 4, 4]


def test_nodes_without_a_snapshot_allowed_on_request() -> None:
    inventory = inventory_for(config(3), snapshots=[snapshot(8)], allow_missing_snapshots=True)
    assert accel_counts(inventory) == [8, 0, 0]


# ----------------------------------------------------------------------------- hardware


def robot(node_rank: int, ip: str) -> dict[str, Any]:
    return {"robot_ip": ip, "node_rank": node_rank}


def test_attach_hardware_numbers_devices_per_node_and_type() -> None:
    cfg = config(
        3,
        node_groups=[
            {
                "label": "arms",
                "node_ranks": "1-2",
                "hardware": {
                    "type": "Franka",
                    "configs": [robot(2, "10.0.0.1"), robot(1, "10.0.0.2"), robot(2, "10.0.0.3")],
                },
            }
        ],
    )
    inventory = attach_hardware(inventory_for(cfg, accelerators_per_node=0), cfg)
    assert inventory.nodes[0].hardware == ()
    assert [(d.index, d.config["robot_ip"]) for d in inventory.nodes[2].hardware] == [
        (0, "10.0.0.1"),
        (1, "10.0.0.3"),
    ]
    assert inventory.nodes[1].hardware[0] == HardwareDevice(
        type="Franka", index=0, config=inventory.nodes[1].hardware[0].config
    )
    assert inventory.nodes[1].hardware[0].config["node_rank"] == 1


def test_attach_hardware_is_idempotent() -> None:
    cfg = config(
        1,
        node_groups=[
            {
                "label": "a",
                "node_ranks": 0,
                "hardware": {"type": "Franka", "configs": [robot(0, "10.0.0.1")]},
            }
        ],
    )
    once = attach_hardware(inventory_for(cfg, accelerators_per_node=1), cfg)
    assert attach_hardware(once, cfg) == once


def test_attach_hardware_without_hardware_returns_the_inventory() -> None:
    inventory = Inventory.uniform(2, 8)
    assert attach_hardware(inventory, config()) is inventory


def test_attach_hardware_to_a_smaller_inventory() -> None:
    cfg = config(
        3,
        node_groups=[
            {
                "label": "a",
                "node_ranks": 2,
                "hardware": {"type": "Franka", "configs": [robot(2, "10.0.0.1")]},
            }
        ],
    )
    with pytest.raises(InventoryError, match="node 2 is not in the inventory"):
        attach_hardware(Inventory.uniform(2, 8), cfg)


def test_inventory_for_is_independent_of_snapshot_order_with_ranks() -> None:
    snapshots = [snapshot(i + 1, node_rank=i, hostname=f"h{i}") for i in range(6)]
    shuffled = snapshots[:]
    random.Random(7).shuffle(shuffled)
    assert inventory_for(config(6), snapshots=snapshots) == inventory_for(
        config(6), snapshots=shuffled
    )


def test_snapshot_as_placement_native_writes_it() -> None:
    """A real placement-native snapshot (fake DGX H100 NVML) reads into a node."""
    path = Path(__file__).parent / "golden" / "snapshot_dgx_h100.json"
    node = node_from_snapshot(path, rank=0)
    assert node.hostname == "dgx-h100-01"
    assert node.accelerator_ids == tuple(range(8))
    assert {a.model for a in node.accelerators} == {"NVIDIA H100 80GB HBM3"}
    assert all(a.uuid and a.uuid.startswith("GPU-") for a in node.accelerators)
    assert node.accelerators[0].pci_bus_id == "00000000:18:00.0"


# ------------------------------------------------------------ one machine, bounded names


def test_the_same_snapshot_given_twice_is_refused_as_one_machine(tmp_path: Path) -> None:
    path = tmp_path / "a.json"
    path.write_text(json.dumps(snapshot(2)))
    with pytest.raises(InventoryError, match=r"also node 0's accelerator 0.*given twice"):
        inventory_from_snapshots([path, path])


def test_two_snapshots_sharing_a_gpu_uuid_are_refused_even_with_node_ranks() -> None:
    first = snapshot(2, node_rank=0)
    second = snapshot(2, node_rank=1)
    second["accelerators"][1]["uuid"] = first["accelerators"][0]["uuid"]
    with pytest.raises(InventoryError, match=r"accelerators\[1\]\.uuid: node 1's") as caught:
        inventory_from_snapshots([first, second])
    assert caught.value.path == "snapshot #1: accelerators[1].uuid"


def test_snapshots_of_distinct_machines_are_planned_as_distinct_nodes() -> None:
    assert accel_counts(inventory_from_snapshots([snapshot(2), snapshot(2)])) == [2, 2]


@pytest.mark.parametrize(
    ("where", "field"),
    [
        ("uuid", "accelerators[0].uuid"),
        ("model", "accelerators[0].model"),
        ("pci_bus_id", "accelerators[0].pci_bus_id"),
        ("hostname", "hostname"),
    ],
)
def test_a_megabyte_name_is_refused_and_quoted_short(where: str, field: str) -> None:
    document = snapshot(1)
    if where == "hostname":
        document["hostname"] = "h" * 1_000_000
    else:
        document["accelerators"][0][where] = "x" * 1_000_000
    with pytest.raises(InventoryError, match="at most 256 characters") as caught:
        node_from_snapshot(document, rank=0)
    assert field in str(caught.value)
    assert len(str(caught.value)) < 1000


def test_a_megabyte_device_error_is_shortened_in_the_shortfall() -> None:
    document = snapshot(2, nvml_error="N" * 1_000_000)
    document["accelerators"][0]["error"] = "E" * 1_000_000
    inventory = inventory_from_snapshots([document], accept_partial=True)
    assert inventory.shortfalls
    assert all(len(text) < 1000 for text in inventory.shortfalls)
    assert any("(1000000 characters)" in text for text in inventory.shortfalls)


# ------------------------------------------------------------------- vendors that disagree


def _ascend_config() -> Any:
    inventory = [{"node_ranks": 0, "accelerators": {"type": "ascend", "count": 2}}]
    return config(1, inventory=inventory)


def test_a_snapshot_of_another_vendor_than_the_config_says_is_warned_about() -> None:
    inventory = inventory_for(_ascend_config(), snapshots=[snapshot(2)])
    assert inventory.nodes[0].accelerator_type == "nvidia"
    (warning,) = [w for w in inventory.warnings if "declares ascend" in w]
    assert "its snapshot (snapshot #0) lists nvidia: planned with the snapshot's" in warning


def test_a_lost_gpu_of_such_a_snapshot_is_refused_unless_accepted() -> None:
    document = snapshot(2)
    document["accelerators"][1]["error"] = "GPU is lost"
    with pytest.raises(InventoryError, match=r"accelerators\[1\]\.error"):
        inventory_for(_ascend_config(), snapshots=[document])


def test_accepting_a_lost_gpu_keeps_the_node_nvidia_and_says_so() -> None:
    document = snapshot(1)
    document["accelerators"][0]["error"] = "GPU is lost"
    inventory = inventory_for(_ascend_config(), snapshots=[document], accept_partial=True)
    assert inventory.nodes[0].accelerators == ()  # never the config's NPUs
    assert any("planned without accelerator 0 (left out)" in s for s in inventory.shortfalls)
    assert any("declares ascend" in w for w in inventory.warnings)


def test_an_empty_snapshot_of_a_node_the_config_declares_ascend_takes_the_config() -> None:
    inventory = inventory_for(_ascend_config(), snapshots=[snapshot(0, nvml_error="no NVML")])
    assert inventory.nodes[0].accelerator_type == "ascend"
    assert inventory.warnings == ()


def test_a_gpu_in_mig_mode_is_planned_whole_with_a_warning() -> None:
    document = snapshot(2)
    document["accelerators"][1]["mig"] = True
    inventory = inventory_from_snapshots([document])
    assert len(inventory.nodes[0].accelerators) == 2
    (warning,) = [w for w in inventory.warnings if "MIG" in w]
    assert "node 0: accelerator(s) 1 in MIG mode are planned as whole GPUs" in warning


def test_two_accelerators_of_one_snapshot_sharing_a_uuid_are_refused() -> None:
    document = snapshot(2)
    document["accelerators"][1]["uuid"] = document["accelerators"][0]["uuid"]
    with pytest.raises(InventoryError, match="accelerators 0 and 1 both have uuid"):
        inventory_from_snapshots([document])
