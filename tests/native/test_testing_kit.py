"""placement_native.testing: named machines, JSON topologies, the context and the fixture."""

from __future__ import annotations

import json
import os
from importlib import metadata, resources
from pathlib import Path

import pytest

import placement_native
from placement_native import Process, _snapshot
from placement_native.testing import (
    CACHE_ENV,
    FakeNVMLBuildError,
    FakeTopologyError,
    fake_nvml,
    library,
    load_topology,
    topology,
    topology_names,
)
from placement_native.testing.pytest_plugin import FakeNvmlFixture

from .conftest import Take

KIT_ENV = (
    "PLACEMENT_NVML_LIBRARY",
    "FAKE_NVML_TOPOLOGY",
    "PLACEMENT_SYSFS_ROOT",
    "PLACEMENT_MEMINFO",
)

SMALL_NODE = {
    "driver": "535.104.05",
    "gpus": [
        {"name": "NVIDIA L4", "memory": 24152899584, "numa": 0, "cpus": "0-15", "mig": None},
        {"name": "NVIDIA L4", "memory": 24152899584, "numa": 1, "cpus": "16-31", "mig": None},
    ],
    "levels": [[0, 1, "SYS"]],
    "p2p": [[0, 1, "CNS"]],
}


def test_the_brief_machines_are_all_named() -> None:
    wanted = {"dgx-h100", "pcie-4x-nvlink-bridges", "pcie-2-switches", "mig"}
    assert wanted | {"no-permission", "old-driver"} <= set(topology_names())


def test_nvlink_bridges_pair_gpus_other_than_index_neighbours(take: Take) -> None:
    snap = take("pcie-4x-nvlink-bridges")
    assert [a.nvlink_peers for a in snap.accelerators] == [
        ((2, 4),),
        ((3, 4),),
        ((0, 4),),
        ((1, 4),),
    ]
    assert (snap.link(0, 1).label, snap.link(0, 2).label) == ("PIX", "NV4")  # type: ignore[union-attr]


def test_the_fake_host_reports_the_numa_nodes_of_its_gpus(take: Take) -> None:
    assert take("dgx-h100").numa_nodes == 2


def test_snapshot_sees_the_machine_inside_the_context_only(nvml_backend: str) -> None:
    with fake_nvml("mig"):
        inside = _snapshot.take(nvml_backend)
    assert [a.mig for a in inside.accelerators] == [True, False]


def test_leaving_the_context_restores_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PLACEMENT_NVML_LIBRARY", "/opt/real/libnvidia-ml.so.1")
    monkeypatch.delenv("FAKE_NVML_TOPOLOGY", raising=False)
    before = {key: os.environ.get(key) for key in KIT_ENV}
    with fake_nvml("dgx-h100") as fake:
        assert {key: os.environ[key] for key in KIT_ENV} == fake.env
        files = fake.topology_file.parent
    assert {key: os.environ.get(key) for key in KIT_ENV} == before
    assert not files.exists()


def test_the_public_snapshot_sees_the_machine() -> None:
    with fake_nvml("old-driver"):
        snap = placement_native.snapshot(strict=True)
    assert [a.model for a in snap.accelerators] == ["Tesla V100-SXM2-32GB"] * 2


def test_a_json_file_describes_a_machine(tmp_path: Path, nvml_backend: str) -> None:
    path = tmp_path / "l4.json"
    path.write_text(json.dumps(SMALL_NODE))
    with fake_nvml(path):
        snap = _snapshot.take(nvml_backend, strict=True)
    assert [a.model for a in snap.accelerators] == ["NVIDIA L4", "NVIDIA L4"]
    assert [a.numa_node for a in snap.accelerators] == [0, 1]
    assert (snap.driver, snap.link(0, 1).label) == ("535.104.05", "SYS")  # type: ignore[union-attr]
    assert len({a.uuid for a in snap.accelerators}) == 2


def test_a_json_file_describes_busy_gpus(tmp_path: Path, nvml_backend: str) -> None:
    busy = {"memory_used": 3 << 30, "processes": [{"pid": 4242, "used_memory": 3 << 30}]}
    unknown = {"processes": [{"pid": 7}]}  # used_memory left out: NVML's "not available"
    path = tmp_path / "busy.json"
    path.write_text(json.dumps({"gpus": [busy, unknown]}))
    with fake_nvml(path):
        snap = _snapshot.take(nvml_backend, strict=True)
    assert snap.accelerators[0].memory_used_bytes == 3 << 30
    assert snap.accelerators[0].processes == (Process(4242, 3 << 30),)
    assert snap.accelerators[1].processes == (Process(7, None),)


def test_a_json_file_may_name_nvml_error_codes(tmp_path: Path) -> None:
    data = {"gpus": [{"fail": {"nvmlDeviceGetUUID": "NVML_ERROR_NO_PERMISSION"}}]}
    path = tmp_path / "denied.json"
    path.write_text(json.dumps(data))
    assert load_topology(path).gpus[0].fail == {"nvmlDeviceGetUUID": 4}


