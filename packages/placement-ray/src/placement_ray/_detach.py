"""The job's rank map (``Launch.manifest()``), and launches that outlive their driver.

``launch(..., name="job", detached=True)`` creates its actors (named
``job/<component>/<rank>``) and placement groups with Ray's detached lifetime, and keeps
the launch's record (plan, workers' requests, reports, groups, recoveries) in a detached
named actor of the job's namespace, ``placement-launch/job``, pinned to the head node.
:func:`attach` in a new driver of that namespace reads the record and looks the actors up
by name: the ranks stay where they were (checkpoint-resume relies on it). The record is
written again after every recovery, and removed by ``Launch.shutdown()``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

import ray
from ray import cloudpickle
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from ._allocate import Worker, worker_shares
from ._cluster import Cluster
from ._rayapi import head_node_id
from ._standby import Standbys
from ._worker_group import WorkerGroup
from .errors import ArgumentError, ClusterError, ForeignClusterError, LaunchNotFoundError

if TYPE_CHECKING:
    from placement_core import Plan

    from ._placement_groups import OrderedPlacementGroup
    from ._recover import RecoveryReport

__all__ = [
    "RECORD_PREFIX",
    "RecordedJob",
    "forget_launch",
    "launch_manifest",
    "read_state",
    "refuse_taken",
    "save_launch",
    "saved_groups",
    "saved_standbys",
]

logger = logging.getLogger(__name__)

RECORD_PREFIX = "placement-launch/"
"""A detached launch's record is the actor ``placement-launch/<name>`` of its namespace."""

_FORMAT = 1


class RecordedJob(Protocol):
    """What the record and the manifest read of a launch (``Launch`` is one); this module
    imports nothing of ``_launch``, which calls it (``attach`` lives in ``_attach``)."""

    name: str | None
    plan: Plan
    cluster: Cluster
    on_node_loss: str
    recoveries: list[RecoveryReport]
    worker_groups: dict[str, WorkerGroup]
    standbys: Standbys

    @property
    def placement_groups(self) -> Mapping[int, OrderedPlacementGroup]: ...

    @property
    def spare_groups(self) -> Mapping[int, OrderedPlacementGroup]: ...

    @property
    def gpu_map(self) -> Mapping[tuple[int, int], int]: ...


@ray.remote(num_cpus=0, max_restarts=0)
class _LaunchRecord:
    """Holds one detached launch's pickled record."""

    def __init__(self) -> None:
        self._state: bytes | None = None

    def put(self, state: bytes) -> None:
        self._state = state

    def get(self) -> bytes | None:
        return self._state


def _record_name(name: str) -> str:
    return f"{RECORD_PREFIX}{name}"


def _find_record(name: str, namespace: str) -> Any | None:
    try:
        return ray.get_actor(_record_name(name), namespace=namespace)
    except ValueError:
        return None


def refuse_taken(cluster: Cluster, name: str) -> None:
    """Refuse a detached launch name already used in the job's namespace.

    Raises:
        ArgumentError: a detached launch of that name runs there.
    """
    if _find_record(name, cluster.namespace) is not None:
        raise ArgumentError(
            f"name: a detached launch {name!r} already runs in namespace "
            f"{cluster.namespace!r}; attach to it (placement_ray.attach({name!r})) or shut "
            "it down first"
        )


def _state(job: RecordedJob) -> dict[str, Any]:
    groups = {
        c: {
            "workers": [dataclasses.replace(w, handle=None) for w in g.workers],
            "reports": list(g.reports),
            "master_addr": g.master_addr,
            "master_port": g.master_port,
        }
        for c, g in job.worker_groups.items()
    }
    return {
        "format": _FORMAT,
        "name": job.name,
        "job": job.cluster.job,
        "namespace": job.cluster.namespace,
        "cluster_id": job.cluster.cluster_id,
        "plan": job.plan,
        "placement_groups": job.placement_groups,
        "spare_groups": job.spare_groups,
        "gpu_map": job.gpu_map,
        "on_node_loss": job.on_node_loss,
        "recoveries": job.recoveries,
        "groups": groups,
        "standbys": {
            key: [dataclasses.replace(w, handle=None) for w in workers]
            for key, workers in job.standbys.idle.items()
        },
    }


def save_launch(job: RecordedJob) -> None:
    """Write a named launch's record into its detached record actor (created if needed)."""
    assert job.name is not None
    actor = _LaunchRecord.options(  # type: ignore[attr-defined]
        name=_record_name(job.name),
        namespace=job.cluster.namespace,
        lifetime="detached",
        get_if_exists=True,
        scheduling_strategy=NodeAffinitySchedulingStrategy(
            node_id=head_node_id() or ray.get_runtime_context().get_node_id(), soft=False
        ),
    ).remote()
    state: bytes = cloudpickle.dumps(_state(job))  # type: ignore[no-untyped-call]
    ray.get(actor.put.remote(state), timeout=60)


def forget_launch(job: RecordedJob) -> None:
    """Remove a named launch's record: ``attach`` no longer finds it."""
    if job.name is None:
        return
    actor = _find_record(job.name, job.cluster.namespace)
    if actor is not None:
        with contextlib.suppress(Exception):  # gone already
            ray.kill(actor, no_restart=True)


