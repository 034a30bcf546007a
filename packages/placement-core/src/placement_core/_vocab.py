"""Names shared by validation and output: accelerator types, reserved labels, env vars.

A leaf module (it imports nothing from the package), so config checks and the worker
environment read the same facts without importing each other.

Each accelerator type hides the other devices of a node with its own variable; Ray sets
that variable itself unless the matching ``RAY_EXPERIMENTAL_NOSET_*`` variable is set,
so the planner sets both. The names follow Ray's accelerator managers
(``ray/_private/accelerators/*.py``). Intel is special: ``ONEAPI_DEVICE_SELECTOR`` takes
a backend-qualified list (``level_zero:0,1``), and Ray 2.5x/2.6x masks Intel GPUs with
``ZE_AFFINITY_MASK`` instead (older Ray used the selector), so both of Ray's opt-outs are
set.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Annotated, Literal, get_args

from pydantic import AfterValidator

__all__ = [
    "ACCELERATOR_TYPES",
    "CPU_AFFINITY_ENV",
    "HARDWARE_CONFIG_ENV",
    "HARDWARE_ENV_VARS",
    "HARDWARE_TYPE_ENV",
    "NODE_ORDERS",
    "RANK_ENV_VARS",
    "RAY_RESOURCES",
    "RESERVED_ENV_VARS",
    "RESERVED_LABELS",
    "RLINF_CLUSTER_KEYS",
    "ROOT_KEY",
    "TOPOLOGY_MODES",
    "VISIBILITY_ENV_VARS",
    "AcceleratorName",
    "AcceleratorType",
    "NodeOrder",
    "TopologyMode",
    "Visibility",
    "check_accelerator_type",
    "reserved_env_vars",
]

#: The built-in accelerator types (``placement_core._accelerators`` registers more).
AcceleratorType = Literal["nvidia", "amd", "ascend", "intel", "musa", "kunlun", "gaudi"]
ACCELERATOR_TYPES: tuple[str, ...] = get_args(AcceleratorType)

#: How a rule forms multi-accelerator processes from a node's links (``topology:``).
TopologyMode = Literal["any", "best", "nvlink"]
TOPOLOGY_MODES: tuple[str, ...] = get_args(TopologyMode)

#: How nodes are numbered before planning (``cluster.node_order``): as the inventory
#: gives them, or so that each NVLink domain's nodes are consecutive.
NodeOrder = Literal["inventory", "nvlink_domain"]
NODE_ORDERS: tuple[str, ...] = get_args(NodeOrder)

#: What a plan does with nodes whose NVLink fabric is degraded (``cluster.fabric_health``).
FabricHealthPolicy = Literal["refuse", "warn", "ignore"]

#: What ``replan`` does when no spare keeps a lost node's ``nvlink_group`` inside one
#: NVLink domain (``cluster.nvlink_on_loss``).
NvlinkOnLoss = Literal["warn", "refuse"]

#: Built-in node groups of every node; no declared group may use these labels.
RESERVED_LABELS = ("cluster", "node")


@dataclass(frozen=True, slots=True)
class Visibility:
    """How one accelerator type is hidden from a process.

    Attributes:
        env_var: The variable listing the visible devices.
        noset_env_vars: Variables that stop Ray from overwriting it.
        prefix: Text before the comma-separated ids (``level_zero:`` for Intel).
        hide_all: The value that shows no device at all (an empty list).
    """

    env_var: str
    noset_env_vars: tuple[str, ...]
    prefix: str = ""
    hide_all: str = ""

    def value(self, ids: Iterable[int]) -> str:
        """The variable's value for the given node-local device ids."""
        listed = ",".join(str(i) for i in ids)
        return self.prefix + listed if listed else self.hide_all


_CUDA = Visibility("CUDA_VISIBLE_DEVICES", ("RAY_EXPERIMENTAL_NOSET_CUDA_VISIBLE_DEVICES",))

