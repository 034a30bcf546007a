"""Every hardware type RLinf defines, with its fields and checks, and values read on the node."""

from __future__ import annotations

import json
from typing import Any

import pytest

from placement_core import plan
from placement_core._config import load_config
from placement_core._env import HARDWARE_CONFIG_ENV
from placement_core._errors import ConfigError
from placement_core._hardware import (
    FROM_NODE_KEY,
    DualFrankaConfig,
    FrankaConfig,
    fill_from_node,
    hardware_model,
    registered_hardware,
)
from placement_core._inventory import Inventory
from placement_core.render import render_json, render_map, render_table


def robots(kind: str, *configs: dict[str, Any]) -> dict[str, Any]:
    return {
        "cluster": {
            "num_nodes": 2,
            "component_placement": {
                "actor": "0-7",
                "env": {"node_group": "robots", "placement": f"0-{len(configs) - 1}"},
            },
            "node_groups": [
                {
                    "label": "robots",
                    "node_ranks": 1,
                    "hardware": {"type": kind, "configs": list(configs)},
                }
            ],
        }
    }


def problem(document: dict[str, Any]) -> str:
    with pytest.raises(ConfigError) as caught:
        load_config(document)
    (only,) = caught.value.problems
    return str(only)


def test_every_rlinf_type_is_registered() -> None:
    assert set(registered_hardware()) >= {
        "ADB",
        "DOSW1",
        "DualFranka",
        "Franka",
        "GimArm",
        "SO101",
        "Turtle2",
        "YAM",
    }


@pytest.mark.parametrize(
    ("kind", "entry"),
    [
        (
            "DualFranka",
            {
                "left_robot_ip": "10.10.10.1",
                "right_robot_ip": "10.10.10.2",
                "left_camera_serials": [322142001230],
                "base_camera_type": "zed",
                "right_gripper_type": "robotiq",
                "right_gripper_connection": "/dev/ttyUSB0",
                "left_controller_node_rank": 0,
            },
        ),
        (
            "DOSW1",
            {"robot_url": "192.168.1.5", "left_arm_port": 50061, "camera_serials": [123]},
        ),
        ("Turtle2", {}),
        ("GimArm", {"can_interface": "can1", "arm_variant": "gim_arm", "enable_gripper": False}),
        ("YAM", {"left_ip": "192.168.1.10", "right_ip": "192.168.1.11"}),
        ("SO101", {"port": "/dev/ttyACM0", "arm_variant": "so100", "camera_cfgs": {"wrist": {}}}),
        ("ADB", {"device_id": "emulator-5554"}),
    ],
)
def test_rlinf_shaped_configs_load(kind: str, entry: dict[str, Any]) -> None:
    config = load_config(robots(kind, {"node_rank": 1, **entry}))
    (group,) = config.node_groups
    assert group.hardware is not None
    (device,) = group.hardware.configs
    assert type(device) is hardware_model(kind)
    assert device.node_rank == 1


@pytest.mark.parametrize(
    ("kind", "entry", "message"),
    [
        ("GimArm", {"arm_variant": "gim_arm_xxl"}, "arm_variant: expected one of"),
        ("SO101", {"arm_variant": "so102"}, "arm_variant: expected one of"),
        ("YAM", {"left_ip": "left", "right_ip": "10.0.0.1"}, "left_ip: expected an IPv4"),
        ("YAM", {"left_ip": "10.0.0.1"}, "right_ip: required key is missing"),
        ("DualFranka", {"right_robot_ip": "10.0.0"}, "right_robot_ip: expected an IPv4"),
        ("DOSW1", {"left_arm_port": 70000}, "left_arm_port: expected an integer <= 65535"),
        ("ADB", {}, "device_id: required key is missing"),
        ("Turtle2", {"robot_ip": "10.0.0.1"}, "robot_ip: unknown key"),
    ],
)
def test_rlinf_checks(kind: str, entry: dict[str, Any], message: str) -> None:
    assert message in problem(robots(kind, {"node_rank": 1, **entry}))


def test_a_dual_franka_controller_node_must_exist() -> None:
    document = robots("DualFranka", {"node_rank": 1, "right_controller_node_rank": 5})
    assert problem(document) == (
        "cluster.node_groups[0].hardware.configs[0].right_controller_node_rank: node 5 is out "
        "of range: num_nodes is 2, so valid node ranks are 0-1"
    )


# --- values read on the node -------------------------------------------------------------------


def test_a_franka_without_robot_ip_is_valid_and_reads_it_on_the_node() -> None:
    franka = FrankaConfig(node_rank=1)
    assert franka.robot_ip is None
    assert franka.from_node() == {"robot_ip": "ROBOT_IP"}
    assert franka.entry()[FROM_NODE_KEY] == {"robot_ip": "ROBOT_IP"}


def test_a_franka_with_robot_ip_reads_nothing_on_the_node() -> None:
    assert FROM_NODE_KEY not in FrankaConfig(node_rank=1, robot_ip="10.0.0.1").entry()


def test_dual_franka_reads_each_missing_arm_ip_on_the_node() -> None:
    arm = DualFrankaConfig(node_rank=0, left_robot_ip="10.0.0.1")
    assert arm.from_node() == {"right_robot_ip": "RIGHT_ROBOT_IP"}


def test_fill_from_node_takes_the_nodes_variable() -> None:
    entry = FrankaConfig(node_rank=1).entry()
    filled = fill_from_node(entry, {"ROBOT_IP": "10.0.0.9"})
    assert filled["robot_ip"] == "10.0.0.9"
    assert FROM_NODE_KEY not in filled


def test_fill_from_node_leaves_an_unset_variable_as_none() -> None:
    assert fill_from_node(FrankaConfig(node_rank=1).entry(), {})["robot_ip"] is None


def test_the_worker_env_says_where_robot_ip_comes_from() -> None:
    result = plan(robots("Franka", {"node_rank": 1}), Inventory.uniform(2, 8))
    entry = json.loads(result.env("env", 0)[HARDWARE_CONFIG_ENV])
    assert entry["robot_ip"] is None
    assert entry[FROM_NODE_KEY] == {"robot_ip": "ROBOT_IP"}


def test_the_table_shows_robot_ip_from_the_node() -> None:
    table = render_table(plan(robots("Franka", {"node_rank": 1}), Inventory.uniform(2, 8)))
    assert "  Franka #0 on node 1: robot_ip from the node (ROBOT_IP at run time)\n" in table


def test_the_map_shows_robot_ip_from_the_node() -> None:
    drawn = render_map(plan(robots("Franka", {"node_rank": 1}), Inventory.uniform(2, 8)))
    assert "Franka #0: e0 (robot_ip from the node)" in drawn


def test_the_json_config_records_the_variable() -> None:
    document = json.loads(
        render_json(plan(robots("Franka", {"node_rank": 1}), Inventory.uniform(2, 8)))
    )
    (device,) = document["nodes"][1]["hardware"]
    assert device["config"][FROM_NODE_KEY] == {"robot_ip": "ROBOT_IP"}
