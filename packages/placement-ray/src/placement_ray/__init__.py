"""placement-ray: make placement plans real on a Ray cluster.

``Cluster`` connects to a Ray cluster (or starts a local one), discovers every node with a
placement-native snapshot taken on that node and orders nodes as docs/concepts/node-order.md
describes. On top of it there are two ways in.

A core plan, one Ray actor per placement, through :func:`launch`::

    from placement_ray import Cluster, launch

    cluster = Cluster(num_nodes=2)
    with launch("cluster.yaml", {"actor": Trainer, "rollout": Engine}, cluster) as job:
        job["actor"].execute("init")            # every rank at once, results in rank order
        port = job["actor"].hand_over_master_port()

slime's layout: ordered placement groups, a train group and rollout engines::

    from placement_ray import (
        create_placement_groups, create_rollout_engines, create_train_group,
    )

    layout = create_placement_groups(1, 8, 8, colocate=True, cluster=cluster)
    train = create_train_group(layout, Trainer, cluster=cluster)
    engines = create_rollout_engines(
        layout, Engine, num_gpus_per_engine=2, trainer_tp=8, cluster=cluster
    )
    train.train(0)

Every error derives from :class:`PlacementRayError` (see :mod:`placement_ray.errors`),
which derives from ``placement_core.PlacementError``. A plan made by any strategy
(core's ``plan_from_assignments``) launches like one made from a config.
Inside a worker, :func:`hand_over_master_port` / :func:`hand_over_ports` release the ports
the worker holds right before the code that binds them.
"""

from __future__ import annotations

import logging

from ._allocate import Worker
from ._attach import attach
from ._cluster import Cluster
from ._failure import HealthReport, Occupant, check_health, occupants
from ._launch import Launch, launch
from ._leases import LeaseRecord, QueueRecord, leases
from ._memory_live import GpuMemoryInUse, MemoryInUse
from ._node_order import NODE_RANK_LABEL
from ._placement_groups import BundleSlot, OrderedPlacementGroup, create_placement_group
from ._recover import RecoveryReport
from ._slime.layout import RoleBundles, SlimeLayout, create_placement_groups
from ._slime.rollout import RolloutEngine, RolloutEngines, create_rollout_engines
from ._slime.train_group import TrainGroup, create_train_group
from ._version import __version__
from ._worker import hand_over_master_port, hand_over_ports
from ._worker_group import DEFAULT_CALL_TIMEOUT_S, WorkerGroup
from .errors import (
    AcceleratorMismatchError,
    ArgumentError,
    BusyAcceleratorError,
    ClusterError,
    CpuBindingError,
    EngineAlignmentError,
    ForeignClusterError,
    InfeasiblePlacementGroupError,
    InterpreterError,
    JobNameTakenError,
    LaunchNotFoundError,
    LeaseError,
    LedgerVersionError,
    NativeCallError,
    NodeLostError,
    NodeOrderError,
    NodesNotReadyError,
    NoSpareNodeError,
    OversubscribedGPUError,
    PlacementGroupTimeoutError,
    PlacementRayError,
    PlacementRayWarning,
    PortNotHeldError,
    ProbeError,
    QueueTimeoutError,
    UnknownRoleError,
    WorkerCallError,
    WorkerStartError,
    WorkerStartTimeoutError,
    WorkerTimeoutError,
)

logging.getLogger(__name__).addHandler(logging.NullHandler())

__all__ = [
    "DEFAULT_CALL_TIMEOUT_S",
    "NODE_RANK_LABEL",
    "AcceleratorMismatchError",
    "ArgumentError",
    "BundleSlot",
    "BusyAcceleratorError",
    "Cluster",
    "ClusterError",
    "CpuBindingError",
    "EngineAlignmentError",
    "ForeignClusterError",
    "GpuMemoryInUse",
    "HealthReport",
    "InfeasiblePlacementGroupError",
    "InterpreterError",
    "JobNameTakenError",
    "Launch",
    "LaunchNotFoundError",
    "LeaseError",
    "LeaseRecord",
    "LedgerVersionError",
    "MemoryInUse",
    "NativeCallError",
    "NoSpareNodeError",
    "NodeLostError",
    "NodeOrderError",
    "NodesNotReadyError",
    "Occupant",
    "OrderedPlacementGroup",
    "OversubscribedGPUError",
    "PlacementGroupTimeoutError",
    "PlacementRayError",
    "PlacementRayWarning",
    "PortNotHeldError",
    "ProbeError",
    "QueueRecord",
    "QueueTimeoutError",
    "RecoveryReport",
    "RoleBundles",
    "RolloutEngine",
    "RolloutEngines",
    "SlimeLayout",
    "TrainGroup",
    "UnknownRoleError",
    "Worker",
    "WorkerCallError",
    "WorkerGroup",
    "WorkerStartError",
    "WorkerStartTimeoutError",
    "WorkerTimeoutError",
    "__version__",
    "attach",
    "check_health",
    "create_placement_group",
    "create_placement_groups",
    "create_rollout_engines",
    "create_train_group",
    "hand_over_master_port",
    "hand_over_ports",
    "launch",
    "leases",
    "occupants",
]
