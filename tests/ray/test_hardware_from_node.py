"""Device settings a node supplies at run time (a Franka's ROBOT_IP) reach the worker there."""

from __future__ import annotations

import json
from typing import Any

from placement_ray._cluster import Cluster
from placement_ray._launch import HARDWARE_CONFIG_ENV, launch
from placement_ray._worker import fill_hardware_from_node
from placement_ray.demo.workers import DemoWorker

FROM_NODE = {"robot_ip": "ROBOT_IP"}


def entry(**settings: Any) -> dict[str, Any]:
    return {"node_rank": 2, "robot_ip": None, "from_node": FROM_NODE, **settings}


def test_the_nodes_variable_fills_the_setting() -> None:
    environ = {HARDWARE_CONFIG_ENV: json.dumps(entry()), "ROBOT_IP": "10.0.0.9"}
    fill_hardware_from_node(environ)
    assert json.loads(environ[HARDWARE_CONFIG_ENV]) == {"node_rank": 2, "robot_ip": "10.0.0.9"}


def test_every_device_of_a_process_is_filled() -> None:
    environ = {HARDWARE_CONFIG_ENV: json.dumps([entry(), entry()]), "ROBOT_IP": "10.0.0.9"}
    fill_hardware_from_node(environ)
    assert [e["robot_ip"] for e in json.loads(environ[HARDWARE_CONFIG_ENV])] == ["10.0.0.9"] * 2


def test_a_config_without_node_settings_is_left_as_it_is() -> None:
    written = json.dumps({"node_rank": 2, "robot_ip": "10.0.0.1"})
    environ = {HARDWARE_CONFIG_ENV: written, "ROBOT_IP": "10.0.0.9"}
    fill_hardware_from_node(environ)
    assert environ[HARDWARE_CONFIG_ENV] == written


def test_a_launched_franka_without_robot_ip_gets_its_nodes(placement_cluster: Cluster) -> None:
    config = {
        "cluster": {
            "num_nodes": 3,
            "component_placement": {"arm": {"node_group": "franka", "placement": 0}},
            "node_groups": [
                {
                    "label": "franka",
                    "node_ranks": 2,
                    # What `export ROBOT_IP=...` before `ray start` gives on a real node.
                    "env_configs": [{"node_ranks": 2, "env_vars": [{"ROBOT_IP": "10.0.0.9"}]}],
                    "hardware": {"type": "Franka", "configs": [{"node_rank": 2}]},
                }
            ],
        }
    }
    with launch(config, {"arm": DemoWorker}, placement_cluster, timeout_s=120) as launched:
        assert json.loads(launched.plan.env("arm", 0)[HARDWARE_CONFIG_ENV])["from_node"] == (
            FROM_NODE
        )
        (seen,) = launched["arm"].execute("getenv", HARDWARE_CONFIG_ENV, timeout_s=60)
        device = json.loads(seen)
        assert device["robot_ip"] == "10.0.0.9"
        assert "from_node" not in device
