"""Binding a worker to the CPUs its placement names (``PLACEMENT_CPU_AFFINITY``).

placement-core gives each placement on a node with a snapshot the CPUs local to its
accelerators (or to the NUMA node it asked for), split without overlap between the
component's processes sharing them, and puts them in the worker's environment.
``launch(..., bind_cpus=True)`` makes every worker call :func:`bind_cpus` before its own
``__init__`` runs.
"""

from __future__ import annotations

import os

from placement_core import CPU_AFFINITY_ENV, PlacementError, format_rank_list, parse_rank_list

from .errors import CpuBindingError

__all__ = ["bind_cpus", "current_cpus"]


def current_cpus() -> str:
    """The CPUs this process may run on, as a CPU list (``0-11,96-107``)."""
    return format_rank_list(sorted(os.sched_getaffinity(0)))


def bind_cpus(cpus: str | None, *, name: str) -> tuple[int, ...] | None:
    """Bind every thread of this process to ``cpus`` (a Linux CPU list).

    Threads started later inherit the binding. Nothing happens for None or an empty
    string (the plan does not know the node's CPUs).

    Args:
        cpus: The CPU list, usually ``os.environ.get("PLACEMENT_CPU_AFFINITY")``.
        name: The worker's name, for errors.

    Returns:
        The CPUs bound to, ascending; None when there was nothing to bind.

    Raises:
        CpuBindingError: The list does not parse, names CPUs this process may not run on
            (another machine's numbering, a container's cpuset), or the platform cannot
            bind.
    """
    if not cpus:
        return None
    try:
        wanted = frozenset(parse_rank_list(cpus))
    except PlacementError as error:
        raise CpuBindingError(
            f"{name}: {CPU_AFFINITY_ENV}={cpus!r} is not a CPU list such as '0-23,96-119' "
            f"({error.reason.splitlines()[0]})"
        ) from None
    if not hasattr(os, "sched_setaffinity"):
        raise CpuBindingError(f"{name}: binding to CPUs needs Linux (os.sched_setaffinity)")
    allowed = os.sched_getaffinity(0)
    outside = sorted(wanted - allowed)
    if outside:
        raise CpuBindingError(
            f"{name}: {CPU_AFFINITY_ENV}={cpus} names CPU(s) {format_rank_list(outside)} "
            f"this process may not run on (allowed: {format_rank_list(sorted(allowed))}); "
            "was the plan made from another machine's snapshot?"
        )
    # sched_setaffinity(0, ...) binds the calling thread only: bind every thread.
    try:
        threads = [int(tid) for tid in os.listdir("/proc/self/task")]
    except OSError:
        threads = [0]
    for tid in threads:
        try:
            os.sched_setaffinity(tid, wanted)
        except ProcessLookupError:
            continue  # the thread ended meanwhile
        except OSError as error:
            raise CpuBindingError(f"{name}: cannot bind to CPUs {cpus}: {error}") from None
    return tuple(sorted(wanted))
