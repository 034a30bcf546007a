"""The hardware registry: Franka built in, user types registered and used in configs."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from pydantic import BaseModel

from placement_core._config import load_config
from placement_core._errors import ConfigError
from placement_core._hardware import (
    FrankaConfig,
    HardwareConfig,
    hardware_model,
    register_hardware,
    registered_hardware,
    unregister_hardware,
)


class Gripper(HardwareConfig):
    """A user-defined device type."""

    port: str


@pytest.fixture
def gripper() -> Iterator[type[Gripper]]:
    register_hardware("Gripper", Gripper)
    yield Gripper
    unregister_hardware("Gripper")


def config_with(hardware: dict[str, Any]) -> dict[str, Any]:
    return {
        "cluster": {
            "num_nodes": 2,
            "component_placement": {"env": {"node_group": "robots", "placement": "0-1"}},
            "node_groups": [{"label": "robots", "node_ranks": "0-1", "hardware": hardware}],
        }
    }


def test_franka_is_built_in() -> None:
    assert "Franka" in registered_hardware()
    assert hardware_model("Franka") is FrankaConfig


def test_franka_defaults_follow_rlinf() -> None:
    franka = FrankaConfig(robot_ip="10.10.10.1", node_rank=0)
    assert franka.camera_serials == ()
    assert franka.camera_type == "realsense"
    assert franka.gripper_type == "franka"
    assert franka.controller_node_rank is None
    assert franka.disable_validate is False


def test_franka_accepts_ipv6_and_unquoted_serials() -> None:
    franka = FrankaConfig.model_validate(
        {"robot_ip": "fe80::1", "node_rank": 1, "camera_serials": [322142001230]}
    )
    assert franka.camera_serials == ("322142001230",)


def test_unknown_type_lookup_gives_none() -> None:
    assert hardware_model("Kuka") is None


def test_registered_type_is_usable_in_configs(gripper: type[Gripper]) -> None:
    hardware = {"type": "Gripper", "configs": [{"node_rank": 0, "port": "/dev/ttyUSB0"}]}
    spec = load_config(config_with(hardware)).group("robots").hardware
    assert spec is not None
    assert spec.configs == (gripper(node_rank=0, port="/dev/ttyUSB0"),)
    assert spec.configs[0].model_dump() == {"node_rank": 0, "port": "/dev/ttyUSB0"}


def test_registered_type_validates_its_own_fields(gripper: type[Gripper]) -> None:
    hardware = {"type": "Gripper", "configs": [{"node_rank": 0, "robot_ip": "10.0.0.1"}]}
    with pytest.raises(ConfigError) as caught:
        load_config(config_with(hardware))
    paths = {p.path for p in caught.value.problems}
    assert paths == {
        "cluster.node_groups[0].hardware.configs[0].port",
        "cluster.node_groups[0].hardware.configs[0].robot_ip",
    }


def test_unregistered_type_is_rejected_in_configs() -> None:
    hardware = {"type": "Gripper", "configs": [{"node_rank": 0, "port": "x"}]}
    with pytest.raises(
        ConfigError,
        match="unknown hardware type; registered types: ADB, DOSW1, DualFranka, Franka, GimArm",
    ):
        load_config(config_with(hardware))


def test_model_must_derive_from_hardware_config() -> None:
    class Plain(BaseModel):
        node_rank: int

    with pytest.raises(ConfigError, match=r"subclass of placement_core\.HardwareConfig"):
        register_hardware("Plain", Plain)  # type: ignore[arg-type]


def test_name_cannot_be_taken_twice(gripper: type[Gripper]) -> None:
    class Other(HardwareConfig):
        pass

    with pytest.raises(ConfigError, match="already registered"):
        register_hardware("Gripper", Other)
    register_hardware("Gripper", gripper)  # the same model again is fine


def test_replace_overrides_a_type(gripper: type[Gripper]) -> None:
    class Other(HardwareConfig):
        pass

    register_hardware("Gripper", Other, replace=True)
    assert hardware_model("Gripper") is Other


@pytest.mark.parametrize("name", ["", "   "])
def test_name_must_not_be_empty(name: str) -> None:
    with pytest.raises(ConfigError, match="non-empty type name"):
        register_hardware(name, FrankaConfig)
