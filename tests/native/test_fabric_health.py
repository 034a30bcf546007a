"""Every fabric state, status and health field through the fake NVML kit, per GPU, read
by both backends and planned by core; and a tray whose health changes between two
snapshots."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from placement_native.testing import FakeTopologyError, degraded_tray, health_mask

from .conftest import Take, UseNode

HEALTHY = health_mask(
    degraded_bandwidth=False,
    route_recovery=False,
    route_unhealthy=False,
    access_timeout_recovery=False,
    incorrect_configuration="none",
)

# (fabric change of GPU 2, the reason core names)
DEGRADED: list[tuple[dict[str, Any], str]] = [
    ({"state": "not_started"}, "fabric state not_started"),
    ({"state": "in_progress"}, "fabric state in_progress"),
    ({"status": 3}, "fabric status not_supported"),
    ({"status": 77}, "fabric status error_77"),
    ({"health_mask": health_mask(degraded_bandwidth=True)}, "degraded bandwidth"),
    ({"health_mask": health_mask(route_recovery=True)}, "route recovery"),
    ({"health_mask": health_mask(route_unhealthy=True)}, "route unhealthy"),
    ({"health_mask": health_mask(access_timeout_recovery=True)}, "access timeout recovery"),
    (
        {"health_mask": health_mask(incorrect_configuration="incorrect_sysguid")},
        "incorrect configuration: incorrect system GUID",
    ),
    (
        {"health_mask": health_mask(incorrect_configuration="incorrect_chassis_sn")},
        "incorrect configuration: incorrect chassis serial number",
    ),
    (
        {"health_mask": health_mask(incorrect_configuration="no_partition")},
        "incorrect configuration: no partition",
    ),
    (
        {"health_mask": health_mask(incorrect_configuration="insufficient_nvlinks")},
        "incorrect configuration: insufficient NVLinks",
    ),
]


def _plan_warnings(paths: list[Path], rule: str = "0-7") -> tuple[str, ...]:
    from placement_core import inventory_for, load_config, plan

    config = load_config(
        f"cluster:\n  num_nodes: {len(paths)}\n  component_placement:\n    actor: {rule}\n"
    )
    return plan(config, inventory_for(config, snapshots=paths)).warnings


def test_health_mask_builds_nvml_h_fields() -> None:
    assert health_mask() == 0
    assert health_mask(degraded_bandwidth=True) == 1
    assert health_mask(route_recovery=False) == 2 << 2
    assert health_mask(incorrect_configuration="no_partition") == 4 << 8
    assert HEALTHY == 0b1010_1010 | 1 << 8


def test_an_unknown_configuration_is_a_clear_error() -> None:
    with pytest.raises(FakeTopologyError, match="no_partition"):
        health_mask(incorrect_configuration="broken")


def test_degraded_tray_refuses_a_gpu_it_does_not_have() -> None:
    with pytest.raises(FakeTopologyError, match="GPUs 0-3, not 9"):
        degraded_tray({9: {"state": "in_progress"}})


@pytest.mark.parametrize(("change", "reason"), DEGRADED, ids=[r for _, r in DEGRADED])
def test_each_degraded_state_reaches_the_plan_naming_node_gpu_and_field(
    take: Take, tmp_path: Path, change: dict[str, Any], reason: str
) -> None:
    healthy = take(degraded_tray({g: {"health_mask": HEALTHY} for g in range(4)}))
    sick_tray = degraded_tray({**{g: {"health_mask": HEALTHY} for g in range(4)}, 2: change})
    for gpu in sick_tray.gpus:  # another machine: GPUs of its own
        gpu.uuid = gpu.uuid[:-4] + "5eed"
    sick = take(sick_tray)
    paths = [tmp_path / "n0.json", tmp_path / "n1.json"]
    paths[0].write_text(healthy.to_json(), encoding="utf-8")
    paths[1].write_text(sick.to_json(), encoding="utf-8")
    warnings = _plan_warnings(paths)
    [warning] = [w for w in warnings if "runs on" in w]
    assert f"node 1 GPU 2: {reason}" in warning


def test_a_healthy_tray_plans_without_a_fabric_warning(take: Take, tmp_path: Path) -> None:
    path = tmp_path / "n0.json"
    path.write_text(take(degraded_tray({0: {"health_mask": HEALTHY}})).to_json(), "utf-8")
    assert not [w for w in _plan_warnings([path], "0-3") if "fabric" in w]


def test_unknown_health_bits_from_the_driver_are_refused_by_core(
    take: Take, tmp_path: Path
) -> None:
    from placement_core import InventoryError

    path = tmp_path / "n0.json"
    path.write_text(take(degraded_tray({3: {"health_mask": 1 << 16}})).to_json(), "utf-8")
    with pytest.raises(InventoryError, match=r"accelerators\[3\]\.fabric\.health_mask"):
        _plan_warnings([path], "0-3")


def test_a_tray_whose_health_changes_between_two_snapshots(
    use_node: UseNode, nvml_backend: str, tmp_path: Path
) -> None:
    from placement_native import _snapshot

    fake = use_node(degraded_tray({}))
    before = _snapshot.take(nvml_backend)
    fake.change(degraded_tray({1: {"health_mask": health_mask(route_unhealthy=True)}}))
    after = _snapshot.take(nvml_backend)
    assert [a.fabric.health_mask for a in before.accelerators if a.fabric] == [0, 0, 0, 0]
    assert [a.fabric.health_mask for a in after.accelerators if a.fabric] == [0, 16, 0, 0]
    first, second = tmp_path / "before.json", tmp_path / "after.json"
    first.write_text(before.to_json(), encoding="utf-8")
    second.write_text(after.to_json(), encoding="utf-8")
    assert not [w for w in _plan_warnings([first], "0-3") if "degraded" in w]
    assert any("node 0 GPU 1: route unhealthy" in w for w in _plan_warnings([second], "0-3"))
