"""``Cluster``: one job's view of a Ray cluster (connection, namespace, ordered inventory).

What identifies "our" cluster and job:

* the **job name** (``job=`` or ``PLACEMENT_JOB``) gives the Ray namespace
  ``placement-<job>``; actors of two jobs on one Ray cluster never see each other;
* the **cluster id** is the Ray node id of the head node; the first ``Cluster`` of a job
  records it (``PLACEMENT_CLUSTER_ID``) and any later ``Cluster`` of that job that reaches a
  different cluster raises ``ForeignClusterError`` instead of silently starting over;
* the **view** (node order, inventory) lives in a named actor of the job's namespace, so a
  second ``Cluster()`` in another process of the job (a worker, a subprocess given
  ``attach_env()``) sees exactly the same ranks without discovering again. The actor is
  pinned to the head node (it takes no CPU, so a head started with ``--num-cpus 0``,
  which is no node of the job, holds it too), so losing a worker node never loses the
  view; if it is lost anyway, the next ``Cluster()`` creates it again and discovers the
  view anew.

Without an address (argument or ``RAY_ADDRESS``) a new local cluster is started on this
machine; ``address="auto"`` is never used, so a stray cluster that happens to run on the
machine is never joined by accident.
"""

from __future__ import annotations

import contextlib
import copy
import logging
import os
import time
import uuid
from collections.abc import Callable
from typing import Any

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from placement_core import Inventory, Node

from ._colocation import ShareLedger
from ._discovery import discover_inventory
from ._job_nodes import counts_while_waiting
from ._node_order import NODE_RANK_LABEL
from ._notice import Progress
from ._rayapi import alive_nodes, head_node_id
from ._text import clean
from .errors import ArgumentError, ClusterError, ForeignClusterError, NodesNotReadyError

__all__ = [
    "CLUSTER_ID_ENV",
    "JOB_ENV",
    "NAMESPACE_PREFIX",
    "STATE_ACTOR_NAME",
    "Cluster",
    "wait_for_nodes",
]

logger = logging.getLogger(__name__)

JOB_ENV = "PLACEMENT_JOB"
CLUSTER_ID_ENV = "PLACEMENT_CLUSTER_ID"
NAMESPACE_PREFIX = "placement-"
STATE_ACTOR_NAME = "placement-cluster-state"

_STATE_ATTEMPTS = 4


@ray.remote(num_cpus=0, max_restarts=0)
class _JobState:
    """Holds one job's cluster view; the first ``publish`` wins, later ones adopt it."""

    def __init__(self) -> None:
        self._state: dict[str, Any] | None = None

    def get(self) -> dict[str, Any] | None:
        return self._state

    def publish(self, state: dict[str, Any]) -> dict[str, Any]:
        if self._state is None:
            self._state = state
        return self._state


def _rank_label(node: dict[str, Any]) -> int | None:
    value = str((node.get("Labels") or {}).get(NODE_RANK_LABEL, "")).strip()
    return int(value) if value.isascii() and value.isdigit() else None


