"""``allocate``: one worker request's actor, the call everything else is built on.

It takes the worker's whole request (``_request.WorkerRequest``). A worker that uses
GPUs sits in a placement-group bundle (the one of its first GPU) with a fractional GPU
request, so Ray's accounting protects the GPU; it sees exactly its GPUs through the
accelerator type's visibility variable, with ``RAY_EXPERIMENTAL_NOSET_*`` so Ray does not
overwrite it. A worker without a bundle (a CPU agent, a robot controller) is pinned to its
node with hard node affinity. The node group's interpreter and env vars reach the worker
through its runtime_env (``py_executable``, ``env_vars``).

Ray waits silently, forever, for an actor whose interpreter is broken or whose fractional
request cannot fit, so: interpreters are checked on their node with a tiny task before any
worker starts (:func:`check_interpreters`), and :func:`wait_started` gives every start a
timeout whose error names the worker and the likely cause.
"""

from __future__ import annotations

import logging
import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NoReturn

import ray
from ray.util.placement_group import PlacementGroup
from ray.util.scheduling_strategies import (
    NodeAffinitySchedulingStrategy,
    PlacementGroupSchedulingStrategy,
)

from placement_core import Node, visibility_env

from ._accelerators import other_visibility_vars, request_share
from ._colocation import ShareLedger, validate_share
from ._rayapi import alive_nodes
from ._request import WorkerRequest
from ._text import clean, strip_ansi
from ._worker import WorkerSpec, actor_default_options, wrap_class
from .errors import (
    ArgumentError,
    InterpreterError,
    WorkerStartError,
    WorkerStartTimeoutError,
)

if TYPE_CHECKING:
    from ._cluster import Cluster

__all__ = [
    "Worker",
    "adopt",
    "allocate",
    "check_interpreters",
    "release",
    "wait_started",
    "worker_shares",
    "worker_spec",
]

logger = logging.getLogger(__name__)

# Options placement-ray sets itself; a @ray.remote class's own values for them are ignored
# (they would contradict the placement).
_OWN_OPTIONS = frozenset(
    {"num_gpus", "num_cpus", "resources", "scheduling_strategy", "runtime_env", "name"}
)


@dataclass(frozen=True, slots=True)
class Worker:
    """One started actor and where it runs.

    Attributes:
        component: Its component (``actor``, ``rollout``, ...).
        rank: Its rank in the component.
        name: Its readable name (``actor rank 3``), also the Ray actor name if named.
        node_rank: Its node.
        node_id: Ray node id of its node.
        gpu_ids: Physical GPU indices it sees (in visibility order); empty for none.
        handle: The Ray actor handle.
        pg: The placement group it sits in, if any.
        bundle_index: Its bundle in ``pg``, if any.
        gpu_share: Its fractional GPU request in that bundle (0 without one).
        interpreter: Its python interpreter, if not Ray's default.
        env: The environment it was given (runtime_env ``env_vars``).
        more_bundles: The bundles of its other GPUs in ``pg``: Ray does not know it uses
            them, so its share of each is booked in the cluster view's ledger.
        request: The request it was created from (issue it again to re-create the
            worker elsewhere); None for a record made by hand.
        actor_name: Its Ray actor name, None when anonymous.
    """

    component: str
    rank: int
    name: str
    node_rank: int
    node_id: str
    gpu_ids: tuple[int, ...]
    handle: Any
    pg: PlacementGroup | None = None
    bundle_index: int | None = None
    gpu_share: float = 0.0
    interpreter: str | None = None
    env: Mapping[str, str] = field(default_factory=dict)
    more_bundles: tuple[int, ...] = ()
    request: WorkerRequest | None = field(default=None, repr=False, compare=False)
    actor_name: str | None = None

    def describe(self) -> str:
        """``rollout rank 3 on node 1 (GPUs [2, 3], bundle 9, share 0.2)``."""
        where = f"GPUs {list(self.gpu_ids)}" if self.gpu_ids else "no GPU"
        if self.bundle_index is not None:
            where += f", bundle {self.bundle_index}, share {self.gpu_share:g}"
        return f"{self.name} on node {self.node_rank} ({where})"


