"""The worker side: what runs inside every actor placement-ray starts.

Each user class is wrapped in a subclass that first runs :class:`PlacementWorker`'s
constructor: it reserves the worker's ports on its own node with placement-native (bound
and listening, so nothing else can take them) and, where asked, defers the user's
``__init__`` until the driver has sent what only other workers know (rank 0's master
port, node 0's ``dist_init_addr``). Ports are released only at hand-over, from inside the
worker::

    from placement_ray._worker import hand_over_master_port
    port = hand_over_master_port()      # right before init_process_group binds it
    torch.distributed.init_process_group("nccl", init_method=f"tcp://{addr}:{port}", ...)

or from the driver with ``WorkerGroup.hand_over_master_port()``.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import threading
from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass, field
from typing import Any

from placement_core import (
    CPU_AFFINITY_ENV,
    FROM_NODE_KEY,
    HARDWARE_CONFIG_ENV,
    HARDWARE_TYPE_ENV,
    RANK_ENV_VARS,
    VISIBILITY_ENV_VARS,
    fill_from_node,
)

from ._cpus import bind_cpus, current_cpus
from ._native import native_errors
from .errors import ArgumentError, PortNotHeldError

__all__ = [
    "COMPONENT_ENV",
    "DIST_INIT_ADDR_ENV",
    "MASTER_PORT_BLOCK",
    "REPORTED_ENV_VARS",
    "PlacementWorker",
    "WorkerSpec",
    "assigned_gpu_ids",
    "fill_hardware_from_node",
    "hand_over_master_port",
    "hand_over_ports",
    "held_ports",
    "wrap_class",
]

COMPONENT_ENV = "PLACEMENT_COMPONENT"
"""Every worker's component name."""

MASTER_PORT_BLOCK = "master"
"""Name of the port block rank 0 holds for ``MASTER_PORT``."""

DIST_INIT_ADDR_ENV = "PLACEMENT_DIST_INIT_ADDR"
"""Where every actor of a multi-node engine finds its node 0's ``host:port``."""

REPORTED_ENV_VARS = (
    *sorted(RANK_ENV_VARS),
    *sorted({v.env_var for v in VISIBILITY_ENV_VARS.values()}),
    COMPONENT_ENV,
    HARDWARE_TYPE_ENV,
    HARDWARE_CONFIG_ENV,
    DIST_INIT_ADDR_ENV,
    CPU_AFFINITY_ENV,
)
"""Variables every worker reports back (plus the user's own env var names)."""


@dataclass(frozen=True, slots=True)
class WorkerSpec:
    """What a worker must do before its user code runs (sent to its constructor).

    Attributes:
        name: The worker's readable name (``actor rank 3``).
        port_blocks: Block name -> ``(count, consecutive)`` to reserve on this node.
        port_host: Address to hold the ports on; None for the node's IP.
        defer_init: Run the user's ``__init__`` only when the driver calls
            ``_placement_setup`` (it sends values other workers reported).
        report_env: Extra env var names to report besides ``REPORTED_ENV_VARS``.
        bind_cpus: Bind the process to ``PLACEMENT_CPU_AFFINITY`` (when set) before the
            user's ``__init__``.
        unset_env: Variables to remove first: other vendors' visibility variables, which
            Ray may set for the resource the worker holds.
    """

    name: str
    port_blocks: Mapping[str, tuple[int, bool]] = field(default_factory=dict)
    port_host: str | None = None
    defer_init: bool = False
    report_env: tuple[str, ...] = ()
    bind_cpus: bool = False
    unset_env: tuple[str, ...] = ()


# Reservations held by this process, by block name. A module global so that user code
# anywhere in the worker can hand a port over without a reference to the actor.
_held: dict[str, Any] = {}
_held_lock = threading.Lock()


def held_ports() -> dict[str, tuple[int, ...]]:
    """The port blocks this process still holds, by name."""
    with _held_lock:
        return {name: tuple(r.held) for name, r in _held.items() if r.held}


def hand_over_ports(name: str) -> tuple[int, ...]:
    """Release the held port block ``name`` for its consumer, who binds it right away.

    Returns:
        The block's ports.

    Raises:
        PortNotHeldError: this worker holds no such block (or handed it over already).
    """
    with _held_lock:
        reservation = _held.pop(name, None)
    if reservation is None:
        raise PortNotHeldError(
            f"this worker holds no port block {name!r} (held: {sorted(held_ports()) or 'none'})"
        )
    reservation.release()
    return tuple(reservation.ports)


