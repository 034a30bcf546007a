"""The one startup routine: create deferred actors, wire their ports, boot, or undo it all.

``launch``, slime's train group and its rollout engines each describe their workers as
worker requests (``_request.worker_request``; GPU shares already checked) and call
:func:`start_workers`: it creates every actor on its node and bundle (the request whole
goes to ``allocate``), tells every worker of a component whose rank 0 holds a
``MASTER_PORT`` block that port once all have started, adds what ``late_env`` gives, runs
their ``__init__`` and, if anything fails, kills every worker it created, returns their
GPU shares to the cluster view's ledger (and runs the caller's cleanup) before re-raising.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ._allocate import Worker, allocate, boot, release
from ._cluster import Cluster
from ._request import WorkerRequest
from ._standby import Standbys
from ._worker import MASTER_PORT_BLOCK

__all__ = ["LateEnv", "Started", "start_workers"]

LateEnv = Callable[[int, Worker, Sequence[Mapping[str, Any]]], Mapping[str, str]]
"""``(index, worker, first reports) -> variables`` known only once every worker started."""


@dataclass(frozen=True, slots=True)
class Started:
    """What :func:`start_workers` created.

    Attributes:
        workers: The workers, in the order of the requests.
        reports: What each reported after its ``__init__``.
        master_ports: Component -> the ``MASTER_PORT`` its rank 0 holds (None if none).
    """

    workers: tuple[Worker, ...]
    reports: tuple[dict[str, Any], ...]
    master_ports: Mapping[str, int | None]


def _master_ports(
    requests: Sequence[WorkerRequest], first: Sequence[Mapping[str, Any]]
) -> dict[str, int | None]:
    """Component -> the ``MASTER_PORT`` its rank 0 reported holding (None: holds none)."""
    ports: dict[str, int | None] = {r.component: None for r in requests}
    for request, report in zip(requests, first, strict=True):
        if request.holds_master_port:
            ports[request.component] = int(report["ports"][MASTER_PORT_BLOCK][0])
    return ports


def start_workers(
    requests: Sequence[WorkerRequest],
    *,
    cluster: Cluster,
    late_env: LateEnv | None = None,
    timeout_s: float | None = 120.0,
    cleanup: Callable[[], None] | None = None,
    standbys: Standbys | None = None,
) -> Started:
    """Create, wire and boot ``requests``; on any failure kill them all and re-raise.

    Args:
        requests: The workers' requests (interpreters already checked).
        cluster: The job's cluster view (shares are booked in its ledger).
        late_env: More variables known only once every worker has started.
        timeout_s: Limit for the workers to start (and, separately, their ``__init__``).
        cleanup: Run after the workers are killed when startup fails.
        standbys: Started standbys (warm spares): a request with a matching one adopts
            it instead of starting a process; the others on those nodes are stopped.

    Raises:
        ArgumentError: a bad request (node, GPUs, environment, share).
        WorkerStartTimeoutError: workers did not start in time (named, with the cause).
        WorkerStartError: workers died starting, or their ``__init__`` raised (named).
    """
    workers: list[Worker] = []
    ports: dict[str, int | None] = {r.component: None for r in requests}
    try:
        adopted = {} if standbys is None else standbys.adopt(requests, cluster=cluster)
        workers += adopted.values()
        for index, request in enumerate(requests):
            if index not in adopted:
                workers.append(
                    allocate(request, cluster=cluster, check_interpreter=False, defer_init=True)
                )
        order = {id(r): i for i, r in enumerate(requests)}
        workers.sort(key=lambda w: order[id(w.request)])

        def wire(i: int, worker: Worker, first: Sequence[Mapping[str, Any]]) -> dict[str, str]:
            if i == 0:
                ports.update(_master_ports(requests, first))
            env: dict[str, str] = {}
            port = ports[worker.component]
            if port is not None:
                env["MASTER_PORT"] = str(port)
            if late_env is not None:
                env.update(late_env(i, worker, first))
            return env

        reports = boot(workers, wire, timeout_s=timeout_s)
    except BaseException:
        release(workers, cluster.shares)
        if cleanup is not None:
            cleanup()
        raise
    return Started(tuple(workers), tuple(reports), ports)
