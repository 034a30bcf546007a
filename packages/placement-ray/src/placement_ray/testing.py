"""Test placement code on a simulated Ray cluster: labelled loopback nodes, logical GPUs.

``SimulatedCluster`` starts a multi-node Ray cluster inside this machine
(``ray.cluster_utils.Cluster``): every node binds ``127.0.0.1``, node ``i`` carries the
label ``node-rank=i`` (and ``PLACEMENT_NODE_RANK=i`` in its environment), has
``gpus_per_node`` logical GPUs and, optionally, a fake NVML machine
(``placement_native.testing``) that its snapshot sees. Nodes of other vendors declare their
accelerator kind (``accelerator="ascend"`` offers Ray's ``NPU`` resource, ``"gaudi"``
``HPU``, ``"amd"`` and ``"intel"`` ``GPU`` with their accelerator-type label), one kind for
all nodes or one per node (None: a CPU-only node)::

    import os
    os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"   # before Ray is imported

    from placement_ray.testing import SimulatedCluster

    with SimulatedCluster(nodes=2, topology="dgx-h100") as sim:
        cluster = sim.view()            # a placement_ray.Cluster of 2 nodes x 8 GPUs

    mixed = ClusterSpec(nodes=3, accelerator=("nvidia", "ascend", None), gpus_per_node=(4, 8, 0))

Node 0 is Ray's head by default, and a head cannot be lost without ending the cluster.
``separate_head=True`` starts the head as one more node that offers nothing (no CPUs, no
accelerators, no node rank: KubeRay's recommended head), which placement-ray's discovery
leaves out of the job; the spec's nodes 0..N-1 are then all workers, and ``kill_node(0)``
loses the node of every component's rank 0.

A simulated node starts its Python workers as Ray does, through a start script that
applies the runtime env's context (environment variables, interpreter, command prefix) and
execs Ray's worker, but without importing Ray a first time as Ray's own ``setup_worker.py``
does: that import was a third of every worker's start on a small machine. Workers of other
languages, and contexts with fields the script does not know, go through Ray's script.

With pytest, installing placement-ray is enough: its ``pytest11`` plugin sets the variable
before Ray is imported and provides the ``placement_cluster`` fixture (one cluster per
session, sized by ``@pytest.mark.placement_cluster(...)`` or ini options, cleaned up after
every test).
"""

from __future__ import annotations

import contextlib
import ipaddress
import logging
import os
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

import ray

from placement_core import RAY_RESOURCES, ray_resource, registered_accelerators
from placement_ray import ArgumentError, Cluster, ClusterError

from ._discovery import ACCELERATOR_TYPE_LABEL
from ._rayapi import alive_nodes

if TYPE_CHECKING:
    from placement_native.testing import FakeNvml

__all__ = [
    "LOOPBACK",
    "LOOPBACK_ENV",
    "Baseline",
    "ClusterSpec",
    "SimulatedCluster",
]

logger = logging.getLogger(__name__)

LOOPBACK = "127.0.0.1"
LOOPBACK_ENV = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"  # "0" keeps every Ray address on loopback
DEFAULT_GPUS = 4
START_WORKER = str(Path(__file__).with_name("_start_worker.py"))
"""What a simulated node starts its Python workers through: Ray's ``setup_worker.py``
without importing Ray first (``placement_ray._start_worker``)."""
RANK_LABEL = "node-rank"
RANK_ENV = "PLACEMENT_NODE_RANK"
# Ray's accelerator-type name of a simulated node of each kind (the label and the
# ``accelerator_type:<name>`` resource a real node of that kind gets).
DEFAULT_MODELS = {
    "amd": "AMD-Instinct-MI300X-OAM",
    "intel": "Intel-GPU-Max-1550",
    "ascend": "Ascend910B",
    "gaudi": "Intel-GAUDI2",
}