def hand_over_master_port() -> int:
    """Release the held ``MASTER_PORT`` for ``init_process_group`` and return it.

    On ranks other than 0 (which hold nothing) it just returns ``MASTER_PORT``.

    Raises:
        PortNotHeldError: no ``MASTER_PORT`` is set and no master port is held.
    """
    with _held_lock:
        holds = MASTER_PORT_BLOCK in _held
    if holds:
        return hand_over_ports(MASTER_PORT_BLOCK)[0]
    value = os.environ.get("MASTER_PORT")
    if value is None:
        raise PortNotHeldError("this worker has no MASTER_PORT and holds no master port")
    return int(value)


def assigned_gpu_ids() -> tuple[int, ...]:
    """The accelerators Ray assigned this worker (physical indices), from Ray's own record.

    Any accelerator resource Ray manages counts (``GPU``, ``NPU``, ``HPU``, ...; a worker
    holds one kind). ``ray.get_gpu_ids()`` re-maps GPUs through ``CUDA_VISIBLE_DEVICES``,
    which placement-ray sets itself, so it cannot be used here.
    """
    import ray
    from ray._private.accelerators import get_all_accelerator_resource_names

    names = get_all_accelerator_resource_names()
    ids: set[int] = set()
    resource_ids = ray.get_runtime_context().worker.core_worker.resource_ids()
    for resource, assignment in resource_ids.items():
        base, _, rest = resource.partition("_group_")
        if base in names and (not rest or "_" not in rest):
            ids.update(int(slot) for slot, _ in assignment)
    return tuple(sorted(ids))


def fill_hardware_from_node(environ: MutableMapping[str, str] | None = None) -> None:
    """Fill the device settings this node supplies into ``PLACEMENT_HARDWARE_CONFIG``.

    A device config may leave out a setting its node gives at run time (a Franka's
    ``robot_ip`` from the node's ``ROBOT_IP``); the plan records which under
    ``from_node``. Every worker runs this first, on its own node, so the user's code sees
    the value (None when the node does not set the variable either).

    Args:
        environ: The worker's environment; ``os.environ`` when None.
    """
    environ = os.environ if environ is None else environ
    raw = environ.get(HARDWARE_CONFIG_ENV)
    if not raw or FROM_NODE_KEY not in raw:
        return
    value = json.loads(raw)
    if isinstance(value, list):
        filled: Any = [fill_from_node(entry, environ) for entry in value]
    else:
        filled = fill_from_node(value, environ)
    environ[HARDWARE_CONFIG_ENV] = json.dumps(filled)


def _node_ip() -> str:
    import ray

    return str(ray.util.get_node_ip_address())  # type: ignore[no-untyped-call]