def wait_for_nodes(
    num_nodes: int,
    *,
    timeout_s: float | None = 300.0,
    poll_s: float = 0.5,
    progress: Callable[[str], None] | None = None,
) -> list[dict[str, Any]]:
    """Wait until at least ``num_nodes`` Ray nodes are alive.

    A node that offers nothing to schedule on (0 CPUs, no accelerators: a Ray head
    started with ``--num-cpus 0``) and carries no ``node-rank`` label is not counted (it is
    not one of the job's nodes; docs/concepts/node-order.md), and the progress line says
    how many such nodes it passed over. A progress line (``"3/18 nodes up, waiting for
    ranks 4, 7, ..."``; the ranks are known where nodes carry a ``node-rank`` label) goes
    to ``progress`` (default: the logger, at INFO) whenever the count changes.

    Args:
        num_nodes: How many nodes the job needs (>= 1).
        timeout_s: Give up after this many seconds; None waits forever.
        poll_s: Seconds between checks.
        progress: Called with each progress line.

    Returns:
        Ray's node table entries of the live nodes (those not counted included).

    Raises:
        ArgumentError: ``num_nodes`` is not an int >= 1.
        NodesNotReadyError: fewer nodes were alive when ``timeout_s`` ran out.
    """
    if isinstance(num_nodes, bool) or not isinstance(num_nodes, int) or num_nodes < 1:
        raise ArgumentError(f"num_nodes: expected an int >= 1, got {num_nodes!r}")
    for name, seconds, optional in (("timeout_s", timeout_s, True), ("poll_s", poll_s, False)):
        if (seconds is not None or not optional) and (
            isinstance(seconds, bool) or not isinstance(seconds, int | float) or not seconds > 0
        ):
            allowed = " or None" if optional else ""
            raise ArgumentError(f"{name}: expected seconds > 0{allowed}, got {seconds!r}")
    say = progress or Progress(logger)  # INFO, and stderr once the wait is long
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    last = -1
    while True:
        nodes = alive_nodes()
        counted = [n for n in nodes if counts_while_waiting(n)]
        if len(counted) >= num_nodes:
            if last != -1:
                say(f"{len(counted)}/{num_nodes} nodes up")
            return nodes
        missing = _missing_ranks(counted, num_nodes)
        line = f"{len(counted)}/{num_nodes} nodes up, " + (
            f"waiting for ranks {_shorten(missing)}"
            if missing
            else f"waiting for {num_nodes - len(counted)} more"
        )
        if len(nodes) > len(counted):
            line += (
                f" (not counting {len(nodes) - len(counted)} node(s) with 0 CPUs, no "
                "accelerators and no node-rank label, such as a Ray head started with "
                "--num-cpus 0)"
            )
        if len(counted) != last or progress is None:
            say(line)
            last = len(counted)
        if deadline is not None and time.monotonic() >= deadline:
            raise NodesNotReadyError(
                f"timed out after {timeout_s:g}s: {line}. Start the missing nodes "
                "(ray start --address=...) or lower num_nodes",
                expected=num_nodes,
                alive=len(counted),
                missing_ranks=missing,
            )
        left = poll_s if deadline is None else deadline - time.monotonic()
        time.sleep(max(0.0, min(poll_s, left)))


def _missing_ranks(nodes: list[dict[str, Any]], num_nodes: int) -> list[int]:
    ranks = [_rank_label(n) for n in nodes]
    if not nodes or any(r is None for r in ranks):
        return []
    return sorted(set(range(num_nodes)) - {r for r in ranks if r is not None})


def _shorten(values: list[int], limit: int = 8) -> str:
    shown = ", ".join(map(str, values[:limit]))
    return shown + (", ..." if len(values) > limit else "")


def _local_only_given(
    num_gpus: int | None, num_cpus: int | None, node_ip_address: str | None
) -> list[str]:
    """Check the arguments that only apply to a local start; the names of those given."""
    for name, count in (("num_gpus", num_gpus), ("num_cpus", num_cpus)):
        if count is not None and (
            isinstance(count, bool) or not isinstance(count, int) or count < 0
        ):
            raise ArgumentError(f"{name}: expected an int >= 0 or None, got {count!r}")
    if node_ip_address is not None and (
        not isinstance(node_ip_address, str) or not node_ip_address.strip()
    ):
        raise ArgumentError(
            f"node_ip_address: expected a non-empty IP string or None, got {node_ip_address!r}"
        )
    local_only = {"num_gpus": num_gpus, "num_cpus": num_cpus, "node_ip_address": node_ip_address}
    return [k for k, v in local_only.items() if v is not None]


