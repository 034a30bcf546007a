"""Non-accelerator hardware (robot arms, ...) that node groups declare.

See docs/concepts/cluster-config.md.

A node group's ``hardware:`` section names a registered **type** and lists one config per
device. Each type is a pydantic model deriving from :class:`HardwareConfig` (so every
device has a ``node_rank``); ``Franka`` is built in and users register their own::

    class Gripper(HardwareConfig):
        port: str

    register_hardware("Gripper", Gripper)
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, field_validator, model_validator

from ._problems import Issues
from ._scalars import is_int
from .errors import ConfigError, Problem

__all__ = [
    "FrankaConfig",
    "HardwareConfig",
    "hardware_model",
    "register_hardware",
    "registered_hardware",
    "unregister_hardware",
]

NodeRank = Annotated[int, Field(strict=True, ge=0)]
_NOT_A_BOOL = "expected true or false (yes/no/on/off are text in YAML 1.2)"


def _serial(value: object) -> object:
    # Camera serials are digit strings that YAML reads as ints when left unquoted.
    return str(value) if is_int(value) else value


class HardwareConfig(BaseModel):
    """Base of every hardware config: one device attached to node ``node_rank``.

    Subclasses add their own fields; unknown keys are errors and instances are frozen.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    node_rank: NodeRank

    @model_validator(mode="before")
    @classmethod
    def _real_booleans(cls, data: Any) -> Any:
        # pydantic would read the text yes/on/1 as true; a config means what it says.
        if not isinstance(data, Mapping):
            return data
        wrong = [
            (f".{name}", _NOT_A_BOOL, data[name])
            for name, info in cls.model_fields.items()
            if info.annotation in (bool, bool | None)
            and name in data
            and not isinstance(data[name], bool | None)
        ]
        if wrong:
            raise Issues(wrong)
        return data


class FrankaConfig(HardwareConfig):
    """A Franka Emika robot arm with its cameras (RLinf's ``Franka`` hardware type).

    Attributes:
        robot_ip: IP address of the arm's controller (IPv4 or IPv6).
        camera_serials: Serial numbers of the cameras attached to this robot.
        camera_type: Camera backend.
        gripper_type: Gripper backend.
        gripper_connection: Serial port of a Robotiq gripper (e.g. ``/dev/ttyUSB0``).
        controller_node_rank: Node that runs the arm's controller when it is not the node
            the device is attached to (e.g. cameras on a GPU server, arm on a NUC).
        disable_validate: Skip live checks of the robot's IP and cameras.
    """

    robot_ip: str
    camera_serials: tuple[Annotated[str, BeforeValidator(_serial)], ...] = ()
    camera_type: Literal["realsense", "zed", "lumos"] = "realsense"
    gripper_type: Literal["franka", "robotiq"] = "franka"
    gripper_connection: str | None = None
    controller_node_rank: NodeRank | None = None
    disable_validate: bool = False

    @field_validator("robot_ip")
    @classmethod
    def _ip(cls, value: str) -> str:
        try:
            ipaddress.ip_address(value)
        except ValueError:
            raise ValueError(f"expected an IPv4 or IPv6 address, got {value!r}") from None
        return value


_REGISTRY: dict[str, type[HardwareConfig]] = {"Franka": FrankaConfig}


def register_hardware(
    name: str, config_model: type[HardwareConfig], *, replace: bool = False
) -> None:
    """Make a hardware type usable as ``hardware.type: <name>`` in node groups.

    Args:
        name: The type name as written in YAML (case-sensitive).
        config_model: A :class:`HardwareConfig` subclass describing one device.
        replace: Allow replacing an already registered type of the same name.

    Raises:
        ConfigError: ``name`` is empty or taken, or ``config_model`` does not derive from
            :class:`HardwareConfig`.
    """
    where = f"hardware type {name!r}"
    if not isinstance(name, str) or not name.strip():
        raise ConfigError([Problem(where, "expected a non-empty type name", name)])
    if not (isinstance(config_model, type) and issubclass(config_model, HardwareConfig)):
        raise ConfigError(
            [
                Problem(
                    where,
                    "the config model must be a subclass of placement_core.hardware."
                    "HardwareConfig (it provides node_rank)",
                    config_model,
                )
            ]
        )
    if name in _REGISTRY and _REGISTRY[name] is not config_model and not replace:
        raise ConfigError([Problem(where, "already registered; pass replace=True to override it")])
    _REGISTRY[name] = config_model


def unregister_hardware(name: str) -> None:
    """Remove a registered hardware type (no-op when it is not registered)."""
    _REGISTRY.pop(name, None)


def registered_hardware() -> tuple[str, ...]:
    """Names of every registered hardware type, sorted."""
    return tuple(sorted(_REGISTRY))


def hardware_model(name: str) -> type[HardwareConfig] | None:
    """The config model registered for ``name``, or None when the type is unknown."""
    return _REGISTRY.get(name)
