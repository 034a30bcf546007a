"""``snapshot()``: this node as one ``NodeSnapshot``, read through the active backend."""

from __future__ import annotations

import atexit
import os
import threading
from typing import Literal, Protocol

from . import _backend, _host
from ._assemble import Assembler
from ._env import env_int, env_path
from ._log import get_logger
from ._model import NodeSnapshot
from ._raw import DEFAULT_LIBRARY, LIBRARY_ENV, RawGpu, RawNode, check_limits
from .errors import NVMLError

__all__ = ["library_path", "release_nvml", "snapshot", "take"]

logger = get_logger(__name__)

Backend = Literal["cffi", "purepython"]
SOURCES = {"cffi": "nvml-cffi", "purepython": "nvml-pynvml"}


class _Reader(Protocol):
    """A backend's reader: reads a RawNode, and the assembler that turns it into records.

    A reader keeps NVML initialised between reads (it holds one reference of NVML's
    reference-counted init) until ``close()``.
    """

    assembler: Assembler

    def read(self, library: str, sysfs: str) -> RawNode: ...

    def close(self) -> NVMLError | None: ...

    def forget(self) -> None: ...

    def holds(self) -> bool: ...


class _Readers:
    """One reader per backend, made on first use; each keeps what it reuses between reads.

    The NVML sessions the readers hold are given back at interpreter exit; a forked child
    drops its parent's (without shutting them down: they are the parent's) and inits its
    own on its first read.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._made: dict[str, _Reader] = {}
        atexit.register(self._at_exit)
        os.register_at_fork(after_in_child=self._after_fork)

    def get(self, backend: Backend) -> _Reader:
        reader = self._made.get(backend)
        if reader is not None:
            return reader
        with self._lock:
            reader = self._made.get(backend)
            if reader is None:
                if backend == "cffi":
                    from ._nvml_cffi import CffiReader

                    reader = CffiReader()
                else:
                    from ._nvml_pynvml import PynvmlReader

                    reader = PynvmlReader()
                self._made[backend] = reader
        return reader

    def close(self) -> NVMLError | None:
        """Give back every held session; the first shutdown failure, or None."""
        failures = [reader.close() for reader in list(self._made.values())]
        return next((f for f in failures if f is not None), None)

    def _at_exit(self) -> None:
        failure = self.close()
        if failure is not None:
            logger.debug("giving NVML back at exit failed: %s", failure)

    def _after_fork(self) -> None:
        self._lock = threading.Lock()  # another thread of the parent may have held it
        for reader in self._made.values():
            reader.forget()


_readers = _Readers()


def library_path() -> str:
    """The NVML library to load: ``$PLACEMENT_NVML_LIBRARY``, else ``libnvidia-ml.so.1``.

    Raises:
        EnvVarError: The variable is not a UTF-8 path.
    """
    return env_path(LIBRARY_ENV) or DEFAULT_LIBRARY


def release_nvml() -> None:
    """Give back the NVML session that ``snapshot()`` keeps for the process.

    The first snapshot initialises NVML and keeps it initialised (on a real driver an
    ``nvmlInit`` and ``nvmlShutdown`` cost about 10 ms, twenty times the read itself); it
    is given back at interpreter exit. Call this to give it back sooner (before unloading
    the driver, say); the next snapshot initialises NVML again.

    Raises:
        NVMLError: ``nvmlShutdown`` failed (the session is let go all the same).
    """
    failure = _readers.close()
    if failure is not None:
        raise failure


def _raise_first(raw: RawNode) -> None:
    if raw.error is not None:
        raise raw.error
    for gpu in raw.gpus:
        if not isinstance(gpu, RawGpu):
            continue  # an Accelerator: made only of a GPU without an error
        if gpu.error is not None:
            raise gpu.error
        for mig in gpu.migs:
            if mig.error is not None:
                raise mig.error


NODE_RANK_ENVS = ("PLACEMENT_NODE_RANK", "RLINF_NODE_RANK")
"""Variables (set where a node's processes start) that fix the node's rank, first wins."""


def node_rank_from_env() -> int | None:
    """The node rank the environment assigns, or None.

    ``PLACEMENT_NODE_RANK`` wins over ``RLINF_NODE_RANK``; unset or blank means absent.

    Raises:
        EnvVarError: The first variable set holds anything but an integer >= 0.
    """
    for name in NODE_RANK_ENVS:
        rank = env_int(name)
        if rank is not None:
            return rank
    return None


def take(backend: Backend, *, strict: bool = False) -> NodeSnapshot:
    """A snapshot read through the named backend (``cffi`` or ``purepython``)."""
    sysfs = _host.sysfs_root()
    library = library_path()
    node_rank = node_rank_from_env()  # a bad variable fails before NVML is touched
    reader = _readers.get(backend)
    raw = reader.read(library, sysfs)
    check_limits(raw)
    if strict:
        _raise_first(raw)
    if raw.error is not None:
        logger.debug("NVML reported a node-level failure: %s", raw.error)
    return reader.assembler.assemble(raw, source=SOURCES[backend], sysfs=sysfs, node_rank=node_rank)


def snapshot(*, strict: bool = False) -> NodeSnapshot:
    """Everything placement needs to know about this node, read in one go.

    NVML is read in one call into C (or, with the pure-Python backend, through
    nvidia-ml-py). The first snapshot initialises NVML and keeps it initialised for
    the process (``release_nvml()`` gives it back; so does the interpreter's exit): a
    failed init is tried again by the next snapshot, and a session the driver dropped is
    initialised again once. A GPU that refuses a query (``NO_PERMISSION``, ``GPU_IS_LOST``) is still
    listed, with what could be read and its ``error``; a node without a usable NVML has
    no accelerators and says why in ``nvml_error``.

    Args:
        strict: Raise instead of reporting: the NVML failure, or the first device error.

    Returns:
        The node snapshot; ``to_dict()`` / ``to_json()`` give the node-snapshot form
        (docs/concepts/node-snapshot.md).

    Raises:
        NVMLError: Only with ``strict=True``: the typed error (``NVMLLibraryNotFoundError``,
            ``NVMLNoPermissionError``, ``NVMLAnswerError`` for a count beyond what a node
            can hold, ...) of the first thing that failed.
        EnvVarError: ``PLACEMENT_NVML_LIBRARY`` or ``PLACEMENT_SYSFS_ROOT`` is not a UTF-8
            path, or ``PLACEMENT_NODE_RANK`` / ``RLINF_NODE_RANK`` is not an int >= 0.
    """
    backend: Backend = "cffi" if _backend.BACKEND == "cffi" else "purepython"
    return take(backend, strict=strict)
