"""NodeSnapshot.to_dict() / to_json(): the node snapshot (docs/concepts/node-snapshot.md) that
placement-core reads."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from placement_native import Accelerator, Fabric, Link, MigInstance, NodeSnapshot, Process
from placement_native._model import SCHEMA_VERSION, record_maker
from placement_native.errors import EnvVarError
from placement_native.testing import topology_names

Take = Callable[..., NodeSnapshot]

SCHEMA_TOP_LEVEL = {"schema", "hostname", "ip", "cpus", "accelerators", "links", "driver", "source"}
SCHEMA_ACCELERATOR = {
    "index",
    "type",
    "model",
    "uuid",
    "pci_bus_id",
    "memory_bytes",
    "numa_node",
    "cpu_affinity",
    "mig",
}


def _spec_example() -> NodeSnapshot:
    return NodeSnapshot(
        hostname="gpu-node-0",
        ip="10.0.0.7",
        cpus=128,
        accelerators=(
            Accelerator(
                index=0,
                model="NVIDIA H100 80GB HBM3",
                uuid="GPU-0",
                pci_bus_id="00000000:18:00.0",
                memory_bytes=85520809984,
                numa_node=0,
                cpu_affinity="0-55,112-167",
            ),
            Accelerator(index=1, uuid="GPU-1"),
        ),
        links=(Link(a=0, b=1, level="NODE", nvlinks=18, p2p="OK"),),
        driver="580.159.04",
        source="nvml-cffi",
    )


def test_spec_example_round_trips_through_json() -> None:
    data = json.loads(_spec_example().to_json())
    assert data["schema"] == SCHEMA_VERSION == 1
    assert (data["hostname"], data["ip"], data["cpus"]) == ("gpu-node-0", "10.0.0.7", 128)
    assert data["accelerators"][0] == {
        "index": 0,
        "type": "nvidia",
        "model": "NVIDIA H100 80GB HBM3",
        "uuid": "GPU-0",
        "pci_bus_id": "00000000:18:00.0",
        "memory_bytes": 85520809984,
        "numa_node": 0,
        "cpu_affinity": "0-55,112-167",
        "mig": False,
        "compute_capability": None,
        "mig_instances": [],
        "memory_used_bytes": None,
        "processes": None,
        "error": None,
        "fabric": None,
    }
    assert data["links"] == [[0, 1, "NV18"]]
    assert (data["driver"], data["source"], data["nvml_error"]) == ("580.159.04", "nvml-cffi", None)


def test_links_show_the_pcie_level_when_there_is_no_nvlink() -> None:
    assert Link(a=0, b=1, level="PXB").label == "PXB"
    assert Link(a=0, b=1, level=None).label == "?"


def test_mig_instances_serialise_as_their_own_entries() -> None:
    acc = Accelerator(index=0, mig=True, mig_instances=(MigInstance(index=2, uuid="MIG-x"),))
    entry = acc.to_dict()
    assert entry["mig"] is True
    assert entry["mig_instances"][0]["uuid"] == "MIG-x"
    assert entry["mig_instances"][0]["index"] == 2


@pytest.mark.parametrize("machine", ["dgx-h100", "mig", "no-permission", "no-driver"])
def test_live_snapshots_carry_every_spec_key(take: Take, machine: str) -> None:
    data = json.loads(take(machine).to_json())
    assert set(data) >= SCHEMA_TOP_LEVEL | {"nvml_error"}
    for entry in data["accelerators"]:
        assert set(entry) >= SCHEMA_ACCELERATOR
        assert entry["type"] == "nvidia"
    for a, b, label in data["links"]:
        assert isinstance(a, int)
        assert isinstance(b, int)
        assert a < b
        assert label in {"PIX", "PXB", "PHB", "NODE", "SYS", "X"} or label.startswith("NV")


def test_snapshot_is_frozen() -> None:
    snap = _spec_example()
    with pytest.raises(AttributeError):
        snap.cpus = 1  # type: ignore[misc]


def test_link_lookup_takes_either_order() -> None:
    snap = _spec_example()
    assert snap.link(1, 0) is snap.link(0, 1) is snap.links[0]
    assert snap.link(0, 5) is None


def test_record_maker_builds_the_same_frozen_records() -> None:
    make_link = record_maker(Link)
    assert make_link(0, 1, "PIX", 0, "OK") == Link(a=0, b=1, level="PIX", p2p="OK")
    values = (
        3,
        "nvidia",
        "m",
        "GPU-3",
        "0:1:0.0",
        1,
        0,
        "0-3",
        (9, 0),
        True,
        (),
        ((1, 2),),
        4,
        None,
        7,
        (Process(pid=42, used_memory_bytes=None),),
        Fabric("8f9e0a1b-0000-4000-8000-000000000001", 7, "completed", "success", 0),
    )
    made = record_maker(Accelerator)(*values)
    assert made == Accelerator(*values)
    with pytest.raises(AttributeError):
        made.index = 5  # type: ignore[misc]


def test_node_rank_comes_from_the_environment(take: Take, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RLINF_NODE_RANK", "5")
    assert take("no-driver").to_dict()["node_rank"] == 5
    monkeypatch.setenv("PLACEMENT_NODE_RANK", "3")
    assert take("no-driver").node_rank == 3


def test_without_a_node_rank_the_key_is_null(take: Take, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PLACEMENT_NODE_RANK", raising=False)
    monkeypatch.delenv("RLINF_NODE_RANK", raising=False)
    assert take("no-driver").to_dict()["node_rank"] is None


def test_a_bad_node_rank_is_a_typed_error(take: Take, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PLACEMENT_NODE_RANK", "-1")
    with pytest.raises(EnvVarError, match=r"PLACEMENT_NODE_RANK='-1' is not usable"):
        take("no-driver")


def _is(value: object, kind: type) -> bool:
    """The exact JSON type: ``true`` is not an int."""
    return type(value) is kind


def _optional(value: object, kind: type) -> bool:
    return value is None or _is(value, kind)


@pytest.mark.parametrize(
    "machine",
    [
        "dgx-h100",
        "pcie-2-switches",
        "mig",
        "no-permission",
        "old-driver",
        "no-driver",
    ],
)
def test_live_snapshot_values_have_the_spec_types(take: Take, machine: str) -> None:
    data = json.loads(take(machine).to_json())
    assert _is(data["schema"], int)
    assert _is(data["hostname"], str)
    assert _is(data["ip"], str)
    assert _is(data["cpus"], int)
    assert data["cpus"] >= 1
    assert _optional(data["driver"], str)
    assert _is(data["source"], str)
    assert _optional(data["nvml_error"], str)
    assert _is(data["accelerators"], list)
    for entry in data["accelerators"]:
        assert _is(entry["index"], int)
        assert _is(entry["type"], str)
        for key in ("model", "uuid", "pci_bus_id", "cpu_affinity"):
            assert _optional(entry[key], str), key
        for key in ("memory_bytes", "numa_node"):
            assert _optional(entry[key], int), key
        assert entry["mig"] is True or entry["mig"] is False
    for link in data["links"]:
        assert _is(link, list)
        assert len(link) == 3
        assert _is(link[2], str)


def test_a_healthy_node_fills_every_spec_field(take: Take) -> None:
    data = json.loads(take("dgx-h100").to_json())
    assert isinstance(data["driver"], str)
    for entry in data["accelerators"]:
        for key in ("model", "uuid", "pci_bus_id", "memory_bytes", "numa_node", "cpu_affinity"):
            assert entry[key] is not None, key
        assert entry["error"] is None


def _schema_file() -> dict[str, object]:
    from importlib import resources

    text = resources.files("placement_native").joinpath("snapshot.schema.json").read_text()
    schema: dict[str, object] = json.loads(text)
    return schema


def test_the_shipped_schema_file_is_a_json_schema() -> None:
    import jsonschema

    jsonschema.Draft202012Validator.check_schema(_schema_file())


@pytest.mark.parametrize("machine", topology_names())
def test_every_snapshot_matches_the_shipped_schema_file(take: Take, machine: str) -> None:
    import jsonschema

    jsonschema.Draft202012Validator(_schema_file()).validate(take(machine).to_dict())


def test_the_schema_file_names_every_key_the_writer_writes(take: Take) -> None:
    schema = _schema_file()
    data = take("mig").to_dict()
    assert set(schema["required"]) == set(data)  # type: ignore[arg-type]
    accelerator = schema["$defs"]["accelerator"]  # type: ignore[index]
    assert set(accelerator["required"]) == set(data["accelerators"][0])


def test_the_schema_file_carries_exactly_the_tables_json_fields() -> None:
    from placement_native._fields import ACCELERATOR_FIELDS

    accelerator = _schema_file()["$defs"]["accelerator"]  # type: ignore[index]
    assert set(accelerator["properties"]) == {f.name for f in ACCELERATOR_FIELDS if f.json}