@dataclass(frozen=True)
class ClusterSpec:
    """The shape of a simulated cluster.

    Attributes:
        nodes: Number of nodes (>= 1).
        gpus_per_node: Logical accelerators per node (of the node's ``accelerator`` kind),
            or one count per node; None: the node's fake machine's GPU count, else 4
            (0 for a CPU-only node).
        cpus_per_node: Logical CPUs per node.
        topology: A fake NVML machine for every node (a name such as ``"dgx-h100"``, a
            JSON file or a ``placement_native.testing.Topology``), or a sequence with one
            entry per node (None: that node has no NVML); None: no node has NVML.
        accelerator: The kind of every node's accelerators (a registered accelerator
            type: ``nvidia``, ``amd``, ``intel``, ``ascend``, ``gaudi``, ...), or one kind
            per node; None: a CPU-only node. The node offers the kind's Ray resource.
        accelerator_model: The accelerator-type name Ray shows for the node (the
            ``ray.io/accelerator-type`` label and ``accelerator_type:<name>`` resource), or
            one per node; None: the kind's usual name (``Ascend910B``, ...; none for
            NVIDIA, whose fake machine, if any, names its GPUs).
        labelled: Give node ``i`` the ``node-rank`` label and ``PLACEMENT_NODE_RANK``.
        node_ip: The loopback address the node binds (``127.x.y.z``), or one per node;
            several nodes may share one. Node 0 (the head, where the driver connects,
            unless ``separate_head``) keeps ``127.0.0.1`` unless given another.
        separate_head: Start Ray's head as an extra node with no CPUs, no accelerators and
            no node rank (as KubeRay's recommended head), binding ``127.0.0.1``; the
            driver connects through it, discovery leaves it out of the job's nodes, and
            every node of the spec, node 0 included, can be killed and restored. False:
            node 0 is the head (it cannot be killed).
        job: The job name of the driver's connection (Ray namespace ``placement-<job>``).
        object_store_mb: Object store size per node, in MiB.
        timeout_s: Limit for nodes to come up, discovery and cleanup between tests.
    """

    nodes: int = 2
    gpus_per_node: int | tuple[int, ...] | None = None
    cpus_per_node: int = 4
    topology: Any = None
    accelerator: str | tuple[str | None, ...] | None = "nvidia"
    accelerator_model: str | tuple[str | None, ...] | None = None
    labelled: bool = True
    node_ip: str | tuple[str, ...] = LOOPBACK
    separate_head: bool = False
    job: str = "pytest"
    object_store_mb: int = 80
    timeout_s: float = 60.0

    def __post_init__(self) -> None:
        for name, low in (("nodes", 1), ("cpus_per_node", 0)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ArgumentError(f"{name}: expected an int >= {low}, got {value!r}")
        self._per_node_fields()
        if not isinstance(self.separate_head, bool):
            raise ArgumentError(
                f"separate_head: expected True or False, got {self.separate_head!r}"
            )
        if isinstance(self.topology, list | tuple) and len(self.topology) != self.nodes:
            raise ArgumentError(
                f"topology: expected one machine or a list of {self.nodes} (one per node), "
                f"got a list of {len(self.topology)}"
            )
        if not isinstance(self.job, str) or not self.job.strip() or "/" in self.job:
            raise ArgumentError(f"job: expected a non-empty name without '/', got {self.job!r}")
        if not isinstance(self.object_store_mb, int) or self.object_store_mb < 75:
            raise ArgumentError(
                f"object_store_mb: expected an int >= 75 (Ray's minimum), "
                f"got {self.object_store_mb!r}"
            )
        if isinstance(self.timeout_s, bool) or not isinstance(self.timeout_s, int | float):
            raise ArgumentError(f"timeout_s: expected seconds > 0, got {self.timeout_s!r}")
        if not self.timeout_s > 0:
            raise ArgumentError(f"timeout_s: expected seconds > 0, got {self.timeout_s!r}")
        for rank, machine in enumerate(self.machines()):
            kind = self.per_node("accelerator", rank)
            if machine is not None and kind != "nvidia":
                raise ArgumentError(
                    f"topology: node {rank} has a fake NVML machine but accelerator {kind!r}; "
                    "NVML describes NVIDIA GPUs only (give that node topology None)"
                )

    def _per_node_fields(self) -> None:
        """Check the fields that take one value or one per node; keep lists as tuples."""
        kinds = ", ".join(registered_accelerators())
        checks: tuple[tuple[str, Callable[[object], bool], str], ...] = (
            ("gpus_per_node", _count, "an int >= 0"),
            ("accelerator", _kind, f"None or one of {kinds}"),
            ("accelerator_model", _name, "None or a non-empty name"),
            ("node_ip", _loopback, "a loopback address such as '127.0.0.9'"),
        )
        for name, ok, expected in checks:
            value = getattr(self, name)
            if isinstance(value, list | tuple):
                if len(value) != self.nodes:
                    raise ArgumentError(
                        f"{name}: expected one value or a list of {self.nodes} (one per node), "
                        f"got a list of {len(value)}"
                    )
                object.__setattr__(self, name, tuple(value))
                bad = [(i, v) for i, v in enumerate(value) if not ok(v)]
                if bad:
                    i, v = bad[0]
                    raise ArgumentError(f"{name}[{i}]: expected {expected}, got {v!r}")
            elif not ok(value):
                raise ArgumentError(f"{name}: expected {expected} (or one per node), got {value!r}")

    def per_node(self, name: str, rank: int) -> Any:
        """The value of the per-node field ``name`` for the node of ``rank``."""
        value = getattr(self, name)
        return value[rank] if isinstance(value, tuple) else value

    def machines(self) -> list[Any]:
        """The fake machine of each node (None: none)."""
        if isinstance(self.topology, list | tuple):
            return list(self.topology)
        return [self.topology] * self.nodes


def _count(value: object) -> bool:
    return value is None or (isinstance(value, int) and not isinstance(value, bool) and value >= 0)


def _kind(value: object) -> bool:
    return value is None or (isinstance(value, str) and value in RAY_RESOURCES)


def _name(value: object) -> bool:
    return value is None or (isinstance(value, str) and bool(value.strip()))


def _loopback(value: object) -> bool:
    try:
        return isinstance(value, str) and ipaddress.ip_address(value).is_loopback
    except ValueError:
        return False


@dataclass
class Baseline:
    """What existed before a test: the actors, placement groups and free resources it
    must leave as they were."""

    actors: set[str] = field(default_factory=set)
    groups: set[str] = field(default_factory=set)
    available: dict[str, dict[str, float]] = field(default_factory=dict)


_START_ATTEMPTS = 5
"""How many times a simulated cluster is started before its start counts as failed."""


def _load_factor() -> float:
    """How much slower than idle this machine runs now: the 1-minute load average per
    CPU, at least 1 and at most 8 (1 where the platform has no load average)."""
    if not hasattr(os, "getloadavg"):
        return 1.0
    return min(max(os.getloadavg()[0] / (os.cpu_count() or 1), 1.0), 8.0)


def _require_loopback() -> None:
    from ray._private import ray_constants  # what Ray read from LOOPBACK_ENV at import

    if ray_constants.ENABLE_RAY_CLUSTER:
        raise ClusterError(
            f"a simulated cluster needs {LOOPBACK_ENV}=0 in the environment before Ray is "
            "imported (so every address stays on loopback); set it first thing in your "
            "test setup, or use the pytest plugin, which does"
        )


class SimulatedCluster:
    """A multi-node Ray cluster on this machine, for tests (see the module docstring).

    Args:
        spec: The cluster's shape; keyword arguments build one when it is None.
        **kwargs: ``ClusterSpec`` fields.

    Attributes:
        spec: The shape.
        ray_cluster: The ``ray.cluster_utils.Cluster`` (to add or remove nodes).
        fakes: Each node's ``FakeNvml`` (None where the node has no NVML).

    Raises:
        ArgumentError: a bad spec field, or a fake machine that is unknown or malformed
            (placement-native's ``FakeTopologyError`` is its ``__cause__``).
        ClusterError: Ray is not kept on loopback, or the nodes did not come up.
        NativeCallError: the fake machine's library cannot be compiled (placement-native's
            ``FakeNVMLBuildError`` is its ``__cause__``).
    """

    def __init__(self, spec: ClusterSpec | None = None, **kwargs: Any) -> None:
        if spec is not None and kwargs:
            raise ArgumentError(f"pass a ClusterSpec or keyword fields, not both: {kwargs}")
        self.spec = spec or ClusterSpec(**kwargs)
        _require_loopback()
        self.fakes: list[FakeNvml | None] = []
        self._view: Cluster | None = None
        self._nodes: dict[int, Any] = {}
        self._head: Any = None  # the separate head's node (``spec.separate_head``)
        try:
            self.fakes = [self._fake(m) for m in self.spec.machines()]
            self.ray_cluster = self._start()
        except BaseException:
            self._close_fakes()
            raise

    @staticmethod
    def _fake(machine: Any) -> FakeNvml | None:
        if machine is None:
            return None
        from placement_native.testing import FakeNvml

        from ._native import native_errors

        with native_errors(f"topology {machine!r}"):
            return FakeNvml(machine)

    def node_args(self, rank: int) -> dict[str, Any]:
        """``add_node`` arguments of the node of ``rank``.

        A node's accelerators are its kind's Ray resource (``num_gpus`` for ``GPU``, a
        ``resources`` entry otherwise), with the accelerator-type label and resource a
        real node of that kind gets from Ray's detection, which finds nothing here.
        """
        fake = self.fakes[rank]
        kind = self.spec.per_node("accelerator", rank)
        count = self.spec.per_node("gpus_per_node", rank)
        if count is None:
            count = len(fake.topology.gpus) if fake is not None else DEFAULT_GPUS
        count = 0 if kind is None else count
        env = dict(fake.env) if fake is not None else {}
        resource = ray_resource(kind) if kind is not None else "GPU"
        args: dict[str, Any] = {
            "num_cpus": self.spec.cpus_per_node,
            "num_gpus": count if resource == "GPU" else 0,
            "node_ip_address": self.spec.per_node("node_ip", rank),
            "object_store_memory": self.spec.object_store_mb * 1024 * 1024,
            "setup_worker_path": START_WORKER,
        }
        labels: dict[str, str] = {}
        model = self.spec.per_node("accelerator_model", rank) or DEFAULT_MODELS.get(kind or "")
        if resource != "GPU" and count:
            args["resources"] = {resource: count}
        if model and count:
            args.setdefault("resources", {})[f"accelerator_type:{model}"] = 1
            labels[ACCELERATOR_TYPE_LABEL] = model
        if self.spec.labelled:
            labels[RANK_LABEL] = str(rank)
            env[RANK_ENV] = str(rank)
        if labels:
            args["labels"] = labels
        if env:
            args["env_vars"] = env
        return args

    def head_args(self) -> dict[str, Any]:
        """``add_node`` arguments of the separate head (``spec.separate_head``): as
        KubeRay's recommended head, no CPUs, no accelerators and no node rank, so that
        discovery leaves it out of the job's nodes; it binds ``127.0.0.1``."""
        return {
            "num_cpus": 0,
            "num_gpus": 0,
            "node_ip_address": LOOPBACK,
            "object_store_memory": self.spec.object_store_mb * 1024 * 1024,
            "include_dashboard": False,
            "setup_worker_path": START_WORKER,
        }

    def _live_expected(self) -> int:
        """How many Ray nodes are alive when every started node is: the spec's live
        nodes and the separate head."""
        return len(self._nodes) + (self._head is not None)

    def _start(self) -> Any:
        """Start the nodes; on a loaded machine, wait longer and try again.

        The wait is ``spec.timeout_s`` times the machine's load per CPU (at least 1, at
        most 8). Ray gives a starting node a fixed 30 s to register, which a busy machine
        can miss: the cluster is then shut down and started again, up to
        ``_START_ATTEMPTS`` times within the wait.
        """
        budget = self.spec.timeout_s * _load_factor()
        deadline = time.monotonic() + budget
        for attempt in range(1, _START_ATTEMPTS + 1):
            try:
                return self._start_once(max(deadline - time.monotonic(), 1.0))
            except Exception as exc:
                if attempt == _START_ATTEMPTS or time.monotonic() >= deadline:
                    raise ClusterError(
                        f"{exc}; {attempt} attempt(s) within {budget:.0f}s (timeout_s "
                        f"{self.spec.timeout_s:g} x load factor {_load_factor():.1f})"
                    ) from None
                logger.warning("simulated cluster start %d failed, again: %s", attempt, exc)
        raise AssertionError("unreachable")  # the loop returns or raises

    def _start_once(self, wait_s: float) -> Any:
        from ray.cluster_utils import Cluster as RayCluster

        cluster = RayCluster()
        self._nodes, self._head = {}, None
        which = "the head node"
        try:
            with _quiet_ray(), _patient_node_start(wait_s), _patient_agents(wait_s):
                if self.spec.separate_head:
                    self._head = cluster.add_node(**self.head_args())
                for rank in range(self.spec.nodes):
                    which = f"node {rank}"
                    extra = {} if self._head is not None or rank else {"include_dashboard": False}
                    self._nodes[rank] = cluster.add_node(**self.node_args(rank), **extra)
            which = ""
            wait_for_nodes(_live_count(cluster), self._live_expected(), wait_s)
        except Exception as exc:
            self._nodes, self._head = {}, None
            cluster.shutdown()  # type: ignore[no-untyped-call]
            which = f"{which} did not start" if which else "the nodes did not register"
            raise ClusterError(
                f"the simulated cluster of {self.spec.nodes} nodes did not come up: {which}: "
                f"{_first_line(exc)} (load average {os.getloadavg()[0]:.1f} on "
                f"{os.cpu_count()} CPUs: is the machine overloaded? a larger timeout_s "
                "waits longer)"
            ) from None
        except BaseException:
            self._nodes, self._head = {}, None
            cluster.shutdown()  # type: ignore[no-untyped-call]
            raise
        return cluster

    @property
    def address(self) -> str:
        """The GCS address of the cluster."""
        return str(self.ray_cluster.address)

    @property
    def namespace(self) -> str:
        """The Ray namespace of the spec's job."""
        return f"placement-{self.spec.job}"

    def connected(self) -> bool:
        """Whether this process's driver is connected to this cluster."""
        return bool(ray.is_initialized() and ray.get_runtime_context().gcs_address == self.address)

    def connect(self) -> None:
        """Connect this process's driver to the cluster (disconnecting it from any other)."""
        if self.connected():
            return
        if ray.is_initialized():
            ray.shutdown()
        self._view = None  # the old connection's job, and with it its view, is gone
        ray.init(address=self.address, namespace=self.namespace, log_to_driver=False)

    def view(self) -> Cluster:
        """placement-ray's ``Cluster`` of this cluster (connecting the driver first)."""
        self.connect()
        if self._view is None:
            self._view = Cluster(self.spec.nodes, timeout_s=self.spec.timeout_s, export_env=False)
        return self._view

    # ------------------------------------------------------------------ between tests
    def baseline(self) -> Baseline:
        """What exists now: compare with it after a test (``cleanup``)."""
        from ray._private import state
        from ray.util.placement_group import placement_group_table

        return Baseline(
            actors={info["ActorID"] for info in state.actors().values() if info["State"] != "DEAD"},
            groups={
                pg_id
                for pg_id, info in placement_group_table().items()
                if info["state"] != "REMOVED"
            },
            available=_available(),
        )

    def cleanup(self, before: Baseline) -> None:
        """Kill the actors and remove the placement groups created since ``before``, then
        wait until every node's free CPUs and GPUs are back to what they were.

        Raises:
            ClusterError: resources are still held after ``spec.timeout_s``; names the
                nodes and what they hold.
        """
        from ray._private import state
        from ray.util.placement_group import (
            PlacementGroup,
            placement_group_table,
            remove_placement_group,
        )

        self.connect()
        fresh = [
            info
            for info in state.actors().values()
            if info["State"] != "DEAD" and info["ActorID"] not in before.actors
        ]
        _kill(fresh)
        for pg_id, info in placement_group_table().items():
            if info["state"] != "REMOVED" and pg_id not in before.groups:
                remove_placement_group(PlacementGroup(ray.PlacementGroupID.from_hex(pg_id)))
        deadline = time.monotonic() + self.spec.timeout_s
        while True:
            busy = _held(before.available, _available())
            if not busy:
                return
            if time.monotonic() > deadline:
                raise ClusterError(
                    f"the simulated cluster is not idle {self.spec.timeout_s:g}s after the "
                    f"test: {busy} (node: resource: (free now, free before)); something "
                    "the test started outlives it"
                )
            time.sleep(0.1)

    # ------------------------------------------------------------------------ node loss
    def kill_node(self, rank: int) -> None:
        """Kill node ``rank`` (its raylet and every process on it), as a lost machine goes,
        and wait until Ray no longer lists it alive.

        Any node of the spec can be killed when the head is separate
        (``spec.separate_head``); otherwise node 0 is Ray's head and stays.

        Raises:
            ArgumentError: no live node of that rank here, the node is Ray's head (whose
                loss ends the Ray cluster), or it runs this process's Ray driver.
            ClusterError: Ray still lists it alive ``timeout_s`` (the spec's) later.
        """
        killable = not isinstance(rank, bool) and rank in self._killable()
        node = self._nodes.get(rank) if killable else None
        if node is None:
            raise ArgumentError(self._refusal(rank))
        if self.connected() and ray.get_runtime_context().get_node_id() == node.node_id:
            raise ArgumentError(
                f"rank: node {rank} runs this process's Ray driver (Ray connected the driver "
                "to it); killing it would end the driver, not just the node"
            )
        with _quiet_ray():
            self.ray_cluster.remove_node(node)
        del self._nodes[rank]
        self.wait_gone(node.node_id, f"node {rank}")

    def _killable(self) -> list[int]:
        """The live ranks that ``kill_node`` takes: all but the head's."""
        return sorted(r for r in self._nodes if self._head is not None or r != 0)

    def _refusal(self, rank: object) -> str:
        """Why ``kill_node(rank)`` cannot kill that node."""
        killable = self._killable()
        if rank == 0 and self._head is None and 0 in self._nodes:
            return (
                "rank: node 0 is Ray's head here, and losing the head ends the Ray cluster; "
                "start the cluster with separate_head=True to lose node 0 (the nodes that "
                f"can be killed now: {killable})"
            )
        why = (
            " (the separate head has no rank: losing it ends the Ray cluster)"
            if self._head is not None
            else ""
        )
        return f"rank: expected a live node {killable}{why}, got {rank!r}"

    def node_id(self, rank: int) -> str:
        """The Ray node id of the spec's live node ``rank`` (the job's view may number the
        nodes otherwise where they carry no ``node-rank`` label).

        Raises:
            ArgumentError: no live node of that rank here.
        """
        node = self._nodes.get(rank)
        if node is None:
            raise ArgumentError(f"rank: expected a live node {sorted(self._nodes)}, got {rank!r}")
        return str(node.node_id)

    def wait_gone(self, node_id: str, what: str = "the node") -> None:
        """Wait until Ray no longer lists node ``node_id`` alive (after a removal).

        Raises:
            ClusterError: still listed alive ``timeout_s`` (the spec's) times the load later.
        """
        limit = self.spec.timeout_s * _load_factor()
        deadline = time.monotonic() + limit
        while any(n["NodeID"] == node_id for n in alive_nodes()):
            if time.monotonic() > deadline:
                raise ClusterError(
                    f"{what} ({node_id}) is still listed alive {limit:.0f}s after it was removed"
                )
            time.sleep(0.2)

    def restore_node(self, rank: int) -> None:
        """Start node ``rank`` again after :meth:`kill_node`: a fresh node (a new Ray node
        id) with the spec's resources and label for that rank. The job's view is dropped:
        the next :meth:`view` discovers the nodes again.

        Raises:
            ArgumentError: ``rank`` is not a node of the spec that can be killed (node 0
                only with ``separate_head``), or its node is alive.
        """
        low = 0 if self._head is not None else 1
        if (
            isinstance(rank, bool)
            or not (isinstance(rank, int) and low <= rank < self.spec.nodes)
            or rank in self._nodes
        ):
            raise ArgumentError(
                f"rank: expected a killed node of {low}..{self.spec.nodes - 1}, got {rank!r}"
            )
        with (
            _quiet_ray(),
            _patient_node_start(self.spec.timeout_s),
            _patient_agents(self.spec.timeout_s),
        ):
            self._nodes[rank] = self.ray_cluster.add_node(**self.node_args(rank))
        wait_for_nodes(_live_count(self.ray_cluster), self._live_expected(), self.spec.timeout_s)
        if self._view is not None:
            self._view.shutdown()
            self._view = None

    # --------------------------------------------------------------------- shutting down
    def shutdown(self) -> None:
        """Disconnect the driver (when connected here), stop every node, remove the fakes."""
        try:
            if self.connected():
                ray.shutdown()
            self.ray_cluster.shutdown()
        finally:
            self._view = None
            self._close_fakes()

    def _close_fakes(self) -> None:
        for fake in self.fakes:
            if fake is not None:
                fake.close()

    def __enter__(self) -> SimulatedCluster:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.shutdown()

    def __repr__(self) -> str:
        cluster = getattr(self, "ray_cluster", None)  # absent when the start failed
        address = "not started" if cluster is None else repr(cluster.address)
        head = " and a separate head" if self.spec.separate_head else ""
        return f"SimulatedCluster({self.spec.nodes} nodes{head}, address={address})"


class _DetectionNoise(logging.Filter):
    """Drops Ray's "Failed to detect ..." reports: a simulated node has no such device."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith("Failed to detect")


@contextlib.contextmanager
def _quiet_ray() -> Iterator[None]:
    """Silence Ray while simulated nodes start or stop in this process, and keep Ray's
    "current cluster" file (``/tmp/ray/ray_current_cluster``) as it was.

    Ray asks each node's accelerator manager for the device type even when the node's
    count is given; for Ascend it imports AscendCL and logs a traceback when that fails
    (the simulated node carries the type as a label and resource instead). A node that
    is slow to register logs "Failed to get node info" in a busy loop (thousands of lines
    on a loaded machine), and the head node logs that it overwrote the current-cluster
    file, which a simulated cluster has no business rewriting: ``ray.init()`` elsewhere
    on the machine reads it.
    """
    import ray._private.utils as ray_utils
    from ray._private import accelerators

    names = {f"{accelerators.__name__}.{m}" for m in ("npu", "hpu", "amd_gpu", "intel_gpu")}
    loggers = [logging.getLogger(name) for name in sorted(names)]
    noise = _DetectionNoise()
    for log in loggers:
        log.addFilter(noise)
    chatty = [logging.getLogger(n) for n in ("ray._private.node", "ray.cluster_utils")]
    levels = [log.level for log in chatty]
    for log in chatty:
        log.setLevel(logging.WARNING)
    write_address = ray_utils.write_ray_address
    ray_utils.write_ray_address = _keep_current_cluster
    try:
        yield
    finally:
        ray_utils.write_ray_address = write_address
        for log, level in zip(chatty, levels, strict=True):
            log.setLevel(level)
        for log in loggers:
            log.removeFilter(noise)


@contextlib.contextmanager
def _patient_agents(timeout_s: float) -> Iterator[None]:
    """Give a starting node's agents ``timeout_s`` to register with its raylet.

    A raylet whose dashboard agent has not registered within Ray's 30 s exits (a loaded
    machine misses it); the raylets started here read the longer limit from their
    environment. A value the user set wins.
    """
    name = "RAY_agent_register_timeout_ms"
    if name in os.environ:
        yield
        return
    os.environ[name] = str(int(max(timeout_s, 30.0) * 1000))
    try:
        yield
    finally:
        os.environ.pop(name, None)


@contextlib.contextmanager
def _patient_node_start(timeout_s: float) -> Iterator[None]:
    """Let a starting node take up to ``timeout_s`` to register, not Ray's fixed 30 s.

    Ray's node start polls the GCS for the new node and gives up after 30 s, a limit no
    setting changes; a machine loaded far beyond its cores (a shared CI runner) takes
    longer. The lookup it polls is made to wait itself, up to ``timeout_s``.
    """
    from ray._private import services

    lookup: Callable[[str, str], Any] = services.get_node

    def patient(gcs_address: str, node_id: str) -> Any:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                return lookup(gcs_address, node_id)
            except RuntimeError:
                if time.monotonic() > deadline:
                    raise
                if not _raylet_running(node_id):  # it crashed: no wait brings it back
                    raise RuntimeError(
                        f"the raylet of node {node_id[:12]} exited before it registered"
                    ) from None
                time.sleep(0.2)

    services.get_node = patient
    try:
        yield
    finally:
        services.get_node = lookup


def _raylet_running(node_id: str) -> bool:
    """Whether a raylet process of ``node_id`` runs on this machine (where the kit starts
    every node; its command line carries ``--node_id=<id>``). True where /proc is missing."""
    wanted = f"--node_id={node_id}".encode()
    try:
        pids = [p for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        return True
    for pid in pids:
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
                if wanted in cmdline.read().split(b"\0"):
                    return True
        except OSError:
            continue
    return False


def _keep_current_cluster(ray_address: str, temp_dir: str | None = None) -> None:
    """Stands in for Ray's ``write_ray_address`` while simulated nodes start."""