def _check_env(env: Mapping[str, str] | None) -> dict[str, str]:
    if env is None:
        return {}
    if not isinstance(env, Mapping):
        raise ArgumentError(f"env: expected a mapping of str to str, got {env!r}")
    clean = {}
    for key, value in env.items():
        if not isinstance(key, str) or not key or not isinstance(value, str):
            raise ArgumentError(
                f"env[{key!r}]: expected a non-empty str name and a str value, got {value!r}"
            )
        clean[key] = value
    return clean


def _checked_env(request: WorkerRequest, node: Node) -> dict[str, str]:
    """The request's env, checked, with the visibility of the GPUs it sees."""
    ids = request.seat.gpu_ids
    unknown = [i for i in ids if i not in node.accelerator_ids]
    if unknown or len(set(ids)) != len(ids):
        raise ArgumentError(
            f"accelerator_ids: node {request.node_rank} has accelerators "
            f"{list(node.accelerator_ids)}; got {list(ids)}"
        )
    full_env = _check_env(request.env)
    if ids:
        wanted = visibility_env(node.accelerator_type, ids)
        clash = {k: full_env[k] for k in wanted if k in full_env and full_env[k] != wanted[k]}
        if clash:
            raise ArgumentError(f"env: {clash} contradicts accelerator_ids {list(ids)} ({wanted})")
        full_env.update(wanted)
    return full_env


def _placement_options(request: WorkerRequest, node: Node) -> tuple[dict[str, Any], float]:
    """Ray's resource and scheduling options for the request's seat, and its GPU share."""
    seat = request.seat
    if seat.bundle is None:
        strategy = NodeAffinitySchedulingStrategy(node_id=node.node_id, soft=False)
        return {"num_gpus": 0, "scheduling_strategy": strategy}, 0.0
    pg, index = seat.bundle
    gpu_share = request.options.gpu_share
    share = validate_share("gpu_share", 1.0 if gpu_share is None else gpu_share)
    asked: dict[str, Any] = {}
    request_share(asked, node, share, request.name)  # the node's own resource (GPU, NPU, ...)
    asked["scheduling_strategy"] = PlacementGroupSchedulingStrategy(
        placement_group=pg,
        placement_group_bundle_index=index,
        placement_group_capture_child_tasks=request.options.capture_child_tasks,
    )
    return asked, share


def allocate(
    request: WorkerRequest,
    *,
    cluster: Cluster,
    check_interpreter: bool = True,
    defer_init: bool = False,
    actor_name: str | None = None,
    options: Mapping[str, Any] | None = None,
) -> Worker:
    """Start the actor of one worker request on its node, seeing exactly its GPUs.

    A request with a bundle sits there with its GPU share (Ray's accounting protects that
    GPU) and books the share of each of its bundles in ``cluster.shares``; one without is
    pinned with hard node affinity and asks Ray for no GPU. The node group's interpreter
    and env reach the worker through its runtime_env. The actor starts asynchronously;
    :func:`wait_started` waits for it with a timeout.

    Args:
        request: The worker's request (:func:`~placement_ray._request.worker_request`).
        cluster: The job's cluster view (its share ledger is booked).
        check_interpreter: Check the interpreter on the node first (one tiny task).
        defer_init: Run the user's ``__init__`` only on ``_placement_setup``.
        actor_name: Register the actor under this name (in the job's namespace); default
            the request's own name (``WorkerOptions.actor_prefix``), if any.
        options: Further ``.options(...)`` for Ray (``max_concurrency``, ...).

    Returns:
        The worker record with its actor handle and its request.

    Raises:
        ArgumentError: a bad request (unknown node, a GPU the node does not have, a bad
            share, env values that are not strings or contradict the GPUs, ...).
        InterpreterError: the interpreter cannot run on that node.
    """
    node_rank = request.node_rank
    if isinstance(node_rank, bool) or not isinstance(node_rank, int):
        raise ArgumentError(f"node_rank: expected an int, got {node_rank!r}")
    if not 0 <= node_rank < cluster.num_nodes:
        raise ArgumentError(
            f"node_rank: expected a node rank in 0..{cluster.num_nodes - 1}, got {node_rank}"
        )
    node = cluster.node(node_rank)
    full_env = _checked_env(request, node)
    if request.interpreter is not None and check_interpreter:
        check_interpreters(cluster, [(node_rank, request.interpreter)])
    cls = request.options.cls
    ray_options: dict[str, Any] = {
        k: v for k, v in actor_default_options(cls).items() if k not in _OWN_OPTIONS
    }
    ray_options.update(options or {})
    ray_options.setdefault("max_restarts", 0)
    ray_options["num_cpus"] = request.options.num_cpus
    placed, share = _placement_options(request, node)
    ray_options.update(placed)
    runtime_env: dict[str, Any] = {"env_vars": full_env}
    if request.interpreter is not None:
        runtime_env["py_executable"] = request.interpreter
    ray_options["runtime_env"] = runtime_env
    actor_name = actor_name if actor_name is not None else request.actor_name
    if actor_name is not None:
        ray_options["name"] = actor_name
    if request.options.detached:
        ray_options["lifetime"] = "detached"
    spec = worker_spec(request, full_env, defer_init=defer_init)
    try:
        handle = (
            _remote_class(cls)
            .options(**ray_options)
            .remote(spec, *request.options.args, **dict(request.options.kwargs))
        )
    except ValueError as exc:  # a taken actor name, an option Ray rejects
        raise ArgumentError(
            f"{request.name}: Ray refused to create the actor: {clean(str(exc))}"
        ) from exc
    worker = _worker(request, node.node_id, handle, share, full_env, actor_name)
    cluster.shares.book(worker_shares(worker))
    return worker


