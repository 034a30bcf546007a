"""Pick the NVML backend at import: the compiled cffi module, or the pure-Python fallback.

``PLACEMENT_NATIVE_PUREPYTHON=1`` forces the fallback. Otherwise the compiled module is
used when it imports and was built for this package version; an extension of another
version raises ``BackendMismatchError`` (a stale build must not pass silently), while a
missing extension (no compiler at install time) falls back with a debug log.
"""

from __future__ import annotations

import os

from ._version import __version__
from .errors import BackendMismatchError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from types import ModuleType
    from typing import Any

__all__ = ["BACKEND", "PUREPYTHON_ENV", "native_module"]

PUREPYTHON_ENV = "PLACEMENT_NATIVE_PUREPYTHON"


def _load() -> tuple[str, ModuleType | None]:
    if os.environ.get(PUREPYTHON_ENV, "") not in ("", "0"):
        return "purepython", None
    try:
        from . import _native
    except ImportError as exc:
        from ._log import get_logger

        get_logger(__name__).debug(
            "compiled extension unavailable (%s): using the pure-Python backend", exc
        )
        return "purepython", None
    module: Any = _native  # cffi-generated: no type information
    built_for = module.ffi.string(module.lib.placement_native_version()).decode()
    _verify_version(built_for)
    return "cffi", module


def _verify_version(built_for: str) -> None:
    if built_for != __version__:
        raise BackendMismatchError(
            f"placement_native._native was built for version {built_for!r} but the package "
            f"is {__version__!r}; reinstall placement-native to rebuild the extension "
            f"(or set {PUREPYTHON_ENV}=1 to use the pure-Python backend)"
        )


BACKEND, native_module = _load()
