"""Test placement code on a simulated Ray cluster: labelled loopback nodes, logical GPUs.

``SimulatedCluster`` starts a multi-node Ray cluster inside this machine
(``ray.cluster_utils.Cluster``): every node binds ``127.0.0.1``, node ``i`` carries the
label ``node-rank=i`` (and ``PLACEMENT_NODE_RANK=i`` in its environment), has
``gpus_per_node`` logical GPUs and, optionally, a fake NVML machine
(``placement_native.testing``) that its snapshot sees::

    import os
    os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"   # before Ray is imported

    from placement_ray.testing import SimulatedCluster

    with SimulatedCluster(nodes=2, topology="dgx-h100") as sim:
        cluster = sim.view()            # a placement_ray.Cluster of 2 nodes x 8 GPUs

With pytest, installing placement-ray is enough: its ``pytest11`` plugin sets the variable
before Ray is imported and provides the ``placement_cluster`` fixture (one cluster per
session, sized by ``@pytest.mark.placement_cluster(...)`` or ini options, cleaned up after
every test).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import TYPE_CHECKING, Any

import ray

from placement_ray import ArgumentError, Cluster, ClusterError

if TYPE_CHECKING:
    from placement_native.testing import FakeNvml

__all__ = [
    "LOOPBACK",
    "LOOPBACK_ENV",
    "Baseline",
    "ClusterSpec",
    "SimulatedCluster",
]

LOOPBACK = "127.0.0.1"
LOOPBACK_ENV = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"  # "0" keeps every Ray address on loopback
DEFAULT_GPUS = 4
RANK_LABEL = "node-rank"
RANK_ENV = "PLACEMENT_NODE_RANK"


@dataclass(frozen=True)
class ClusterSpec:
    """The shape of a simulated cluster.

    Attributes:
        nodes: Number of nodes (>= 1).
        gpus_per_node: Logical GPUs per node; None: the node's fake machine's GPU count,
            else 4.
        cpus_per_node: Logical CPUs per node.
        topology: A fake NVML machine for every node (a name such as ``"dgx-h100"``, a
            JSON file or a ``placement_native.testing.Topology``), or a sequence with one
            entry per node (None: that node has no NVML); None: no node has NVML.
        labelled: Give node ``i`` the ``node-rank`` label and ``PLACEMENT_NODE_RANK``.
        job: The job name of the driver's connection (Ray namespace ``placement-<job>``).
        object_store_mb: Object store size per node, in MiB.
        timeout_s: Limit for nodes to come up, discovery and cleanup between tests.
    """

    nodes: int = 2
    gpus_per_node: int | None = None
    cpus_per_node: int = 4
    topology: Any = None
    labelled: bool = True
    job: str = "pytest"
    object_store_mb: int = 80
    timeout_s: float = 60.0

    def __post_init__(self) -> None:
        for name, low in (("nodes", 1), ("gpus_per_node", 0), ("cpus_per_node", 0)):
            value = getattr(self, name)
            if name == "gpus_per_node" and value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ArgumentError(f"{name}: expected an int >= {low}, got {value!r}")
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

    def machines(self) -> list[Any]:
        """The fake machine of each node (None: none)."""
        if isinstance(self.topology, list | tuple):
            return list(self.topology)
        return [self.topology] * self.nodes


@dataclass
class Baseline:
    """What existed before a test: the actors, placement groups and free resources it
    must leave as they were."""

    actors: set[str] = field(default_factory=set)
    groups: set[str] = field(default_factory=set)
    available: dict[str, dict[str, float]] = field(default_factory=dict)


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
        """``add_node`` arguments of the node of ``rank``."""
        fake = self.fakes[rank]
        gpus = self.spec.gpus_per_node
        if gpus is None:
            gpus = len(fake.topology.gpus) if fake is not None else DEFAULT_GPUS
        env = dict(fake.env) if fake is not None else {}
        args: dict[str, Any] = {
            "num_cpus": self.spec.cpus_per_node,
            "num_gpus": gpus,
            "node_ip_address": LOOPBACK,
            "object_store_memory": self.spec.object_store_mb * 1024 * 1024,
        }
        if self.spec.labelled:
            args["labels"] = {RANK_LABEL: str(rank)}
            env[RANK_ENV] = str(rank)
        if env:
            args["env_vars"] = env
        return args

    def _start(self) -> Any:
        from ray.cluster_utils import Cluster as RayCluster

        cluster = RayCluster()
        try:
            cluster.add_node(**self.node_args(0), include_dashboard=False)
            for rank in range(1, self.spec.nodes):
                cluster.add_node(**self.node_args(rank))
            cluster.wait_for_nodes(timeout=self.spec.timeout_s)
        except Exception as exc:
            cluster.shutdown()  # type: ignore[no-untyped-call]
            raise ClusterError(
                f"the simulated cluster of {self.spec.nodes} nodes did not come up within "
                f"{self.spec.timeout_s:g}s: {exc} (is the machine overloaded?)"
            ) from exc
        except BaseException:
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
        return f"SimulatedCluster({self.spec!r}, address={self.address!r})"


def _available() -> dict[str, dict[str, float]]:
    from ray._private import state

    per_node = state.available_resources_per_node()  # type: ignore[no-untyped-call]
    return {
        node: {k: float(res.get(k, 0.0)) for k in ("CPU", "GPU")} for node, res in per_node.items()
    }


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