def worker_spec(request: WorkerRequest, env: Mapping[str, str], *, defer_init: bool) -> WorkerSpec:
    """What the worker of ``request`` does before its user code, given its whole env."""
    return WorkerSpec(
        name=request.name,
        port_blocks=dict(request.port_blocks),
        defer_init=defer_init,
        bind_cpus=request.options.bind_cpus,
        report_env=tuple(k for k in env if not k.startswith("RAY_")),
        unset_env=other_visibility_vars(env) if request.seat.gpu_ids else (),
    )


def adopt(standby: Worker, request: WorkerRequest, *, cluster: Cluster) -> Worker:
    """Make a started standby (a worker whose ``__init__`` never ran, seated as the
    request) the worker of ``request``: its env, ports and deferred ``__init__`` are set
    inside it (a failure there is raised by its next report). Its GPU share stays booked.

    Raises:
        ArgumentError: a bad request, or a standby seated elsewhere.
    """
    node = cluster.node(request.node_rank)
    full_env = _checked_env(request, node)
    share = standby.gpu_share
    if standby.node_rank != request.node_rank or standby.gpu_ids != request.seat.gpu_ids:
        raise ArgumentError(
            f"{request.name}: a standby on node {standby.node_rank} GPUs "
            f"{list(standby.gpu_ids)} cannot take node {request.node_rank} GPUs "
            f"{list(request.seat.gpu_ids)}"
        )
    spec = worker_spec(request, full_env, defer_init=True)
    standby.handle._placement_adopt.remote(
        spec, full_env, tuple(request.options.args), dict(request.options.kwargs)
    )
    return _worker(request, node.node_id, standby.handle, share, full_env, standby.actor_name)


def _worker(
    request: WorkerRequest,
    node_id: str,
    handle: Any,
    share: float,
    env: Mapping[str, str],
    actor_name: str | None,
) -> Worker:
    seat = request.seat
    return Worker(
        component=request.component,
        rank=request.rank,
        name=request.name,
        node_rank=seat.node_rank,
        node_id=node_id,
        gpu_ids=seat.gpu_ids,
        handle=handle,
        pg=seat.bundle[0] if seat.bundle else None,
        bundle_index=seat.bundle[1] if seat.bundle else None,
        gpu_share=share,
        interpreter=request.interpreter,
        env=dict(env),
        more_bundles=seat.more_bundles if seat.bundle is not None else (),
        request=request,
        actor_name=actor_name,
    )


def worker_shares(worker: Worker) -> list[tuple[str, int, float]]:
    """``(placement group id, bundle index, share)`` for every bundle the worker uses."""
    if worker.pg is None or worker.bundle_index is None:
        return []
    pg_id = worker.pg.id.hex()
    return [(pg_id, i, worker.gpu_share) for i in (worker.bundle_index, *worker.more_bundles)]


_remote_classes: dict[Any, Any] = {}


def _remote_class(cls: Any) -> Any:
    # One Ray actor class per user class: Ray exports each actor class once.
    remote = _remote_classes.get(cls)
    if remote is None:
        remote = ray.remote(wrap_class(cls))
        _remote_classes[cls] = remote
    return remote