class Cluster:
    """One job's view of a Ray cluster: connection, namespace and ordered inventory.

    >>> cluster = Cluster(4, address="10.0.0.1:6379", job="grpo-7b")  # doctest: +SKIP
    >>> cluster.inventory.node(0).node_id  # doctest: +SKIP

    Args:
        num_nodes: Nodes to wait for; None uses the nodes alive now (or the job's view).
            A node with 0 CPUs, no accelerators and no node rank (a Ray head started with
            ``--num-cpus 0``) is not one of them (``left_out``).
        address: A Ray address to connect to; default ``RAY_ADDRESS``; when neither is
            set (and Ray is not connected yet) a local cluster is started on this machine.
        job: The job's name; default ``PLACEMENT_JOB``, else inferred from the current Ray
            namespace, else a fresh unique name.
        num_gpus: Local start only: GPUs of the local node (its real ones by default; a
            number declares that many logical GPUs).
        num_cpus: Local start only: CPUs of the local node.
        node_ip_address: Local start only: the IP the local node binds to.
        timeout_s: Limit for waiting for nodes and for discovery; None waits forever for
            nodes (autoscaling clusters).
        progress: Receives the "n/m nodes up" lines (default: the logger).
        export_env: Opt in to putting ``RAY_ADDRESS``, ``PLACEMENT_JOB`` and
            ``PLACEMENT_CLUSTER_ID`` into ``os.environ`` (until :meth:`shutdown` restores
            them) so every later subprocess of this one attaches to the same job. Off by
            default: nothing process-wide is edited; pass :meth:`attach_env` to the
            subprocesses that should attach instead.

    Attributes:
        left_out: Ray node ids of the live nodes discovery left out of the job's nodes:
            each offers nothing to schedule on (0 CPUs, no accelerators) and has no node
            rank, as a Ray head started with ``--num-cpus 0`` (docs/concepts/node-order.md).
        shares: The GPU shares this view's workers hold per placement-group bundle (a
            ``ShareLedger``): every worker started through this view books its shares
            there, and every later allocation into those bundles is checked against them.

    Raises:
        ArgumentError: a bad argument.
        ClusterError: Ray cannot be reached, or its connection contradicts the arguments.
        ForeignClusterError: the cluster reached is not the one this job was started on.
        NodesNotReadyError: ``num_nodes`` nodes did not come up within ``timeout_s``.
        NodeOrderError: node ranks (labels / env vars) are partial or inconsistent.
    """

    def __init__(
        self,
        num_nodes: int | None = None,
        *,
        address: str | None = None,
        job: str | None = None,
        num_gpus: int | None = None,
        num_cpus: int | None = None,
        node_ip_address: str | None = None,
        timeout_s: float | None = 300.0,
        progress: Callable[[str], None] | None = None,
        export_env: bool = False,
    ) -> None:
        if num_nodes is not None and (
            isinstance(num_nodes, bool) or not isinstance(num_nodes, int) or num_nodes < 1
        ):
            raise ArgumentError(f"num_nodes: expected an int >= 1 or None, got {num_nodes!r}")
        if timeout_s is not None and (
            isinstance(timeout_s, bool)
            or not isinstance(timeout_s, int | float)
            or not timeout_s > 0
        ):
            raise ArgumentError(f"timeout_s: expected seconds > 0 or None, got {timeout_s!r}")
        self.started_local = False
        self.shares = ShareLedger()
        self._exported: dict[str, str | None] = {}
        self.job, self.namespace = self._connect(address, job, num_gpus, num_cpus, node_ip_address)
        try:
            self._attach(num_nodes, timeout_s, progress, export_env)
        except BaseException:
            self.shutdown()  # a local Ray this call started must not outlive the failure
            raise

    def _attach(
        self,
        num_nodes: int | None,
        timeout_s: float | None,
        progress: Callable[[str], None] | None,
        export_env: bool,
    ) -> None:
        self._owner = False
        self.address: str = ray.get_runtime_context().gcs_address
        self.cluster_id = head_node_id()
        expected = os.environ.get(CLUSTER_ID_ENV)
        if expected and expected != self.cluster_id:
            raise ForeignClusterError(
                f"this process belongs to job {self.job!r} on Ray cluster {expected} "
                f"({CLUSTER_ID_ENV}), but {self.address} is cluster {self.cluster_id}; "
                f"set RAY_ADDRESS to the job's cluster, or unset {CLUSTER_ID_ENV} to start "
                "a new job",
                expected=expected,
                found=self.cluster_id,
            )
        self._state_actor: Any = None
        state = self._on_state_actor(lambda actor: actor.get.remote())
        if state is not None:
            have = state["inventory"].num_nodes
            if num_nodes is not None and num_nodes != have:
                raise ClusterError(
                    f"job {self.job!r} already has a view of {have} nodes, this process asks "
                    f"for {num_nodes}; pass num_nodes={have} or None to attach"
                )
            logger.debug("attached to job %s's existing view", self.job)
        else:
            mine = self._discover(num_nodes, timeout_s, progress)
            state = self._on_state_actor(lambda actor: actor.publish.remote(mine))
            self._owner = state["token"] == mine["token"]
        if state["cluster_id"] != self.cluster_id:
            raise ForeignClusterError(
                f"job {self.job!r}'s view was recorded on cluster {state['cluster_id']}, "
                f"but this process reached cluster {self.cluster_id}",
                expected=str(state["cluster_id"]),
                found=self.cluster_id,
            )
        self.inventory: Inventory = state["inventory"]
        self.warnings: tuple[str, ...] = tuple(state["warnings"])
        self.left_out: tuple[str, ...] = tuple(state.get("left_out", ()))
        self._rank_of = {n.node_id: n.rank for n in self.inventory.nodes}
        if export_env:
            for key, value in self.attach_env().items():
                self._exported.setdefault(key, os.environ.get(key))
                os.environ[key] = value

    def _on_state_actor(self, call: Callable[[Any], Any]) -> Any:
        """Run ``call(actor)`` on the job's view holder; recreate the holder when it is lost.

        The holder lives on the head node (hard node affinity): a lost worker node never
        takes the job's view along, and a lost head node ends the Ray cluster anyway. If it
        was lost all the same (its owner's node died), it is created again, empty, and
        this ``Cluster`` discovers and publishes the view again.

        Raises:
            ClusterError: the holder cannot be created or answered no call in time.
        """
        home = head_node_id() or ray.get_runtime_context().get_node_id()
        last: BaseException | None = None
        for attempt in range(_STATE_ATTEMPTS):
            # Keep the first handle: Ray ends a named actor once its creator's handle is
            # gone, so swapping it for a looked-up one would drop the view.
            actor = self._state_actor
            if actor is None:
                actor = _JobState.options(  # type: ignore[attr-defined]
                    name=STATE_ACTOR_NAME,
                    namespace=self.namespace,
                    get_if_exists=True,
                    scheduling_strategy=NodeAffinitySchedulingStrategy(node_id=home, soft=False),
                ).remote()
            try:
                answer = ray.get(call(actor), timeout=60)
            except ray.exceptions.RayActorError as exc:  # died, or unreachable
                last = exc
                logger.warning(
                    "job %s's view holder was lost (%s); creating it again", self.job, exc
                )
                with contextlib.suppress(Exception):  # it is gone already
                    ray.kill(actor, no_restart=True)
                self._state_actor = None
                time.sleep(0.5 * (attempt + 1))  # Ray frees the dead actor's name
                continue
            except ray.exceptions.GetTimeoutError as exc:
                last = exc
                break
            self._state_actor = actor
            return answer
        raise ClusterError(
            f"job {self.job!r}: the actor holding the job's view ({STATE_ACTOR_NAME!r} in "
            f"namespace {self.namespace!r}) could not be reached or created again: "
            + clean(str(last), 400)
        )

    def _connect(
        self,
        address: str | None,
        job: str | None,
        num_gpus: int | None,
        num_cpus: int | None,
        node_ip_address: str | None,
    ) -> tuple[str, str]:
        address = address or os.environ.get("RAY_ADDRESS") or None
        if job is None:
            job = os.environ.get(JOB_ENV) or None
        if job is not None and (not isinstance(job, str) or not job.strip() or "/" in job):
            raise ArgumentError(f"job: expected a non-empty name without '/', got {job!r}")
        given = _local_only_given(num_gpus, num_cpus, node_ip_address)
        if ray.is_initialized():
            if given:
                raise ArgumentError(
                    f"{', '.join(given)} only apply when starting a local cluster; Ray is "
                    "already connected"
                )
            namespace = ray.get_runtime_context().namespace
            current = ray.get_runtime_context().gcs_address
            if address and address not in (current, "auto") and not address.startswith("ray://"):
                raise ClusterError(
                    f"Ray is already connected to {current}, not to the requested {address}; "
                    "call ray.shutdown() first or drop the address"
                )
            if job is not None and namespace != NAMESPACE_PREFIX + job:
                raise ClusterError(
                    f"Ray is already connected in namespace {namespace!r}, but job {job!r} "
                    f"uses namespace {NAMESPACE_PREFIX + job!r}; do not call ray.init() "
                    "before Cluster(), or pass the matching job"
                )
            name = namespace.removeprefix(NAMESPACE_PREFIX)
            return name, namespace
        job = job or uuid.uuid4().hex[:12]
        namespace = NAMESPACE_PREFIX + job
        if address:
            if given:
                raise ClusterError(
                    f"{', '.join(given)} only apply when starting a local cluster; "
                    f"the cluster at {address} has its own resources"
                )
            try:
                ray.init(address=address, namespace=namespace, log_to_driver=True)
            except (ConnectionError, RuntimeError, ValueError) as exc:
                raise ClusterError(
                    f"cannot connect to the Ray cluster at {address}: {clean(str(exc))}"
                ) from exc
            return job, namespace
        if os.environ.get(CLUSTER_ID_ENV):
            raise ClusterError(
                f"this process belongs to job {job!r} on cluster {os.environ[CLUSTER_ID_ENV]} "
                f"({CLUSTER_ID_ENV}) but no address was given and RAY_ADDRESS is unset; "
                "refusing to start a new local cluster"
            )
        kwargs: dict[str, Any] = {"include_dashboard": False}
        if num_gpus is not None:
            kwargs["num_gpus"] = num_gpus
        if num_cpus is not None:
            kwargs["num_cpus"] = num_cpus
        if node_ip_address is not None:
            kwargs["_node_ip_address"] = node_ip_address
        ray.init(address="local", namespace=namespace, **kwargs)
        self.started_local = True
        return job, namespace

    def _discover(
        self,
        num_nodes: int | None,
        timeout_s: float | None,
        progress: Callable[[str], None] | None,
    ) -> dict[str, Any]:
        nodes = wait_for_nodes(num_nodes or 1, timeout_s=timeout_s, progress=progress)
        node_ids = [n["NodeID"] for n in nodes]
        inventory, ordered, warnings = discover_inventory(node_ids, timeout_s=timeout_s or 120.0)
        kept = {facts.node_id for facts in ordered}
        if num_nodes is not None and inventory.num_nodes > num_nodes:
            extra = [n.node_id for n in inventory.nodes[num_nodes:]]
            warnings.append(
                f"{inventory.num_nodes} nodes are up but the job asked for {num_nodes}; "
                f"using ranks 0..{num_nodes - 1}, ignoring {', '.join(extra)}"
            )
            inventory = Inventory(inventory.nodes[:num_nodes])
        return {
            "token": uuid.uuid4().hex,
            "job": self.job,
            "cluster_id": self.cluster_id,
            "inventory": inventory,
            "warnings": warnings,
            "left_out": [node_id for node_id in node_ids if node_id not in kept],
        }

    # ----------------------------------------------------------------- the view
    @property
    def num_nodes(self) -> int:
        """Number of nodes in the job's view."""
        return self.inventory.num_nodes

    @property
    def nodes(self) -> tuple[Node, ...]:
        """The nodes in rank order."""
        return self.inventory.nodes

    def node(self, rank: int) -> Node:
        """The node of the given rank (``InventoryError`` when out of range)."""
        return self.inventory.node(rank)

    def rank_of(self, node_id: str) -> int:
        """The rank of a Ray node id.

        Raises:
            ClusterError: the node is not part of this job's view.
        """
        try:
            rank: int = self._rank_of[node_id]
        except KeyError:
            raise ClusterError(
                f"Ray node {node_id} is not one of job {self.job!r}'s "
                f"{self.num_nodes} nodes (it joined after discovery, or belongs elsewhere)"
            ) from None
        return rank

    @property
    def master_addr(self) -> str:
        """Address of node 0 (its IP, else hostname, else node id)."""
        return self.node_address(0)

    def node_address(self, rank: int) -> str:
        """Address of the node of ``rank`` (core's ``Node.address``)."""
        return self.inventory.node(rank).address

    def _numbered_as(self, inventory: Inventory) -> Cluster:
        """This view with its nodes numbered as ``inventory`` (a plan's) numbers them.

        A plan made with ``cluster.node_order: nvlink_domain`` renumbers the live nodes so
        each NVLink domain's are consecutive; a launch of it speaks the plan's node ranks
        everywhere (placement groups pinned per node, bundles, workers, lost nodes), so it
        works on this renumbered view. The view shares the connection and the GPU share
        ledger; it never owns the job's view nor a local Ray, so its ``shutdown`` leaves
        both alone.

        Raises:
            ClusterError: ``inventory`` holds other nodes than this view.
        """
        if [n.node_id for n in inventory.nodes] == [n.node_id for n in self.nodes]:
            return self
        if sorted(n.node_id for n in inventory.nodes) != sorted(self._rank_of):
            raise ClusterError(
                f"the plan's {inventory.num_nodes} nodes are not job {self.job!r}'s "
                f"{self.num_nodes} nodes; plan on cluster.inventory"
            )
        return self._seeing(inventory)

    def _seeing(self, inventory: Inventory) -> Cluster:
        """This view seeing ``inventory``'s nodes, sharing its connection and share ledger;
        it never owns the job's view nor a local Ray, so its ``shutdown`` leaves both alone."""
        view = copy.copy(self)
        view.inventory = inventory
        view._rank_of = {n.node_id: n.rank for n in inventory.nodes}
        view._owner = False
        view.started_local = False
        view._exported = {}
        return view

    def alive_node_ids(self) -> set[str]:
        """Ray node ids of this job's nodes that are alive now."""
        alive = {n["NodeID"] for n in alive_nodes()}
        return {n.node_id for n in self.inventory.nodes if n.node_id in alive}

    def attach_env(self) -> dict[str, str]:
        """Environment that makes ``Cluster()`` in another process join this job's view."""
        return {"RAY_ADDRESS": self.address, JOB_ENV: self.job, CLUSTER_ID_ENV: self.cluster_id}

    def shutdown(self) -> None:
        """Release this ``Cluster``; stop Ray if it started Ray locally.

        The ``Cluster`` that discovered the job's view also drops it (the next
        ``Cluster()`` of the job discovers again). Restores the variables ``export_env`` set.
        """
        if self._owner and ray.is_initialized() and self._state_actor is not None:
            ray.kill(self._state_actor, no_restart=True)
            self._owner = False
        for key, old in self._exported.items():
            if old is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = old
        self._exported.clear()
        if self.started_local and ray.is_initialized():
            ray.shutdown()
            self.started_local = False

    def __repr__(self) -> str:
        return (
            f"Cluster(job={self.job!r}, nodes={self.num_nodes}, address={self.address!r}, "
            f"cluster_id={self.cluster_id[:12]!r})"
        )
