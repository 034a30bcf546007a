"""placement-ray: make placement plans real on a Ray cluster.

Connect to (or start) a Ray cluster with ``Cluster``, which discovers every node with a
placement-native snapshot taken on that node and orders nodes as SPEC 9 says; create
placement groups that are checked before they are created, pinned to planned nodes and
ordered by (node rank, physical GPU); slime's layouts with ``create_placement_groups``.
"""

from __future__ import annotations

import logging

from ._version import __version__
from .cluster import Cluster, wait_for_nodes
from .errors import (
    ArgumentError,
    ClusterError,
    ForeignClusterError,
    InfeasiblePlacementGroupError,
    NodeLostError,
    NodeOrderError,
    NodesNotReadyError,
    PlacementGroupTimeoutError,
    PlacementRayError,
    ProbeError,
)
from .failure import HealthReport, Occupant, check_health, occupants
from .feasibility import check_feasible
from .groups import (
    BundleSlot,
    OrderedPlacementGroup,
    create_placement_group,
    order_bundles,
    probe_bundle_gpus,
)
from .order import NODE_RANK_ENV_VARS, NODE_RANK_LABEL, NodeFacts, order_nodes
from .slime import RoleBundles, SlimeLayout, create_placement_groups

logging.getLogger(__name__).addHandler(logging.NullHandler())

__all__ = [
    "NODE_RANK_ENV_VARS",
    "NODE_RANK_LABEL",
    "ArgumentError",
    "BundleSlot",
    "Cluster",
    "ClusterError",
    "ForeignClusterError",
    "HealthReport",
    "InfeasiblePlacementGroupError",
    "NodeFacts",
    "NodeLostError",
    "NodeOrderError",
    "NodesNotReadyError",
    "Occupant",
    "OrderedPlacementGroup",
    "PlacementGroupTimeoutError",
    "PlacementRayError",
    "ProbeError",
    "RoleBundles",
    "SlimeLayout",
    "__version__",
    "check_feasible",
    "check_health",
    "create_placement_group",
    "create_placement_groups",
    "occupants",
    "order_bundles",
    "order_nodes",
    "probe_bundle_gpus",
    "wait_for_nodes",
]