# The registries behind the read-only views below; placement_core._accelerators adds to them.
_VISIBILITY: dict[str, Visibility] = {
    "nvidia": _CUDA,
    "kunlun": _CUDA,
    "amd": Visibility("HIP_VISIBLE_DEVICES", ("RAY_EXPERIMENTAL_NOSET_HIP_VISIBLE_DEVICES",)),
    "ascend": Visibility(
        "ASCEND_RT_VISIBLE_DEVICES", ("RAY_EXPERIMENTAL_NOSET_ASCEND_RT_VISIBLE_DEVICES",)
    ),
    "intel": Visibility(
        "ONEAPI_DEVICE_SELECTOR",
        (
            "RAY_EXPERIMENTAL_NOSET_ONEAPI_DEVICE_SELECTOR",
            "RAY_EXPERIMENTAL_NOSET_ZE_AFFINITY_MASK",
        ),
        prefix="level_zero:",
        hide_all="!level_zero:*",  # oneAPI's discard filter: no Level Zero device
    ),
    "musa": Visibility("MUSA_VISIBLE_DEVICES", ("RAY_EXPERIMENTAL_NOSET_MUSA_VISIBLE_DEVICES",)),
    "gaudi": Visibility(
        "HABANA_VISIBLE_MODULES", ("RAY_EXPERIMENTAL_NOSET_HABANA_VISIBLE_MODULES",)
    ),
}
# Ray's resource for each type: its accelerator managers' names (GPU, NPU, HPU); Ray has
# none for MUSA and Kunlun, whose nodes declare a custom resource of this name.
_RAY_RESOURCES: dict[str, str] = {
    "nvidia": "GPU",
    "amd": "GPU",
    "intel": "GPU",
    "ascend": "NPU",
    "gaudi": "HPU",
    "musa": "MUSA",
    "kunlun": "XPU",
}

#: Accelerator type -> how to set its visible devices (registered types included).
VISIBILITY_ENV_VARS: Mapping[str, Visibility] = MappingProxyType(_VISIBILITY)

#: Accelerator type -> the Ray resource that holds its devices (registered types included).
RAY_RESOURCES: Mapping[str, str] = MappingProxyType(_RAY_RESOURCES)


def check_accelerator_type(value: str) -> str:
    """``value`` when it is a registered accelerator type.

    Raises:
        ValueError: An unknown type (the message lists the registered ones).
    """
    if value not in _RAY_RESOURCES:
        known = ", ".join(repr(name) for name in sorted(_RAY_RESOURCES))
        raise ValueError(
            f"unknown accelerator type{_type_hint(value)}; expected one of the registered "
            f"types {known} (placement_core.register_accelerator adds one)"
        )
    return value


def _type_hint(value: object) -> str:
    """A did-you-mean for a type written in capitals (``Ascend``), as its Ray resource
    (``npu``) or with a typo."""
    if not isinstance(value, str) or len(value) > 40:
        return ""
    if value.lower() in _RAY_RESOURCES:
        return f" (did you mean {value.lower()!r}? types are lower case)"
    by_resource = sorted(t for t, r in _RAY_RESOURCES.items() if r.lower() == value.lower())
    if by_resource:
        names = " or ".join(repr(t) for t in by_resource)
        return f" (did you mean {names}? {value!r} is the Ray resource, not the type)"
    close = difflib.get_close_matches(value.lower(), list(_RAY_RESOURCES), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


#: An accelerator type a config or snapshot may name: a built-in or registered one.
AcceleratorName = Annotated[str, AfterValidator(check_accelerator_type)]

#: Rank and rendezvous variables every worker gets.
RANK_ENV_VARS: frozenset[str] = frozenset(
    {"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "NODE_RANK"}
    | {"MASTER_ADDR", "MASTER_PORT"}
)

#: The hardware type (``Franka``) of a process placed on hardware.
HARDWARE_TYPE_ENV = "PLACEMENT_HARDWARE_TYPE"
#: The JSON of the device's config entry (a JSON list when the process has several).
HARDWARE_CONFIG_ENV = "PLACEMENT_HARDWARE_CONFIG"
HARDWARE_ENV_VARS: frozenset[str] = frozenset({HARDWARE_TYPE_ENV, HARDWARE_CONFIG_ENV})
#: The CPUs a worker should run on (a Linux CPU list, ``0-23,96-119``), when known.
CPU_AFFINITY_ENV = "PLACEMENT_CPU_AFFINITY"


def reserved_env_vars() -> frozenset[str]:
    """Variables the planner owns now, the registered accelerator types' included."""
    return (
        RANK_ENV_VARS
        | HARDWARE_ENV_VARS
        | {CPU_AFFINITY_ENV}
        | frozenset(
            name
            for visibility in _VISIBILITY.values()
            for name in (visibility.env_var, *visibility.noset_env_vars)
        )
    )


#: Variables the planner owns for the built-in accelerator types; user ``env_vars`` may
#: not set them (nor those of registered types: :func:`reserved_env_vars`).
RESERVED_ENV_VARS: frozenset[str] = reserved_env_vars()

#: The top-level key of a job's YAML that holds the cluster config.
ROOT_KEY = "cluster"

#: Keys of RLinf's ``cluster:`` section that only RLinf uses (its scheduler, tracing and
#: communication settings, and the older ``num_gpus_per_node``): a config may carry them,
#: placement ignores them.
RLINF_CLUSTER_KEYS: tuple[str, ...] = (
    "auto_scheduler",
    "use_pre_process_policy",
    "use_wait_before_last_iter_policy",
    "recreate_nccl_groups",
    "rollout_use_all_gpus",
    "net_emulation",
    "tracer",
    "profiling",
    "num_gpus_per_node",
)