def release(workers: Iterable[Worker], shares: ShareLedger | None = None) -> None:
    """Kill the workers' actors; return their GPU shares to ``shares`` when given.

    Only the code that booked the shares (the owner of the cluster view's ledger: a
    startup that failed, a ``WorkerGroup`` killed) passes ``shares``, so a share is
    returned exactly once.
    """
    for worker in workers:
        try:
            ray.kill(worker.handle, no_restart=True)
        except Exception as exc:  # already dead: nothing to release
            logger.debug("killing %s: %s", worker.name, exc)
        if shares is not None:
            shares.unbook(worker_shares(worker))


# ----------------------------------------------------------------- interpreters
_PROBE_CODE = (
    "import sys, importlib.util as u\n"
    "ok = u.find_spec('ray') is not None\n"
    "v = ''\n"
    "if ok:\n"
    "    from importlib.metadata import version\n"
    "    v = version('ray')\n"
    "print('%d.%d %s' % (sys.version_info[0], sys.version_info[1], v or '-'))\n"
)


def _probe_interpreter(path: str) -> str:
    """Runs on the node: '' if ``path`` can run Ray workers like this node's, else why."""
    if not os.path.isabs(path):
        return "is not an absolute path"
    if not os.path.exists(path):
        return "does not exist on this node"
    if os.path.isdir(path) or not os.access(path, os.X_OK):
        return "is not an executable file"
    try:
        done = subprocess.run(
            [path, "-c", _PROBE_CODE], capture_output=True, text=True, timeout=30, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"cannot be run: {exc}"
    if done.returncode != 0:
        why = clean(done.stderr.strip(), 300, keep_end=True)
        return f"exits with status {done.returncode}: {why}"
    fields = done.stdout.split()
    python = f"{sys.version_info[0]}.{sys.version_info[1]}"
    if len(fields) != 2:
        return f"printed {done.stdout!r} instead of its version"
    if fields[0] != python:
        return f"is Python {fields[0]}, but Ray on this node runs Python {python}"
    if fields[1] == "-":
        return "cannot import ray"
    if fields[1] != ray.__version__:
        return f"has ray {fields[1]}, but the cluster runs ray {ray.__version__}"
    return ""


_probe_interpreter_task = ray.remote(num_cpus=0, max_retries=0)(_probe_interpreter)


def check_interpreters(
    cluster: Cluster, pairs: Iterable[tuple[int, str]], *, timeout_s: float = 60.0
) -> None:
    """Check each ``(node rank, interpreter)`` on its node with one tiny task.

    An interpreter must exist, be executable, and run the node's Python version with the
    same Ray installed; otherwise Ray would wait forever for the worker.

    Raises:
        InterpreterError: listing every bad ``(node, path, reason)``.
    """
    unique = sorted(set(pairs))
    if not unique:
        return
    refs = {
        _probe_interpreter_task.options(
            scheduling_strategy=NodeAffinitySchedulingStrategy(
                node_id=cluster.node(rank).node_id, soft=False
            )
        ).remote(path): (rank, path)
        for rank, path in unique
    }
    done, pending = ray.wait(list(refs), num_returns=len(refs), timeout=timeout_s)
    problems = []
    for ref in pending:
        ray.cancel(ref, force=True)
        rank, path = refs[ref]
        problems.append((rank, path, f"could not be checked within {timeout_s:g}s"))
    for ref in done:
        rank, path = refs[ref]
        reason = ray.get(ref)
        if reason:
            problems.append((rank, path, reason))
    if problems:
        problems.sort()
        raise InterpreterError(
            "python_interpreter_path cannot run Ray workers (no worker was started):\n"
            + "\n".join(f"  node {r}: {p} {why}" for r, p, why in problems),
            problems=problems,
        )


# ----------------------------------------------------------------- start-up
def _actor_state(handle: Any) -> tuple[str, str]:
    try:
        from ray._private import state  # per-actor state: no public API without a dashboard

        info = state.actors(actor_id=handle._actor_id.hex())
    except Exception:  # state is a diagnostic only
        return "", ""
    return str(info.get("State", "")), str(info.get("DeathCause", "") or "")


def _likely_cause(worker: Worker, state: str) -> str:
    if state in ("PENDING_CREATION", "DEPENDENCIES_UNREADY", ""):
        if worker.interpreter:
            return (
                f"Ray is still starting it with interpreter {worker.interpreter}: a broken "
                "interpreter or Python environment hangs here; or the node is overloaded"
            )
        if worker.bundle_index is not None:
            return (
                f"Ray found no room for GPU share {worker.gpu_share:g} in bundle "
                f"{worker.bundle_index}: other work over-subscribes that GPU, or the node "
                "is overloaded"
            )
        return "Ray has not scheduled it: its node may be busy or lost"
    return f"Ray reports it {state}"


def wait_started(
    workers: Sequence[Worker], *, timeout_s: float | None = 120.0, kill_on_error: bool = True
) -> list[dict[str, Any]]:
    """Wait until every worker's constructor ran; return what each reports seeing.

    Args:
        workers: Workers from :func:`allocate`.
        timeout_s: Limit for all of them together; None waits forever.
        kill_on_error: Kill every given worker when one fails.

    Returns:
        Per worker (same order), its report: node id, IP, pid, executable, the GPUs Ray
        assigned, its environment and held ports.

    Raises:
        WorkerStartTimeoutError: a worker did not start in time; the message names each
            one and the likely cause.
        WorkerStartError: a worker died starting.
    """
    refs = [w.handle._placement_report.remote() for w in workers]
    started = time.monotonic()

    def late(worker: Worker) -> str:
        return _likely_cause(worker, _actor_state(worker.handle)[0])

    def died(worker: Worker, exc: BaseException) -> str:
        why = f"it died starting: {_cause(exc, _actor_state(worker.handle)[1])}"
        return _lost_or(worker, exc, "while it was starting", why)

    reports, failures, timed_out = _gather(
        workers, refs, timeout_s, late, died, ray.exceptions.RayActorError
    )
    if failures:
        if kill_on_error:
            release(workers)
        waited = time.monotonic() - started
        _raise_start_failure(workers, failures, timed_out, "did not start", waited)
    return reports


def _gather(
    workers: Sequence[Worker],
    refs: Sequence[Any],
    timeout_s: float | None,
    late: Callable[[Worker], str],
    failed: Callable[[Worker, BaseException], str],
    catch: type[BaseException],
) -> tuple[list[dict[str, Any]], list[tuple[str, str]], bool]:
    """Wait for one ref per worker: reports (``{}`` where none), ``(who, why)``, any late."""
    _, pending = ray.wait(list(refs), num_returns=len(refs), timeout=timeout_s)
    waiting = set(pending)
    failures: list[tuple[str, str]] = []
    reports: list[dict[str, Any]] = []
    for worker, ref in zip(workers, refs, strict=True):
        if ref in waiting:
            failures.append((worker.describe(), late(worker)))
            reports.append({})
            continue
        try:
            reports.append(ray.get(ref))
        except catch as exc:
            failures.append((worker.describe(), failed(worker, exc)))
            reports.append({})
    return reports, failures, bool(waiting)


def _raise_start_failure(
    workers: Sequence[Worker],
    failures: Sequence[tuple[str, str]],
    timed_out: bool,
    what: str,
    waited: float | None = None,
) -> NoReturn:
    lines = "\n".join(f"  {who}: {why}" for who, why in failures[:30])
    more = f"\n  ... and {len(failures) - 30} more" if len(failures) > 30 else ""
    error = WorkerStartTimeoutError if timed_out else WorkerStartError
    note = "" if waited is None else f"waited {waited:.1f}s; "
    raise error(
        f"{len(failures)} of {len(workers)} workers {what} ({note}all {len(workers)} were "
        f"stopped):\n{lines}{more}",
        workers=failures,
    )


def _cause(exc: BaseException, death: str) -> str:
    text = strip_lines(str(exc))
    summary = " | ".join(text[-6:]) if text else type(exc).__name__
    return clean(summary, 800) if not death else f"{clean(summary, 600)} ({clean(death, 200)})"


def strip_lines(text: str) -> list[str]:
    """The non-blank lines of Ray's text, colour codes removed."""
    return [line for line in strip_ansi(text).strip().splitlines() if line.strip()]


NODE_DEATH_WAIT_S = 30.0
"""How long a worker whose connection broke waits for Ray to declare its node dead (Ray
needs about 15 s) before the failure is reported as the worker's own; not at all when the
node's raylet still answers (the worker's own process died)."""

RAYLET_PROBE_S = 2.0
"""How long a connection to a node's raylet may take to say the node is up."""

_CONNECTION_SIGNS = (
    "socket closed",
    "rpc error",
    "unavailable",
    "connection",
    "node has died",
    "node died",
    "raylet",
)


def node_lost(worker: Worker, exc: BaseException | None = None) -> bool:
    """Whether ``worker``'s node is dead; waits for Ray's verdict after a broken connection.

    A worker whose node vanishes first fails with a connection error (``RPC error: Socket
    closed``); Ray declares the node dead only about 15 s later. When ``exc`` reads like
    that, this waits up to :data:`NODE_DEATH_WAIT_S` for the verdict.
    """
    deadline = time.monotonic()
    if (
        exc is not None
        and not isinstance(exc, ray.exceptions.RayTaskError)  # the user's code raised
        and any(sign in str(exc).lower() for sign in _CONNECTION_SIGNS)
    ):
        node = next((n for n in alive_nodes() if n["NodeID"] == worker.node_id), None)
        if node is None:
            return True
        if _raylet_answers(node):  # the node is up: the worker's own process died
            return False
        deadline += NODE_DEATH_WAIT_S
    while True:
        if worker.node_id not in {n["NodeID"] for n in alive_nodes()}:
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.5)


