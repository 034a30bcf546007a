"""placement-core: decide which process of a distributed job runs on which node and accelerators.

Pure Python (pydantic, PyYAML). It plans for a cluster that exists only on paper; see
``placement_ray`` to make a plan real on a Ray cluster.

>>> from placement_core import Inventory, load_config, plan
>>> config = load_config({"cluster": {"num_nodes": 2, "component_placement": {"actor": "4-11"}}})
>>> p = plan(config, Inventory.uniform(2, 8))
>>> [(x.node_rank, x.hardware_ranks) for x in p.components["actor"][3:5]]
[(0, (7,)), (1, (0,))]
"""

from __future__ import annotations

import logging

from ._accelerators import (
    RAY_RESOURCES,
    AcceleratorKind,
    accelerator_kind,
    ray_resource,
    register_accelerator,
    registered_accelerators,
)
from ._assignments import plan_from_assignments
from ._busy import BusyAccelerator, busy_accelerators
from ._config import (
    AcceleratorSpec,
    ClusterConfig,
    ComponentRule,
    EnvConfig,
    HardwareSpec,
    InventoryEntry,
    NodeGroup,
    config_json_schema,
    load_config,
)
from ._env import (
    CPU_AFFINITY_ENV,
    HARDWARE_CONFIG_ENV,
    HARDWARE_TYPE_ENV,
    RANK_ENV_VARS,
    RESERVED_ENV_VARS,
    VISIBILITY_ENV_VARS,
    check_user_env,
    hardware_env,
    visibility_env,
    worker_env,
)
from ._errors import (
    ConfigError,
    DoesNotFitError,
    InventoryError,
    NoSpareError,
    PlacementError,
    PlacementRuleError,
    PlacementSyntaxError,
    Problem,
)
from ._hardware import (
    FROM_NODE_KEY,
    FrankaConfig,
    HardwareConfig,
    fill_from_node,
    register_hardware,
    registered_hardware,
)
from ._inventory import Accelerator, AcceleratorProcess, Fabric, HardwareDevice, Inventory, Node
from ._memory import (
    ESTIMATOR_FIELDS,
    Headroom,
    MemoryReport,
    MemorySpec,
    check_memory,
    load_memory,
    parse_headroom,
    require_fit,
)
from ._memory_megatron import megatron_fields_from_namespace
from ._model_parallel import ModelParallelLayout, derive_model_parallel, plan_model_parallel
from ._nvlink import order_by_nvlink_domain
from ._plan import NodeOccupancy, Occupancy, Plan, plan
from ._ranks import format_rank_list, parse_rank_list
from ._records import Placement, Placements
from ._replan import Replan, replan
from ._rules import parse_rule
from ._sharing import shared_ranks
from ._sources import attach_hardware, inventory_for, inventory_from_snapshots, node_from_snapshot
from ._spaces import ResourceSpace, build_space
from ._spares import Move, Spares
from ._strategies import flexible, node, packed, strided_rollout
from ._version import __version__

logging.getLogger(__name__).addHandler(logging.NullHandler())

__all__ = [
    "CPU_AFFINITY_ENV",
    "ESTIMATOR_FIELDS",
    "FROM_NODE_KEY",
    "HARDWARE_CONFIG_ENV",
    "HARDWARE_TYPE_ENV",
    "RANK_ENV_VARS",
    "RAY_RESOURCES",
    "RESERVED_ENV_VARS",
    "VISIBILITY_ENV_VARS",
    "Accelerator",
    "AcceleratorKind",
    "AcceleratorProcess",
    "AcceleratorSpec",
    "BusyAccelerator",
    "ClusterConfig",
    "ComponentRule",
    "ConfigError",
    "DoesNotFitError",
    "EnvConfig",
    "Fabric",
    "FrankaConfig",
    "HardwareConfig",
    "HardwareDevice",
    "HardwareSpec",
    "Headroom",
    "Inventory",
    "InventoryEntry",
    "InventoryError",
    "MemoryReport",
    "MemorySpec",
    "ModelParallelLayout",
    "Move",
    "NoSpareError",
    "Node",
    "NodeGroup",
    "NodeOccupancy",
    "Occupancy",
    "Placement",
    "PlacementError",
    "PlacementRuleError",
    "PlacementSyntaxError",
    "Placements",
    "Plan",
    "Problem",
    "Replan",
    "ResourceSpace",
    "Spares",
    "__version__",
    "accelerator_kind",
    "attach_hardware",
    "build_space",
    "busy_accelerators",
    "check_memory",
    "check_user_env",
    "config_json_schema",
    "derive_model_parallel",
    "fill_from_node",
    "flexible",
    "format_rank_list",
    "hardware_env",
    "inventory_for",
    "inventory_from_snapshots",
    "load_config",
    "load_memory",
    "megatron_fields_from_namespace",
    "node",
    "node_from_snapshot",
    "order_by_nvlink_domain",
    "packed",
    "parse_headroom",
    "parse_rank_list",
    "parse_rule",
    "plan",
    "plan_from_assignments",
    "plan_model_parallel",
    "ray_resource",
    "register_accelerator",
    "register_hardware",
    "registered_accelerators",
    "registered_hardware",
    "replan",
    "require_fit",
    "shared_ranks",
    "strided_rollout",
    "visibility_env",
    "worker_env",
]

# Tracebacks and reprs name an error where users import it from, not its private module;
# pickle finds it there too.
for _name in __all__:
    _value = globals()[_name]
    if isinstance(_value, type) and issubclass(_value, BaseException):
        _value.__module__ = __name__
del _name, _value
