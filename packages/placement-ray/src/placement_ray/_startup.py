"""The one startup routine: create deferred actors, wire their ports, boot, or undo it all.

``launch``, slime's train group and its rollout engines each describe their workers as
:class:`Start` records (GPU shares already checked) and call :func:`start_workers`: it
creates every actor on its node and bundle, gives rank 0 of each component a held
``MASTER_PORT`` block when asked, tells every worker the ports the others reported once
all have started, runs their ``__init__`` and, if anything fails, kills every worker it
created (and runs the caller's cleanup) before re-raising.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ray.util.placement_group import PlacementGroup

from ._allocate import Worker, allocate, boot, release
from ._cluster import Cluster
from ._worker import MASTER_PORT_BLOCK

__all__ = ["LateEnv", "Start", "Started", "start_workers"]

LateEnv = Callable[[int, Worker, Sequence[Mapping[str, Any]]], Mapping[str, str]]
"""``(index, worker, first reports) -> variables`` known only once every worker started."""


@dataclass(frozen=True, slots=True)
class Start:
    """One worker to create.

    Attributes:
        cls: The actor class (plain or ``@ray.remote``).
        name: The worker as people read it (``actor rank 3``).
        component: Its component / role.
        rank: Its rank within the component.
        node_rank: Its node.
        gpu_ids: The physical GPU ids it sees.
        env: Its environment.
        args: Constructor arguments.
        kwargs: Constructor keyword arguments.
        bundle: ``(placement group, bundle index)`` it sits in, or None (node affinity).
        gpu_share: Its fractional GPU request in that bundle.
        more_bundles: The bundles of its other GPUs in the same group (booked in the
            driver's ledger with its share).
        num_cpus: CPUs it asks for.
        interpreter: Its node group's interpreter on its node, if any (already checked).
        port_blocks: Block name -> ``(count, consecutive)`` it reserves and holds.
        capture_child_tasks: Child tasks run in its bundle.
        bind_cpus: Bind it to the CPUs in its ``PLACEMENT_CPU_AFFINITY`` before its
            ``__init__``.
    """

    cls: Any
    name: str
    component: str
    rank: int
    node_rank: int
    gpu_ids: tuple[int, ...]
    env: Mapping[str, str]
    args: Sequence[Any] = ()
    kwargs: Mapping[str, Any] | None = None
    bundle: tuple[PlacementGroup, int] | None = None
    gpu_share: float | None = None
    more_bundles: tuple[int, ...] = ()
    num_cpus: float = 0
    interpreter: str | None = None
    port_blocks: Mapping[str, tuple[int, bool]] = field(default_factory=dict)
    capture_child_tasks: bool = False
    bind_cpus: bool = False


@dataclass(frozen=True, slots=True)
class Started:
    """What :func:`start_workers` created.

    Attributes:
        workers: The workers, in the order of the starts.
        reports: What each reported after its ``__init__``.
        master_ports: Component -> the ``MASTER_PORT`` its rank 0 holds (None if none).
    """

    workers: tuple[Worker, ...]
    reports: tuple[dict[str, Any], ...]
    master_ports: Mapping[str, int | None]


def start_workers(
    starts: Sequence[Start],
    *,
    cluster: Cluster,
    master_port: bool = True,
    late_env: LateEnv | None = None,
    timeout_s: float | None = 120.0,
    cleanup: Callable[[], None] | None = None,
) -> Started:
    """Create, wire and boot ``starts``; on any failure kill them all and re-raise.

    Args:
        starts: The workers.
        cluster: The job's cluster view.
        master_port: Rank 0 of each component holds a ``MASTER_PORT`` block and every
            worker of the component gets ``MASTER_PORT`` before its ``__init__``.
        late_env: More variables known only once every worker has started.
        timeout_s: Limit for the workers to start (and, separately, their ``__init__``).
        cleanup: Run after the workers are killed when startup fails.

    Raises:
        ArgumentError: a bad start (node, GPUs, environment, share).
        WorkerStartTimeoutError: workers did not start in time (named, with the cause).
        WorkerStartError: workers died starting, or their ``__init__`` raised (named).
    """
    workers: list[Worker] = []
    ports: dict[str, int | None] = {s.component: None for s in starts}
    try:
        for s in starts:
            blocks = dict(s.port_blocks)
            if master_port and s.rank == 0:
                blocks[MASTER_PORT_BLOCK] = (1, False)
            workers.append(
                allocate(
                    s.cls,
                    s.name,
                    s.node_rank,
                    s.gpu_ids,
                    s.env,
                    s.args,
                    s.kwargs,
                    cluster=cluster,
                    bundle=s.bundle,
                    gpu_share=s.gpu_share if s.bundle is not None else None,
                    more_bundles=s.more_bundles,
                    num_cpus=s.num_cpus,
                    interpreter=s.interpreter,
                    check_interpreter=False,
                    component=s.component,
                    rank=s.rank,
                    port_blocks=blocks,
                    defer_init=True,
                    bind_cpus=s.bind_cpus,
                    capture_child_tasks=s.capture_child_tasks,
                )
            )

        def wire(i: int, worker: Worker, first: Sequence[Mapping[str, Any]]) -> dict[str, str]:
            env: dict[str, str] = {}
            if master_port:
                if ports[worker.component] is None:
                    rank0 = next(
                        j
                        for j, w in enumerate(workers)
                        if w.component == worker.component and w.rank == 0
                    )
                    ports[worker.component] = int(first[rank0]["ports"][MASTER_PORT_BLOCK][0])
                env["MASTER_PORT"] = str(ports[worker.component])
            if late_env is not None:
                env.update(late_env(i, worker, first))
            return env

        reports = boot(workers, wire, timeout_s=timeout_s)
    except BaseException:
        release(workers)
        if cleanup is not None:
            cleanup()
        raise
    return Started(tuple(workers), tuple(reports), ports)
