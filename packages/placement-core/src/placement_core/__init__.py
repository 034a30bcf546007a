"""placement-core: decide which process of a distributed job runs on which node and accelerators.

Pure Python (pydantic, PyYAML). It plans for a cluster that exists only on paper; see
``placement_ray`` to make a plan real on a Ray cluster.
"""

from __future__ import annotations

import logging

from ._version import __version__
from .errors import (
    ConfigError,
    InventoryError,
    PlacementError,
    PlacementRuleError,
    PlacementSyntaxError,
    Problem,
)
from .inventory import Accelerator, HardwareDevice, Inventory, Node
from .ranks import format_rank_list, parse_rank_list

logging.getLogger(__name__).addHandler(logging.NullHandler())

__all__ = [
    "Accelerator",
    "ConfigError",
    "HardwareDevice",
    "Inventory",
    "InventoryError",
    "Node",
    "PlacementError",
    "PlacementRuleError",
    "PlacementSyntaxError",
    "Problem",
    "__version__",
    "format_rank_list",
    "parse_rank_list",
]
