"""Non-accelerator hardware (robot arms, phones, ...) that node groups declare.

See docs/concepts/cluster-config.md.

A node group's ``hardware:`` section names a registered **type** and lists one config per
device. Each type is a pydantic model deriving from :class:`HardwareConfig` (so every
device has a ``node_rank``). Every type RLinf defines is built in (``Franka``,
``DualFranka``, ``DOSW1``, ``Turtle2``, ``GimArm``, ``YAM``, ``SO101``, ``ADB``) with RLinf's
fields and checks; users register their own::

    class Gripper(HardwareConfig):
        port: str

    register_hardware("Gripper", Gripper)

Some fields may be left out and are then read **on the device's node at run time** from
an environment variable, as RLinf does (a Franka without ``robot_ip`` uses the node's
``ROBOT_IP``). A type lists them in :attr:`HardwareConfig.node_env`; offline, the plan
shows such a value as "from the node", and the device's config entry records where it
comes from under :data:`FROM_NODE_KEY` so the process on that node can fill it in
(:func:`fill_from_node`).
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Mapping
from typing import Annotated, Any, ClassVar, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, field_validator, model_validator

from ._errors import ConfigError, Problem
from ._problems import Issues
from ._scalars import is_int

__all__ = [
    "FROM_NODE_KEY",
    "ADBConfig",
    "DOSW1Config",
    "DualFrankaConfig",
    "FrankaConfig",
    "GimArmConfig",
    "HardwareConfig",
    "SO101Config",
    "Turtle2Config",
    "YAMConfig",
    "fill_from_node",
    "hardware_model",
    "register_hardware",
    "registered_hardware",
    "unregister_hardware",
]

NodeRank = Annotated[int, Field(strict=True, ge=0)]
_NOT_A_BOOL = "expected true or false (yes/no/on/off are text in YAML 1.2)"

Port = Annotated[int, Field(strict=True, ge=1, le=65535)]

#: The key of a hardware config entry that names, per field, the environment variable the
#: process on the device's node fills it from (``fill_from_node``).
FROM_NODE_KEY = "from_node"
"""Key of a device's config entry mapping each field left out to the node's env var."""


def _serial(value: object) -> object:
    # Camera serials are digit strings that YAML reads as ints when left unquoted.
    return str(value) if is_int(value) else value


Serial = Annotated[str, BeforeValidator(_serial)]
CameraType = Literal["realsense", "zed", "lumos"]


def _ip_address(value: str | None) -> str | None:
    if value is not None:
        try:
            ipaddress.ip_address(value)
        except ValueError:
            raise ValueError(f"expected an IPv4 or IPv6 address, got {value!r}") from None
    return value


class HardwareConfig(BaseModel):
    """Base of every hardware config: one device attached to node ``node_rank``.

    Subclasses add their own fields; unknown keys are errors and instances are frozen.

    Attributes:
        node_env: Class-level map of optional fields to the environment variable that
            supplies them on the device's node when the config leaves them out.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    node_env: ClassVar[Mapping[str, str]] = {}

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

    def from_node(self) -> dict[str, str]:
        """The fields left out here and read on the node: field name -> env variable."""
        return {name: env for name, env in self.node_env.items() if getattr(self, name) is None}

    def entry(self) -> dict[str, Any]:
        """The device's config entry as workers receive it (:data:`FROM_NODE_KEY` added)."""
        entry = self.model_dump()
        if missing := self.from_node():
            entry[FROM_NODE_KEY] = missing
        return entry


