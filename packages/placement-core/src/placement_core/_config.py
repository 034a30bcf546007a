"""The cluster configuration: the ``cluster:`` section of a job's YAML.

See docs/concepts/cluster-config.md and docs/concepts/placement-language.md.

``load_config`` reads a path, a YAML string or a mapping (a Hydra/OmegaConf-composed dict) and
returns a frozen :class:`ClusterConfig`. Every config rule (docs/concepts/cluster-config.md) is
checked, and every problem of one config is reported together in one
:class:`~placement_core.ConfigError` whose :class:`~placement_core.Problem` entries
carry YAML paths such as ``cluster.node_groups[1].env_configs[0].node_ranks``.

This module is the public face of the private modules that do the work: the models, where
each YAML key is declared once (``_models``), reusable field types (``_fields``), the one
validation pass (``_validate``), loading (``_loader``), the rules relating parts of a
config (``_checks``) and the JSON Schema generated from the models (``_schema``).
"""

from __future__ import annotations

from ._loader import load_config
from ._models import (
    AcceleratorSpec,
    ClusterConfig,
    ComponentRule,
    EnvConfig,
    HardwareSpec,
    InventoryEntry,
    NodeGroup,
)
from ._schema import config_json_schema
from ._vocab import ACCELERATOR_TYPES, RESERVED_LABELS

__all__ = [
    "ACCELERATOR_TYPES",
    "RESERVED_LABELS",
    "AcceleratorSpec",
    "ClusterConfig",
    "ComponentRule",
    "EnvConfig",
    "HardwareSpec",
    "InventoryEntry",
    "NodeGroup",
    "config_json_schema",
    "load_config",
]