def _raylet_answers(node: Mapping[str, Any], timeout_s: float = RAYLET_PROBE_S) -> bool:
    """Whether the node's raylet accepts a TCP connection: a node whose raylet answers is
    alive, whatever its workers did (a crashed worker reads like a lost node at first)."""
    address, port = node.get("NodeManagerAddress"), node.get("NodeManagerPort")
    if not address or not port:
        return False
    try:
        with socket.create_connection((str(address), int(port)), timeout=timeout_s):
            return True
    except (OSError, ValueError):
        return False


def _lost_or(worker: Worker, exc: BaseException, when: str, otherwise: str) -> str:
    if node_lost(worker, exc):
        return (
            f"its node {worker.node_rank} ({worker.node_id[:12]}) was lost {when} "
            f"(Ray: {_cause(exc, '')})"
        )
    return otherwise


def setup_workers(
    workers: Sequence[Worker],
    envs: Sequence[Mapping[str, str]],
    *,
    args: Sequence[Sequence[Any] | None] | None = None,
    kwargs: Sequence[Mapping[str, Any] | None] | None = None,
    timeout_s: float | None = None,
) -> list[dict[str, Any]]:
    """Send each deferred worker its late environment, run its ``__init__``, wait.

    Raises:
        WorkerStartError: a worker's ``__init__`` raised (all given workers are stopped).
        WorkerStartTimeoutError: a worker's ``__init__`` did not finish in time.
    """
    refs = [
        w.handle._placement_setup.remote(
            dict(env),
            None if args is None else args[i],
            None if kwargs is None else kwargs[i],
        )
        for i, (w, env) in enumerate(zip(workers, envs, strict=True))
    ]
    reports, failures, timed_out = _gather(
        workers,
        refs,
        timeout_s,
        lambda _: f"its __init__ did not finish in {timeout_s}s",
        lambda w, exc: _lost_or(
            w, exc, "during its __init__", f"its __init__ failed: {_cause(exc, '')}"
        ),
        ray.exceptions.RayError,
    )
    if failures:
        release(workers)
        _raise_start_failure(workers, failures, timed_out, "failed in __init__")
    return reports


def boot(
    workers: Sequence[Worker],
    late_env: Callable[[int, Worker, Sequence[Mapping[str, Any]]], Mapping[str, str]],
    *,
    args: Sequence[Sequence[Any] | None] | None = None,
    kwargs: Sequence[Mapping[str, Any] | None] | None = None,
    timeout_s: float | None = 120.0,
) -> list[dict[str, Any]]:
    """Start deferred workers: wait for them, then send each what the others reported.

    ``late_env(i, worker, first_reports)`` gives worker ``i`` the variables only known once
    every worker has started (a master port rank 0 holds, node 0's ``dist_init_addr``).

    Returns:
        Each worker's report after its ``__init__`` ran.

    Raises:
        WorkerStartTimeoutError: a worker did not start (or run ``__init__``) in time.
        WorkerStartError: a worker died starting or its ``__init__`` raised; all stopped.
    """
    first = wait_started(workers, timeout_s=timeout_s)
    envs = [dict(late_env(i, w, first)) for i, w in enumerate(workers)]
    return setup_workers(workers, envs, args=args, kwargs=kwargs, timeout_s=timeout_s)