def fill_from_node(
    entry: Mapping[str, Any], environ: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """A device's config entry with the fields it reads on the node filled in.

    Run on the device's node (the Ray layer does, before the worker starts): each field
    listed under :data:`FROM_NODE_KEY` takes the value of its environment variable;
    a variable that is not set leaves the field None. The key itself is dropped.

    Args:
        entry: The config entry (``PLACEMENT_HARDWARE_CONFIG``'s JSON, one device).
        environ: The node's environment; ``os.environ`` when None.
    """
    environ = os.environ if environ is None else environ
    filled = {key: value for key, value in entry.items() if key != FROM_NODE_KEY}
    for name, variable in dict(entry.get(FROM_NODE_KEY) or {}).items():
        if filled.get(name) is None:
            filled[name] = environ.get(variable)
    return filled


class FrankaConfig(HardwareConfig):
    """A Franka Emika robot arm with its cameras (RLinf's ``Franka`` hardware type).

    Attributes:
        robot_ip: IP address of the arm's controller (IPv4 or IPv6); left out, the node's
            ``ROBOT_IP`` is used at run time.
        camera_serials: Serial numbers of the cameras attached to this robot.
        camera_type: Camera backend.
        gripper_type: Gripper backend.
        gripper_connection: Serial port of a Robotiq gripper (e.g. ``/dev/ttyUSB0``).
        controller_node_rank: Node that runs the arm's controller when it is not the node
            the device is attached to (e.g. cameras on a GPU server, arm on a NUC).
        disable_validate: Skip live checks of the robot's IP and cameras.
    """

    node_env: ClassVar[Mapping[str, str]] = {"robot_ip": "ROBOT_IP"}

    robot_ip: str | None = None
    camera_serials: tuple[Serial, ...] = ()
    camera_type: CameraType = "realsense"
    gripper_type: Literal["franka", "robotiq"] = "franka"
    gripper_connection: str | None = None
    controller_node_rank: NodeRank | None = None
    disable_validate: bool = False

    _ip = field_validator("robot_ip")(_ip_address)


class DualFrankaConfig(HardwareConfig):
    """Two Franka arms driven by one env process (RLinf's ``DualFranka`` hardware type).

    Attributes:
        left_robot_ip: Left arm's IP; left out, the node's ``LEFT_ROBOT_IP`` is used.
        right_robot_ip: Right arm's IP; left out, the node's ``RIGHT_ROBOT_IP`` is used.
        left_camera_serials: The left wrist camera(s).
        right_camera_serials: The right wrist camera(s).
        base_camera_serials: The third-person camera(s).
        camera_type: Camera backend of every slot without its own.
        base_camera_type: Camera backend of the base cameras (default: ``camera_type``).
        left_camera_type: Camera backend of the left cameras (default: ``camera_type``).
        right_camera_type: Camera backend of the right cameras (default: ``camera_type``).
        left_gripper_type: Left gripper backend.
        right_gripper_type: Right gripper backend.
        left_gripper_connection: Serial port of the left Robotiq gripper.
        right_gripper_connection: Serial port of the right Robotiq gripper.
        left_controller_node_rank: Node running the left arm's controller.
        right_controller_node_rank: Node running the right arm's controller.
    """

    node_env: ClassVar[Mapping[str, str]] = {
        "left_robot_ip": "LEFT_ROBOT_IP",
        "right_robot_ip": "RIGHT_ROBOT_IP",
    }

    left_robot_ip: str | None = None
    right_robot_ip: str | None = None
    left_camera_serials: tuple[Serial, ...] = ()
    right_camera_serials: tuple[Serial, ...] = ()
    base_camera_serials: tuple[Serial, ...] = ()
    camera_type: CameraType = "realsense"
    base_camera_type: CameraType | None = None
    left_camera_type: CameraType | None = None
    right_camera_type: CameraType | None = None
    left_gripper_type: Literal["franka", "robotiq"] = "franka"
    right_gripper_type: Literal["franka", "robotiq"] = "franka"
    left_gripper_connection: str | None = None
    right_gripper_connection: str | None = None
    left_controller_node_rank: NodeRank | None = None
    right_controller_node_rank: NodeRank | None = None

    _ips = field_validator("left_robot_ip", "right_robot_ip")(_ip_address)


class DOSW1Config(HardwareConfig):
    """A DOS-W1 dual-arm robot reached over AirBot gRPC (RLinf's ``DOSW1`` hardware type).

    Attributes:
        robot_url: Host name or IP of the gRPC endpoint.
        left_arm_port: gRPC port of the left follower arm.
        right_arm_port: gRPC port of the right follower arm.
        left_lead_port: gRPC port of the left leader arm.
        right_lead_port: gRPC port of the right leader arm.
        camera_serials: RealSense camera serial numbers.
    """

    robot_url: str = "localhost"
    left_arm_port: Port = 50051
    right_arm_port: Port = 50053
    left_lead_port: Port = 50050
    right_lead_port: Port = 50052
    camera_serials: tuple[Serial, ...] = ()


class Turtle2Config(HardwareConfig):
    """An X-Square Turtle2 robot (RLinf's ``Turtle2`` hardware type): the node rank only."""


class GimArmConfig(HardwareConfig):
    """A 6-DOF GimArm on a CAN bus (RLinf's ``GimArm`` hardware type).

    Attributes:
        can_interface: CAN socket interface (``can0``).
        arm_variant: ``gim_arm`` or ``gim_arm_xl``.
        camera_serials: Camera serial numbers; empty runs without cameras.
        camera_type: Camera backend.
        enable_gripper: Whether a gripper is attached and controlled.
        gripper_type: ``parallel`` or ``single_side``.
        controller_node_rank: Node running the arm's controller.
        disable_validate: Skip the CAN interface check.
    """

    can_interface: str = "can0"
    arm_variant: Literal["gim_arm", "gim_arm_xl"] = "gim_arm_xl"
    camera_serials: tuple[Serial, ...] = ()
    camera_type: Literal["realsense", "zed"] = "realsense"
    enable_gripper: bool = True
    gripper_type: Literal["parallel", "single_side"] = "parallel"
    controller_node_rank: NodeRank | None = None
    disable_validate: bool = False


class YAMConfig(HardwareConfig):
    """A YAM bimanual robot (RLinf's ``YAM`` hardware type).

    Attributes:
        left_ip: IP of the left arm's controller.
        right_ip: IP of the right arm's controller.
        camera_serials: RealSense serials; empty uses every detected camera.
        disable_validate: Skip connectivity and camera checks.
    """

    left_ip: str
    right_ip: str
    camera_serials: tuple[Serial, ...] = ()
    disable_validate: bool = False

    _ips = field_validator("left_ip", "right_ip")(_ip_address)


class SO101Config(HardwareConfig):
    """An SO-101 / SO-100 arm on a Feetech serial bus (RLinf's ``SO101`` hardware type).

    Attributes:
        port: Serial port of the motor bus.
        leader_port: Serial port of the leader arm (teleoperation).
        arm_variant: ``so101`` or ``so100``.
        calibration_id: LeRobot calibration id of the follower arm.
        leader_calibration_id: LeRobot calibration id of the leader arm.
        camera_cfgs: Camera settings by camera name.
        use_degrees: Joint angles in degrees (else radians).
        disable_validate: Skip the serial port check.
    """

    port: str = "/dev/tty.usbmodem*"
    leader_port: str | None = None
    arm_variant: Literal["so101", "so100"] = "so101"
    calibration_id: str = "default"
    leader_calibration_id: str | None = None
    camera_cfgs: dict[str, dict[str, Any]] = Field(default_factory=dict)
    use_degrees: bool = True
    disable_validate: bool = False


class ADBConfig(HardwareConfig):
    """An Android phone driven over ADB (RLinf's ``ADB`` hardware type).

    Attributes:
        device_id: The phone's ADB device id.
        adb_path: The ``adb`` executable on the node (checked there, not offline).
    """

    device_id: str
    adb_path: str = "adb"


_REGISTRY: dict[str, type[HardwareConfig]] = {
    "ADB": ADBConfig,
    "DOSW1": DOSW1Config,
    "DualFranka": DualFrankaConfig,
    "Franka": FrankaConfig,
    "GimArm": GimArmConfig,
    "SO101": SO101Config,
    "Turtle2": Turtle2Config,
    "YAM": YAMConfig,
}


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
                    "the config model must be a subclass of placement_core.HardwareConfig (it "
                    "provides node_rank)",
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
