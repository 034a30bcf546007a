"""placement-native: this node's GPU topology through NVML in one compiled call, and free
ports that cannot be stolen.

Importing the package picks the backend (``BACKEND``) and nothing else; the snapshot and
port modules load on first use, so ``import placement_native`` stays in the low
milliseconds.

>>> import placement_native
>>> placement_native.BACKEND in ("cffi", "purepython")
True
"""

from __future__ import annotations

from ._backend import BACKEND
from ._version import __version__
from .errors import (
    BackendMismatchError,
    EnvVarError,
    NativeError,
    NoFreePortsError,
    NVMLError,
    PortError,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ._model import Accelerator, Fabric, Link, MigInstance, NodeSnapshot, Process
    from ._snapshot import NODE_RANK_ENVS, release_nvml, snapshot
    from .ports import PortReservation, find_free_ports, reserve_ports

__all__ = [
    "BACKEND",
    "NODE_RANK_ENVS",
    "Accelerator",
    "BackendMismatchError",
    "EnvVarError",
    "Fabric",
    "Link",
    "MigInstance",
    "NVMLError",
    "NativeError",
    "NoFreePortsError",
    "NodeSnapshot",
    "PortError",
    "PortReservation",
    "Process",
    "__version__",
    "find_free_ports",
    "release_nvml",
    "reserve_ports",
    "snapshot",
]

# Public name -> the submodule that defines it, imported on first access (PEP 562).
_LAZY = {
    "Accelerator": "._model",
    "Fabric": "._model",
    "Link": "._model",
    "MigInstance": "._model",
    "NodeSnapshot": "._model",
    "NODE_RANK_ENVS": "._snapshot",
    "Process": "._model",
    "release_nvml": "._snapshot",
    "snapshot": "._snapshot",
    "PortReservation": ".ports",
    "find_free_ports": ".ports",
    "reserve_ports": ".ports",
}


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from importlib import import_module

    value = getattr(import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