@pytest.mark.parametrize(
    ("change", "field", "message"),
    [
        ({"gpu": []}, "gpu", "unknown field 'gpu'"),
        ({"gpus": [{"memory": "80GB"}]}, "gpus[0].memory", "expected int, got '80GB'"),
        ({"levels": [[0, 1, "NVLINK"]]}, "levels[0, 1]", "one of PIX, PXB, PHB, NODE, SYS"),
        ({"levels": [[0, 5, "PIX"]]}, "levels[0, 5]", "GPU indexes 0..1"),
        ({"gpus": [{"nvlink_slots": 2, "nvlinks": [{"link": 0}]}]}, "", "missing field"),
        ({"gpus": [{"fail": {"nvmlInit": "NOPE"}}]}, "gpus[0].fail.nvmlInit", "NVML return code"),
        ({"gpus": [{"name": "two\nlines"}]}, "gpus[0].name", "on one line"),
        ({"gpus": [{"processes": [{"used_memory": 1}]}]}, "", "missing field 'pid'"),
        ({"gpus": [{"processes": [{"pid": -1}]}]}, "gpus[0].processes[0].pid", "0..4294967295"),
        (
            {"gpus": [{"processes": [{"pid": 7, "mig_slot": 0}]}]},
            "gpus[0].processes[0].mig_slot",
            "null (no mig_devices)",
        ),
        ({"gpus": [{"memory": 10, "memory_used": 11}]}, "gpus[0].memory_used", "at most memory"),
    ],
)
def test_a_bad_topology_file_names_the_field(
    tmp_path: Path, change: dict[str, object], field: str, message: str
) -> None:
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({**SMALL_NODE, **change}))
    with pytest.raises(FakeTopologyError, match=r"expected|unknown|missing") as info:
        load_topology(path)
    assert str(path) in str(info.value)
    assert message in str(info.value)
    assert field in info.value.field
    assert isinstance(info.value, ValueError)


def test_a_file_that_is_not_json_says_where(tmp_path: Path) -> None:
    path = tmp_path / "machine.json"
    path.write_text("{gpus: []}")
    with pytest.raises(FakeTopologyError, match=r"machine.json is not JSON: .*line 1"):
        load_topology(path)


def test_an_unknown_name_lists_the_known_ones() -> None:
    with pytest.raises(FakeTopologyError, match=r"expected one of dgx-h100, .*got 'dgx-a100'"):
        fake_nvml("dgx-a100")


def test_each_call_gives_a_fresh_machine() -> None:
    first = topology("dgx-h100")
    first.gpus.clear()
    assert len(topology("dgx-h100").gpus) == 8


def test_the_c_source_ships_as_package_data() -> None:
    source = resources.files("placement_native.testing").joinpath("fake_nvml.c")
    assert "nvmlInit_v2" in source.read_text(encoding="utf-8")


def test_the_fixture_is_registered_for_every_pytest_run() -> None:
    plugins = {e.name: e.value for e in metadata.entry_points(group="pytest11")}
    assert plugins.get("placement_native") == "placement_native.testing.pytest_plugin"


@pytest.mark.parametrize("fake_nvml", ["mig", "pcie-2-switches"], indirect=True)
def test_the_fixture_selects_its_parameter_before_the_test(fake_nvml: FakeNvmlFixture) -> None:
    assert fake_nvml.active is not None
    expected = len(fake_nvml.active.topology.gpus)
    assert len(placement_native.snapshot().accelerators) == expected


def test_without_a_compiler_the_error_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    monkeypatch.delenv("CC", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(FakeNVMLBuildError, match=r"no C compiler found.*install one") as info:
        library()
    assert info.value.compiler == ""
    assert isinstance(info.value, RuntimeError)


def test_a_cc_that_does_not_exist_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    monkeypatch.setenv("CC", "no-such-cc --quiet")
    with pytest.raises(FakeNVMLBuildError, match="CC='no-such-cc --quiet'"):
        library()


def test_a_failing_compile_reports_the_compiler(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    monkeypatch.setenv("CC", "false")
    with pytest.raises(FakeNVMLBuildError, match=r"with 'false' failed \(exit 1\)"):
        library(old_driver=True)
    assert not list((tmp_path / "cache").rglob("libnvidia-ml.so.1"))


def test_the_library_is_built_once_into_the_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    first = library()
    assert first.is_relative_to(tmp_path / "cache")
    monkeypatch.setenv("CC", "false")  # a second build would fail
    assert library() == first


def test_the_fake_machine_serves_its_host_memory(nvml_backend: str) -> None:
    with fake_nvml("dgx-h100", host_memory_bytes=3 << 30):
        snapshot = _snapshot.take(nvml_backend)
    assert snapshot.host_memory_bytes == 3 << 30
    assert snapshot.to_dict()["host_memory_bytes"] == 3 << 30