def _first_line(exc: BaseException) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    text = lines[0] if lines else type(exc).__name__
    return text if len(text) <= 300 else text[:300] + "..."


def _live_count(cluster: Any) -> Callable[[], int]:
    """How many nodes of ``cluster`` (a ``ray.cluster_utils.Cluster``) Ray lists alive."""
    return lambda: len(cluster.global_state._live_node_ids())


def wait_for_nodes(
    live: Callable[[], int], count: int, timeout_s: float, *, poll_s: float = 0.2
) -> None:
    """Wait until ``live()`` counts ``count`` nodes; the wait adapts to a loaded machine.

    The deadline is ``timeout_s`` after the last progress (one more node alive), and at
    most ``4 * timeout_s`` in all: nodes that keep coming up are waited for, a cluster
    that is stuck is not.

    Raises:
        TimeoutError: fewer than ``count`` nodes alive (says how many).
    """
    start = last = time.monotonic()
    seen = -1
    while True:
        alive = live()
        if alive >= count:
            return
        now = time.monotonic()
        if alive > seen:
            seen, last = alive, now
        if now - last > timeout_s or now - start > 4 * timeout_s:
            raise TimeoutError(
                f"{alive} of {count} nodes alive after {now - start:.0f}s (no progress for "
                f"{now - last:.0f}s)"
            )
        time.sleep(poll_s)