def _not_found(name: str, namespace: str) -> LaunchNotFoundError:
    record = _record_name(name)
    named: list[Any] = ray.util.list_named_actors(all_namespaces=True)
    elsewhere = sorted(
        str(a["namespace"]) for a in named if a["name"] == record and a["namespace"] != namespace
    )
    if elsewhere:
        where = (
            f"a launch of that name lives in namespace {elsewhere[0]!r} (another job); "
            f"connect with that namespace (Cluster(job=...) or ray.init(namespace=...))"
        )
    else:
        here = sorted(
            str(a["name"])[len(RECORD_PREFIX) :]
            for a in named
            if a["namespace"] == namespace and str(a["name"]).startswith(RECORD_PREFIX)
        )
        where = f"detached launches here: {here}" if here else "there is none"
    return LaunchNotFoundError(
        f"attach: no detached launch {name!r} in Ray namespace {namespace!r}; {where}",
        name=name,
        namespace=namespace,
        elsewhere=elsewhere,
    )


def _read_record(name: str, namespace: str) -> bytes | None:
    """The pickled record of launch ``name``, or None (none, or shut down just now)."""
    record = _find_record(name, namespace)
    if record is None:
        return None
    try:
        raw: bytes | None = ray.get(record.get.remote(), timeout=60)
    except ray.exceptions.RayActorError:  # killed by a shutdown, its name not freed yet
        return None
    return raw


def _handle(worker: Worker, namespace: str) -> Any | None:
    actor_name = worker.actor_name
    if actor_name is None and worker.request is not None:
        actor_name = worker.request.actor_name
    if actor_name is None:
        return None
    try:
        return ray.get_actor(actor_name, namespace=namespace)
    except ValueError:
        return None


def saved_groups(state: dict[str, Any], cluster: Cluster) -> dict[str, WorkerGroup]:
    groups: dict[str, WorkerGroup] = {}
    missing: list[str] = []
    for component, saved in state["groups"].items():
        workers = []
        for worker in saved["workers"]:
            handle = _handle(worker, cluster.namespace)
            if handle is None:
                missing.append(worker.describe())
            workers.append(dataclasses.replace(worker, handle=handle))
            cluster.shares.book(worker_shares(worker))
        groups[component] = WorkerGroup(
            component,
            workers,
            cluster=cluster,
            reports=saved["reports"],
            master_addr=saved["master_addr"],
            master_port=saved["master_port"],
        )
    if missing:
        logger.warning(
            "attach: %d worker(s) are gone (their node was lost?): %s; call recover()",
            len(missing),
            "; ".join(missing[:8]),
        )
    return groups


def read_state(name: str, cluster: Cluster) -> dict[str, Any]:
    """The record of detached launch ``name``, checked against this driver's view.

    Raises:
        LaunchNotFoundError: no detached launch of that name in this namespace (the
            message names the namespace that holds one, if any).
        ForeignClusterError: the launch was made on another Ray cluster.
        ClusterError: this driver's view orders the nodes differently from the launch's.
    """
    raw = _read_record(name, cluster.namespace)
    if raw is None:
        raise _not_found(name, cluster.namespace)
    state: dict[str, Any] = cloudpickle.loads(raw)
    if state["cluster_id"] != cluster.cluster_id:
        raise ForeignClusterError(
            f"attach: launch {name!r} was made on Ray cluster {state['cluster_id']}, this "
            f"driver reached {cluster.cluster_id}",
            expected=str(state["cluster_id"]),
            found=cluster.cluster_id,
        )
    ids = [n.node_id for n in state["plan"].inventory.nodes]
    if ids != [n.node_id for n in cluster.nodes]:
        raise ClusterError(
            f"attach: launch {name!r} ordered the nodes {ids}; this driver's view orders "
            f"them {[n.node_id for n in cluster.nodes]}"
        )
    return state


def saved_standbys(saved: dict[Any, list[Worker]], cluster: Cluster) -> Standbys:
    """The saved standbys still alive, reached by their actor names."""
    standbys = Standbys()
    for key, workers in saved.items():
        for worker in workers:
            handle = _handle(worker, cluster.namespace)
            if handle is not None:
                standbys.idle.setdefault(key, []).append(dataclasses.replace(worker, handle=handle))
                cluster.shares.book(worker_shares(worker))
    return standbys


def launch_manifest(job: RecordedJob) -> dict[str, Any]:
    """See ``Launch.manifest``."""
    components: dict[str, list[dict[str, Any]]] = {}
    for component, group in job.worker_groups.items():
        entries = []
        for worker in group.workers:
            report = group.reports[worker.rank] if group.reports else {}
            node = job.cluster.node(worker.node_rank)
            uuids = {a.index: a.uuid for a in node.accelerators}
            entries.append(
                {
                    "rank": worker.rank,
                    "node_rank": worker.node_rank,
                    "node_id": worker.node_id,
                    "gpu_ids": list(worker.gpu_ids),
                    "gpu_uuids": [uuids.get(g) for g in worker.gpu_ids],
                    "ports": {k: list(v) for k, v in dict(report.get("ports", {})).items()},
                    "actor_name": worker.actor_name,
                    "pid": report.get("pid"),
                    "master_addr": group.master_addr,
                    "master_port": group.master_port,
                }
            )
        components[component] = entries
    return {
        "name": job.name,
        "job": job.cluster.job,
        "namespace": job.cluster.namespace,
        "cluster_id": job.cluster.cluster_id,
        "lost_nodes": list(job.plan.lost_nodes),
        "spares": list(job.plan.config.spare_nodes),
        "placement_groups": {str(r): g.pg.id.hex() for r, g in job.placement_groups.items()},
        "moves": [line for report in job.recoveries for line in report.lines()],
        "components": components,
    }