class PlacementWorker:
    """Base placed first in every wrapped worker class (see :func:`wrap_class`)."""

    _placement_spec: WorkerSpec
    _placement_init: tuple[tuple[Any, ...], dict[str, Any]] | None
    _placement_failure: BaseException | None = None

    def __init__(self, _placement_spec: WorkerSpec, *args: Any, **kwargs: Any) -> None:
        self._placement_spec = _placement_spec
        self._placement_init = None
        self._placement_prepare()
        if _placement_spec.defer_init:
            self._placement_init = (args, kwargs)
        else:
            super().__init__(*args, **kwargs)

    def _placement_prepare(self) -> None:
        """What runs before the user's code: clear other vendors' visibility, fill the
        node's hardware settings, bind CPUs, reserve and hold the port blocks."""
        spec = self._placement_spec
        for name in spec.unset_env:
            os.environ.pop(name, None)
        fill_hardware_from_node()
        if spec.bind_cpus:
            bind_cpus(os.environ.get(CPU_AFFINITY_ENV), name=spec.name)
        if spec.port_blocks:
            from placement_native.ports import reserve_ports

            host = spec.port_host or _node_ip()
            for name, (count, consecutive) in spec.port_blocks.items():
                with native_errors(f"port block {name!r}"):
                    reservation = reserve_ports(count, host=host, consecutive=consecutive)
                with _held_lock:
                    _held[name] = reservation

    def _placement_adopt(
        self,
        spec: WorkerSpec,
        env: Mapping[str, str],
        args: Any = (),
        kwargs: Any = None,
    ) -> None:
        """Make this standby (a started worker whose ``__init__`` never ran) the worker of
        ``spec``: its environment set, its ports reserved, its ``__init__`` deferred to
        ``_placement_setup`` with ``args``/``kwargs``."""
        try:
            if self._placement_init is None or held_ports():
                raise ArgumentError(
                    f"{self._placement_spec.name}: not a standby (its __init__ ran or it "
                    "holds ports); it cannot be adopted"
                )
            os.environ.update({str(k): str(v) for k, v in env.items()})
            self._placement_spec = spec
            self._placement_prepare()
            self._placement_init = (tuple(args), dict(kwargs or {}))
        except BaseException as exc:  # raised by the report the driver waits for
            self._placement_failure = exc

    def _placement_report(self) -> dict[str, Any]:
        """What this worker really sees: node, GPUs, environment, ports."""
        import ray

        failure = getattr(self, "_placement_failure", None)
        if failure is not None:
            self._placement_failure = None
            raise failure

        context = ray.get_runtime_context()
        names = (*REPORTED_ENV_VARS, *self._placement_spec.report_env)
        labels = dict(context.get_node_labels() or {})
        return {
            "name": self._placement_spec.name,
            "node_id": context.get_node_id(),
            "node_rank_label": labels.get("node-rank"),
            "ip": _node_ip(),
            "hostname": socket.gethostname(),
            "pid": os.getpid(),
            "executable": sys.executable,
            "ray_gpu_ids": assigned_gpu_ids(),
            "env": {k: os.environ[k] for k in names if k in os.environ},
            "ports": held_ports(),
            "cpus": current_cpus(),
        }

    def _placement_setup(
        self, env: Mapping[str, str], args: Any = None, kwargs: Any = None
    ) -> dict[str, Any]:
        """Set ``env`` (values other workers reported), then run the deferred ``__init__``.

        ``args``/``kwargs`` replace the constructor arguments where given.
        """
        os.environ.update({str(k): str(v) for k, v in env.items()})
        if self._placement_init is None:
            if not self._placement_spec.defer_init:
                return self._placement_report()
            raise ArgumentError(f"{self._placement_spec.name}: its __init__ already ran")
        stored_args, stored_kwargs = self._placement_init
        self._placement_init = None
        call_args = stored_args if args is None else tuple(args)
        call_kwargs = stored_kwargs if kwargs is None else dict(kwargs)
        super().__init__(*call_args, **call_kwargs)
        return self._placement_report()

    def _placement_update_env(self, env: Mapping[str, str]) -> dict[str, str]:
        """Set ``env`` in this running worker (a re-announced ``MASTER_ADDR``/``MASTER_PORT``).

        If the user's class defines ``placement_env_changed(env)``, it is called with the
        new values (to re-form a process group, say). Returns the values set.
        """
        values = {str(k): str(v) for k, v in env.items()}
        os.environ.update(values)
        hook = getattr(self, "placement_env_changed", None)
        if callable(hook):
            hook(dict(values))
        return values

    def _placement_hand_over(self, name: str) -> tuple[int, ...]:
        """Release the held port block ``name`` (see :func:`hand_over_ports`)."""
        return hand_over_ports(name)


def wrap_class(cls: type) -> type:
    """``cls`` with :class:`PlacementWorker` in front (a Ray actor class is unwrapped).

    Returns:
        A plain class to hand to ``ray.remote``; its constructor takes a
        :class:`WorkerSpec` first, then the user's arguments.

    Raises:
        ArgumentError: ``cls`` is not a class.
    """
    original = _unwrap(cls)
    if not isinstance(original, type):
        raise ArgumentError(f"expected a class (or a @ray.remote class), got {cls!r}")
    if issubclass(original, PlacementWorker):
        return original
    wrapped = type(original.__name__, (PlacementWorker, original), {})
    wrapped.__module__ = original.__module__
    wrapped.__qualname__ = original.__qualname__
    return wrapped


def _unwrap(cls: Any) -> Any:
    metadata = getattr(cls, "__ray_metadata__", None)
    if metadata is not None:
        modified = metadata.modified_class
        return getattr(modified, "__ray_actor_class__", modified)
    return cls


def actor_default_options(cls: Any) -> dict[str, Any]:
    """The options a ``@ray.remote(...)`` class was declared with (empty for a plain one)."""
    options = getattr(cls, "_default_options", None)
    return dict(options) if isinstance(options, dict) else {}