def _available() -> dict[str, dict[str, float]]:
    from ray._private import state

    kept = ("CPU", *sorted(set(RAY_RESOURCES.values())))
    per_node = state.available_resources_per_node()  # type: ignore[no-untyped-call]
    return {node: {k: float(res.get(k, 0.0)) for k in kept} for node, res in per_node.items()}


def _held(
    before: dict[str, dict[str, float]], now: dict[str, dict[str, float]]
) -> dict[str, dict[str, tuple[float, float]]]:
    busy: dict[str, dict[str, tuple[float, float]]] = {}
    for node, free in before.items():
        current = now.get(node)
        if current is None:  # the node is gone (a test removed it): nothing to wait for
            continue
        diff = {k: (current[k], v) for k, v in free.items() if current[k] < v}
        if diff:
            busy[node] = diff
    return busy


def _kill(actors: Sequence[dict[str, Any]]) -> None:
    """Kill actors by id: named ones through their name, the rest through the driver's
    core worker (which knows the actors this driver created)."""
    listed = ray.util.list_named_actors(all_namespaces=True)
    by_name = {a["name"]: a["namespace"] for a in listed}
    worker = ray._private.worker.global_worker
    for info in actors:
        name = info.get("Name") or ""
        try:
            if name and name in by_name:
                ray.kill(ray.get_actor(name, namespace=by_name[name]), no_restart=True)
            else:
                worker.core_worker.kill_actor(  # type: ignore[attr-defined]
                    ray.ActorID.from_hex(info["ActorID"]), True
                )
        except Exception:  # it died meanwhile, or another job owns it: the wait for free
            continue  # resources that follows reports whatever survives
