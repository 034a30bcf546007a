"""A process placed on hardware gets its device's type and config entry.

See docs/concepts/worker-environment.md.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from placement_core import plan
from placement_core._config import load_config
from placement_core._env import (
    HARDWARE_CONFIG_ENV,
    HARDWARE_TYPE_ENV,
    RESERVED_ENV_VARS,
    hardware_env,
)
from placement_core._errors import ConfigError
from placement_core._inventory import Inventory
from placement_core.render._json import plan_to_dict

ARM_0 = {"robot_ip": "10.0.0.1", "node_rank": 1, "camera_serials": [322142001230]}
ARM_1 = {"robot_ip": "10.0.0.2", "node_rank": 1}


def config(placement: str = "0-1", **extra: Any) -> dict[str, Any]:
    return {
        "cluster": {
            "num_nodes": 2,
            "component_placement": {
                "actor": "0-7",
                "env": {"node_group": "franka", "placement": placement},
            },
            "node_groups": [
                {
                    "label": "franka",
                    "node_ranks": 1,
                    "hardware": {"type": "Franka", "configs": [ARM_0, ARM_1]},
                    **extra,
                }
            ],
        }
    }


def test_robot_process_gets_its_hardware_type_and_config() -> None:
    env = plan(config(), Inventory.uniform(2, 4)).env("env", 1)
    assert env[HARDWARE_TYPE_ENV] == "Franka"
    entry = json.loads(env[HARDWARE_CONFIG_ENV])
    assert (entry["robot_ip"], entry["node_rank"]) == ("10.0.0.2", 1)


def test_the_config_entry_is_the_validated_one() -> None:
    entry = json.loads(plan(config(), Inventory.uniform(2, 4)).env("env", 0)[HARDWARE_CONFIG_ENV])
    assert entry["camera_serials"] == ["322142001230"]
    assert entry["camera_type"] == "realsense"


def test_a_process_with_two_devices_gets_a_list_in_rank_order() -> None:
    env = plan(config("0-1:0"), Inventory.uniform(2, 4)).env("env", 0)
    ips = [entry["robot_ip"] for entry in json.loads(env[HARDWARE_CONFIG_ENV])]
    assert ips == ["10.0.0.1", "10.0.0.2"]


def test_accelerator_processes_get_no_hardware_variables() -> None:
    env = plan(config(), Inventory.uniform(2, 4)).env("actor", 0)
    assert HARDWARE_TYPE_ENV not in env
    assert HARDWARE_CONFIG_ENV not in env


def test_offline_json_shows_the_hardware_config() -> None:
    data = plan_to_dict(plan(config(), Inventory.uniform(2, 4)))
    env = data["components"]["env"][0]["env"]
    assert json.loads(env[HARDWARE_CONFIG_ENV])["robot_ip"] == "10.0.0.1"


def test_hardware_variables_are_reserved() -> None:
    assert {HARDWARE_TYPE_ENV, HARDWARE_CONFIG_ENV} <= RESERVED_ENV_VARS


def test_env_vars_may_not_set_the_hardware_config() -> None:
    env_configs = [{"node_ranks": 1, "env_vars": [{HARDWARE_CONFIG_ENV: "{}"}]}]
    with pytest.raises(ConfigError) as caught:
        load_config(config(env_configs=env_configs))
    (problem,) = caught.value.problems
    assert problem.path == "cluster.node_groups[0].env_configs[0].env_vars[0]"
    assert problem.message.startswith(f"{HARDWARE_CONFIG_ENV} is a reserved variable")


def test_hardware_env_of_one_device_is_its_object() -> None:
    assert hardware_env("Gripper", [{"port": "/dev/ttyUSB0", "node_rank": 0}]) == {
        HARDWARE_TYPE_ENV: "Gripper",
        HARDWARE_CONFIG_ENV: '{"port": "/dev/ttyUSB0", "node_rank": 0}',
    }
