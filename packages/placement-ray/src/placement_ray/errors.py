"""Exceptions raised by placement-ray: one hierarchy, one module.

Hierarchy::

    placement_core.PlacementError            root of the whole stack
    └── PlacementRayError                    root of placement-ray; never raised directly
    ├── ArgumentError (ValueError)           a bad argument: names it, its value, what fits
    │   ├── InterpreterError                 a node group's interpreter cannot run Ray
    │   │                                    workers on its node
    │   ├── OversubscribedGPUError           fractional GPU shares on one GPU sum to > 1
    │   └── UnknownRoleError (KeyError)      a slime layout has no such role
    ├── BusyAcceleratorError (RuntimeError)  planned GPUs already run other processes
    │                                        (launch without allow_busy=True)
    ├── CpuBindingError (OSError)            inside a worker: its planned CPUs cannot be
    │                                        bound (launch with bind_cpus=True)
    ├── ClusterError (RuntimeError)          cannot connect, or connected to the wrong
    │   │                                    cluster / namespace
    │   └── ForeignClusterError              the Ray cluster is not the one this job runs on
    ├── NodesNotReadyError (TimeoutError)    fewer nodes than asked for came up in time
    ├── NodeOrderError (ValueError)          node-rank labels / env vars are missing on some
    │                                        nodes, repeat, or are not exactly 0..n-1
    ├── InfeasiblePlacementGroupError (ValueError)
    │   │                                    a placement group that no node set can ever hold
    │   ├── EngineAlignmentError             slime's rollout engines cannot each keep to one
    │   │                                    node (or whole nodes); names sizes that fit
    │   └── AcceleratorMismatchError         the plan's accelerator type on a node is not the
    │                                        node's live type (names node, planned, live)
    ├── PlacementGroupTimeoutError (TimeoutError)
    │                                        a placement group was not placed in time; lists
    │                                        every unplaced bundle and every node's resources
    ├── ProbeError (RuntimeError)            learning a bundle's physical GPU failed
    ├── NativeCallError (RuntimeError)       placement-native failed (its error is the
    │                                        __cause__; a native ValueError becomes an
    │                                        ArgumentError instead)
    ├── NodeLostError (RuntimeError)         nodes died under a running job; lists the
    │                                        affected bundles / workers by rank, node, GPUs
    ├── NoSpareNodeError (RuntimeError)      Launch.recover(): a lost node has no compatible
    │                                        spare left; nothing was changed
    ├── LaunchNotFoundError (LookupError)    attach(): no detached launch of that name in
    │                                        this namespace (names where one lives instead)
    ├── WorkerStartError (RuntimeError)      workers died starting or their __init__ raised
    ├── WorkerStartTimeoutError (TimeoutError)
    │                                        workers did not start in time (bad interpreter,
    │                                        GPU shares that cannot fit): names the cause
    ├── WorkerCallError (RuntimeError)       a WorkerGroup call raised or lost its worker
    │                                        on some ranks
    ├── WorkerTimeoutError (TimeoutError)    a WorkerGroup call did not finish in time
    └── PortNotHeldError (LookupError)       inside a worker: a port block it does not hold
                                             (or handed over already)

Warnings are not errors: ``placement_ray.PlacementRayWarning`` (a ``UserWarning``) is what a
user must see without configuring logging (a recovery after a node loss, an attach that
found workers gone); it is defined here too, beside the errors.

placement-native's own errors (``placement_native.NativeError``: NVML, ports, the
testing kit's fake NVML) do not derive from ``PlacementError``: placement-native imports
neither core nor ray. placement-ray never lets one through: every call it makes into
placement-native re-raises a native ``ValueError`` as ``ArgumentError`` and any other
native error as ``NativeCallError``, with the native error as ``__cause__``. So one
``except placement_core.PlacementError`` catches everything the stack raises.

The lease ledger's errors (sharing a cluster): ``LeaseError`` (an ``ArgumentError``:
unknown node or accelerator, bad share or priority) and its ``JobNameTakenError``,
``LedgerVersionError`` (RuntimeError) and ``QueueTimeoutError`` (TimeoutError).

Every exception pickles (they cross Ray process boundaries): the message and the
attributes are kept in ``__dict__`` and replayed by ``__reduce__``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from placement_core import PlacementError

__all__ = [
    "AcceleratorMismatchError",
    "ArgumentError",
    "BusyAcceleratorError",
    "ClusterError",
    "CpuBindingError",
    "EngineAlignmentError",
    "ForeignClusterError",
    "InfeasiblePlacementGroupError",
    "InterpreterError",
    "JobNameTakenError",
    "LaunchNotFoundError",
    "LeaseError",
    "LedgerVersionError",
    "NativeCallError",
    "NoSpareNodeError",
    "NodeLostError",
    "NodeOrderError",
    "NodesNotReadyError",
    "OversubscribedGPUError",
    "PlacementGroupTimeoutError",
    "PlacementRayError",
    "PlacementRayWarning",
    "PortNotHeldError",
    "ProbeError",
    "QueueTimeoutError",
    "UnknownRoleError",
    "WorkerCallError",
    "WorkerStartError",
    "WorkerStartTimeoutError",
    "WorkerTimeoutError",
]


class PlacementRayWarning(UserWarning):
    """A warning a user must see without configuring logging (also logged at WARNING).

    Silence it with ``warnings.filterwarnings("ignore", category=PlacementRayWarning)``.
    """


class PlacementRayError(PlacementError):
    """Root of every placement-ray error. Catch this to catch them all.

    It derives from ``placement_core.PlacementError``, so one ``except PlacementError``
    catches what any package of the stack reports.

    Attributes:
        message: The full message (also ``reason``; ``path`` is None).
    """

    def __init__(self, message: str) -> None:
        self.message = message
        super().__init__(message)

    def __str__(self) -> str:
        return self.message

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild, (type(self), dict(self.__dict__)))


def _rebuild(cls: type[PlacementRayError], state: dict[str, Any]) -> PlacementRayError:
    error = cls.__new__(cls)
    error.__dict__.update(state)
    Exception.__init__(error, state.get("message", ""))
    return error


class ArgumentError(PlacementRayError, ValueError):
    """A bad argument to a placement-ray function; the message names it and its value."""


class InterpreterError(ArgumentError):
    """A node group's ``python_interpreter_path`` cannot run Ray workers on its node.

    Attributes:
        problems: ``(node rank, path, reason)`` for every bad interpreter.
    """

    def __init__(self, message: str, *, problems: Sequence[tuple[int, str, str]] = ()) -> None:
        self.problems = tuple(problems)
        super().__init__(message)


class OversubscribedGPUError(ArgumentError):
    """Fractional GPU shares placed on one GPU add up to more than 1.

    Ray would wait silently, forever, for the worker that does not fit; this is raised
    before any of them is created.

    Attributes:
        gpus: Per over-subscribed GPU, ``(where, total, [(who, share), ...])``.
    """

    def __init__(
        self, message: str, *, gpus: Sequence[tuple[str, float, Sequence[tuple[str, float]]]] = ()
    ) -> None:
        self.gpus = tuple((w, t, tuple(s)) for w, t, s in gpus)
        super().__init__(message)


class UnknownRoleError(ArgumentError, KeyError):
    """A slime layout was indexed with a role it does not have (``actor`` / ``rollout``)."""


class BusyAcceleratorError(PlacementRayError, RuntimeError):
    """Accelerators the plan uses already run other processes (their node snapshots say).

    Raised by ``launch`` before anything is reserved, unless ``allow_busy=True``.

    Attributes:
        busy: ``(node rank, accelerator index, pids)`` for every busy planned accelerator.
    """

    def __init__(
        self, message: str, *, busy: Sequence[tuple[int, int, Sequence[int]]] = ()
    ) -> None:
        self.busy = tuple((n, i, tuple(p)) for n, i, p in busy)
        super().__init__(message)


class CpuBindingError(PlacementRayError, OSError):
    """Inside a worker: the CPUs its placement names cannot be bound (``bind_cpus=True``)."""


class ClusterError(PlacementRayError, RuntimeError):
    """Connecting to, starting or attaching to a Ray cluster failed."""


class ForeignClusterError(ClusterError):
    """The Ray cluster reached is not the one this job was started on.

    Attributes:
        expected: The cluster id the job recorded (``PLACEMENT_CLUSTER_ID``).
        found: The cluster id of the cluster actually reached.
    """

    def __init__(self, message: str, *, expected: str, found: str) -> None:
        self.expected = expected
        self.found = found
        super().__init__(message)


class NodesNotReadyError(PlacementRayError, TimeoutError):
    """Fewer than the requested number of nodes registered before the timeout.

    Attributes:
        expected: How many nodes were asked for.
        alive: How many were up when the wait gave up.
        missing_ranks: Node ranks known to be missing (from node-rank labels), else empty.
    """

    def __init__(
        self, message: str, *, expected: int, alive: int, missing_ranks: Sequence[int] = ()
    ) -> None:
        self.expected = expected
        self.alive = alive
        self.missing_ranks = tuple(missing_ranks)
        super().__init__(message)


class NodeOrderError(PlacementRayError, ValueError):
    """Node ranks given by labels or env vars are partial, repeated or not ``0..n-1``."""


class InfeasiblePlacementGroupError(PlacementRayError, ValueError):
    """A placement group that the cluster's nodes can never hold, whatever else finishes.

    Attributes:
        problems: One line per reason (a bundle too big for any node, too few nodes, ...).
    """

    def __init__(self, message: str, *, problems: Sequence[str] = ()) -> None:
        self.problems = tuple(problems)
        super().__init__(message)


class EngineAlignmentError(InfeasiblePlacementGroupError):
    """slime's rollout engines cannot each keep to one node (or to whole nodes) here.

    Attributes:
        problems: One line per reason, as for any infeasible group.
        fitting_sizes: Engine sizes (dividing the rollout's GPUs) that would fit.
    """

    def __init__(
        self, message: str, *, problems: Sequence[str] = (), fitting_sizes: Sequence[int] = ()
    ) -> None:
        self.fitting_sizes = tuple(fitting_sizes)
        super().__init__(message, problems=problems)


class AcceleratorMismatchError(InfeasiblePlacementGroupError):
    """The plan puts one accelerator type on a node whose live accelerators are another.

    Raised by ``launch`` before anything is reserved (a bundle asks for the planned type's
    Ray resource, which the node does not offer).

    Attributes:
        mismatches: ``(node rank, planned type, live type or None)`` per wrong node.
        problems: One line per wrong node.
    """

    def __init__(
        self, message: str, *, mismatches: Sequence[tuple[int, str, str | None]] = ()
    ) -> None:
        self.mismatches = tuple((n, p, live) for n, p, live in mismatches)
        super().__init__(
            message,
            problems=[
                f"node {n}: planned {p}, live {live or 'no accelerators'}"
                for n, p, live in self.mismatches
            ],
        )


class PlacementGroupTimeoutError(PlacementRayError, TimeoutError):
    """A feasible placement group was not placed before the timeout; it has been removed.

    Attributes:
        unplaced: ``(bundle index, bundle resources)`` of every bundle without a node.
        nodes: Per node (by node id): its rank, labels, and available / total resources.
    """

    def __init__(
        self,
        message: str,
        *,
        unplaced: Sequence[tuple[int, Mapping[str, float]]] = (),
        nodes: Mapping[str, Mapping[str, Any]] | None = None,
    ) -> None:
        self.unplaced = tuple((i, dict(b)) for i, b in unplaced)
        self.nodes = {k: dict(v) for k, v in (nodes or {}).items()}
        super().__init__(message)


class ProbeError(PlacementRayError, RuntimeError):
    """A probe task that reads a bundle's physical GPU id failed or timed out."""


class NativeCallError(PlacementRayError, RuntimeError):
    """placement-native failed where placement-ray called it; the native error is the cause.

    A native ``ValueError`` (a bad argument) becomes an ``ArgumentError`` instead.

    Attributes:
        native: The class name of the native error (``FakeNVMLBuildError``,
            ``NoFreePortsError``, ...); the error itself is ``__cause__``.
    """

    def __init__(self, message: str, *, native: str) -> None:
        self.native = native
        super().__init__(message)


class NodeLostError(PlacementRayError, RuntimeError):
    """Nodes that a running job uses have died.

    Attributes:
        dead_nodes: ``(node rank, node id)`` of every lost node.
        affected: One entry per affected bundle / worker: a mapping with ``role``,
            ``rank``, ``bundle_index``, ``node_rank``, ``node_id`` and ``gpu_ids``.
        recovery: With ``launch(..., on_node_loss="recover")``: the
            ``RecoveryReport`` of the takeover done before this error was raised (the
            lost ranks run again on spares); None otherwise.
    """

    def __init__(
        self,
        message: str,
        *,
        dead_nodes: Sequence[tuple[int, str]] = (),
        affected: Sequence[Mapping[str, Any]] = (),
        recovery: Any = None,
    ) -> None:
        self.dead_nodes = tuple(dead_nodes)
        self.affected = tuple(dict(a) for a in affected)
        self.recovery = recovery
        super().__init__(message)


class NoSpareNodeError(PlacementRayError, RuntimeError):
    """``Launch.recover()`` found a lost node that no free spare can replace.

    Raised before anything is changed: the launch, its workers and its placement groups
    are as they were. core's ``NoSpareError`` is the ``__cause__``.

    Attributes:
        lost: The lost nodes left without a spare, ascending.
        needs: Per such node, what a spare would need to replace it.
    """

    def __init__(
        self, message: str, *, lost: Sequence[int] = (), needs: Mapping[int, str] | None = None
    ) -> None:
        self.lost = tuple(lost)
        self.needs = dict(needs or {})
        super().__init__(message)


class LaunchNotFoundError(PlacementRayError, LookupError):
    """``attach(name)`` found no detached launch of that name in this Ray namespace.

    Attributes:
        name: The launch name asked for.
        namespace: The namespace searched.
        elsewhere: Other namespaces that hold a launch of that name.
    """

    def __init__(
        self, message: str, *, name: str = "", namespace: str = "", elsewhere: Sequence[str] = ()
    ) -> None:
        self.name = name
        self.namespace = namespace
        self.elsewhere = tuple(elsewhere)
        super().__init__(message)


class WorkerStartError(PlacementRayError, RuntimeError):
    """Workers died starting or their ``__init__`` raised; every one started was killed.

    Attributes:
        workers: Per failed worker: its description and the likely cause.
    """

    def __init__(self, message: str, *, workers: Sequence[tuple[str, str]] = ()) -> None:
        self.workers = tuple(workers)
        super().__init__(message)


class WorkerStartTimeoutError(PlacementRayError, TimeoutError):
    """Workers did not start (or finish ``__init__``) in time; every one was killed.

    Ray waits silently for a worker it cannot start (a broken interpreter, GPU shares
    that cannot fit): the message names each worker and the likely cause.

    Attributes:
        workers: Per late worker: its description and the likely cause.
    """

    def __init__(self, message: str, *, workers: Sequence[tuple[str, str]] = ()) -> None:
        self.workers = tuple(workers)
        super().__init__(message)


class WorkerCallError(PlacementRayError, RuntimeError):
    """A ``WorkerGroup`` method call failed on some ranks (it raised, or the worker died).

    Attributes:
        method: The method called.
        failed: Per failed rank: ``(rank, description, error text)``.
        pending: Ranks whose calls had not finished when the failure ended the call.
    """

    def __init__(
        self,
        message: str,
        *,
        method: str = "",
        failed: Sequence[tuple[int, str, str]] = (),
        pending: Sequence[int] = (),
    ) -> None:
        self.method = method
        self.failed = tuple(failed)
        self.pending = tuple(pending)
        super().__init__(message)


class WorkerTimeoutError(PlacementRayError, TimeoutError):
    """A ``WorkerGroup`` method call did not finish on some ranks within the timeout.

    Attributes:
        method: The method called.
        pending: Ranks that had not finished.
    """

    def __init__(self, message: str, *, method: str = "", pending: Sequence[int] = ()) -> None:
        self.method = method
        self.pending = tuple(pending)
        super().__init__(message)


class PortNotHeldError(PlacementRayError, LookupError):
    """Inside a worker: a port block was asked for that it does not hold (or handed over)."""


class LeaseError(ArgumentError):
    """A lease names a node or accelerator the ledger does not know, a bad share, a bad
    priority, or a job that holds no lease; the ledger is left as it was."""


class JobNameTakenError(LeaseError):
    """Another live job (another owner) already holds or waits for a lease of this name.

    Attributes:
        job: The name asked for.
        owner: The owner (Ray job id) that holds it.
    """

    def __init__(self, message: str, *, job: str = "", owner: str = "") -> None:
        self.job = job
        self.owner = owner
        super().__init__(message)


class LedgerVersionError(PlacementRayError, RuntimeError):
    """The cluster's lease ledger (or its stored state) speaks another version than this
    placement-ray; nothing was changed.

    Attributes:
        found: The ledger's (or stored state's) version.
        expected: This placement-ray's ledger version.
    """

    def __init__(self, message: str, *, found: int = 0, expected: int = 0) -> None:
        self.found = found
        self.expected = expected
        super().__init__(message)


class QueueTimeoutError(PlacementRayError, TimeoutError):
    """A job waited ``queue_timeout_s`` in the lease queue without its accelerators coming
    free; it left the queue.

    Attributes:
        job: The waiting job.
        need: Accelerators it needs per node (its plan on the whole cluster).
        holders: One line per lease in the way: job, nodes, accelerators, since when.
    """

    def __init__(
        self, message: str, *, job: str = "", need: Sequence[int] = (), holders: Sequence[str] = ()
    ) -> None:
        self.job = job
        self.need = tuple(need)
        self.holders = tuple(holders)
        super().__init__(message)
