"""``snapshot()``: this node as one ``NodeSnapshot``, read through the active backend."""

from __future__ import annotations

import os
from collections.abc import Callable

from . import _backend, _host
from ._assemble import assemble
from ._log import get_logger
from ._model import NodeSnapshot
from ._raw import DEFAULT_LIBRARY, LIBRARY_ENV, RawNode

__all__ = ["library_path", "snapshot", "take"]

logger = get_logger(__name__)

SOURCES = {"cffi": "nvml-cffi", "purepython": "nvml-pynvml"}
_READERS: dict[str, Callable[[str, str], RawNode]] = {}


def library_path() -> str:
    """The NVML library to load: ``$PLACEMENT_NVML_LIBRARY``, else ``libnvidia-ml.so.1``."""
    return os.environ.get(LIBRARY_ENV) or DEFAULT_LIBRARY


def _reader(backend: str) -> Callable[[str, str], RawNode]:
    """The read function of a backend, imported on first use."""
    reader = _READERS.get(backend)
    if reader is not None:
        return reader
    if backend == "cffi":
        from . import _nvml_cffi

        reader = _nvml_cffi.read
    elif backend == "purepython":
        from . import _nvml_pynvml

        reader = _nvml_pynvml.read
    else:
        raise ValueError(f"backend must be 'cffi' or 'purepython', got {backend!r}")
    _READERS[backend] = reader
    return reader


def _raise_first(raw: RawNode) -> None:
    if raw.error is not None:
        raise raw.error
    for gpu in raw.gpus:
        if gpu.error is not None:
            raise gpu.error
        for mig in gpu.migs:
            if mig.error is not None:
                raise mig.error


NODE_RANK_ENVS = ("PLACEMENT_NODE_RANK", "RLINF_NODE_RANK")


def node_rank_from_env() -> int | None:
    """The node rank the environment assigns (SPEC 9), or None.

    ``PLACEMENT_NODE_RANK`` wins over ``RLINF_NODE_RANK``; a value that is not an int
    >= 0 is reported with a warning and treated as unset.
    """
    for name in NODE_RANK_ENVS:
        value = os.environ.get(name, "").strip()
        if not value:
            continue
        if value.isascii() and value.isdigit():
            return int(value)
        logger.warning("ignoring %s=%r: expected an int >= 0", name, value)
        return None
    return None


def take(backend: str, *, strict: bool = False) -> NodeSnapshot:
    """A snapshot read through the named backend (``cffi`` or ``purepython``)."""
    sysfs = _host.sysfs_root()
    raw = _reader(backend)(library_path(), sysfs)
    if strict:
        _raise_first(raw)
    if raw.error is not None:
        logger.debug("NVML unavailable, reporting no accelerators: %s", raw.error)
    return assemble(raw, source=SOURCES[backend], sysfs=sysfs, node_rank=node_rank_from_env())


def snapshot(*, strict: bool = False) -> NodeSnapshot:
    """Everything placement needs to know about this node, read in one go.

    NVML is read in one call into C (or, with the pure-Python backend, through
    nvidia-ml-py). A GPU that refuses a query (``NO_PERMISSION``, ``GPU_IS_LOST``) is still
    listed, with what could be read and its ``error``; a node without a usable NVML has
    no accelerators and says why in ``nvml_error``.

    Args:
        strict: Raise instead of reporting: the NVML failure, or the first device error.

    Returns:
        The node snapshot; ``to_dict()`` / ``to_json()`` give the SPEC 11 form.

    Raises:
        NVMLError: Only with ``strict=True``: the typed error (``NVMLLibraryNotFoundError``,
            ``NVMLNoPermissionError``, ...) of the first thing that failed.
    """
    return take(_backend.BACKEND, strict=strict)
