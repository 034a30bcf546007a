"""Reading the ``PLACEMENT_*`` environment variables: each bad value is an ``EnvVarError``
naming the variable, its (shortened) value and what it must hold."""

from __future__ import annotations

import os

from .errors import EnvVarError

__all__ = ["env_int", "env_path"]

# Linux's PATH_MAX, terminating NUL included.
PATH_MAX = 4096
INT32_MAX = 2**31 - 1


def _raw(name: str) -> bytes | str | None:
    """``$name`` as the environment holds it (bytes where ``os.environ`` keeps bytes).

    ``os.environ.get`` raises and catches two exceptions for a name that is unset (0.7 us),
    and a snapshot asks five names, most of them unset. ``os.environ`` keeps its entries
    as bytes in ``_data`` (CPython and PyPy), which every change through it updates; where
    that mapping is missing (``os.environ`` replaced by a plain dict), ask the mapping.
    """
    data = getattr(os.environ, "_data", None)
    if type(data) is not dict:
        return os.environ.get(name)
    return data.get(name.encode())


def _getenv(name: str) -> str | None:
    """``os.environ.get(name)``, without its cost for an unset name."""
    value = _raw(name)
    return value if value is None or isinstance(value, str) else os.fsdecode(value)


def env_path(name: str) -> str | None:
    """The path in ``$name``, or None where it is unset or empty.

    Raises:
        EnvVarError: The value is not valid UTF-8 (Python holds such bytes as lone
            surrogates, which neither backend can pass on) or is longer than ``PATH_MAX``.
    """
    raw = _raw(name)
    if not raw:
        return None
    checked = _GOOD_PATHS.get(raw)
    if checked is not None:
        return checked
    value = raw if isinstance(raw, str) else os.fsdecode(raw)
    expected = f"a UTF-8 path of at most {PATH_MAX - 1} bytes"
    try:
        size = len(value.encode("utf-8"))
    except UnicodeEncodeError:
        raise EnvVarError(name, value, f"{expected} (the value is not valid UTF-8)") from None
    if size >= PATH_MAX:
        raise EnvVarError(name, value, expected)
    if len(_GOOD_PATHS) >= _GOOD_PATHS_KEPT:
        _GOOD_PATHS.clear()
    _GOOD_PATHS[raw] = value
    return value


#: Values already found to be good paths, as the environment holds them: a snapshot reads
#: three path variables every time, and they seldom change.
_GOOD_PATHS: dict[bytes | str, str] = {}
_GOOD_PATHS_KEPT = 64


def env_int(name: str) -> int | None:
    """The non-negative integer in ``$name`` (surrounding spaces allowed), or None where it
    is unset or blank.

    Raises:
        EnvVarError: The value is not a decimal integer from 0 to 2**31 - 1.
    """
    value = _getenv(name) or ""
    text = value.strip()
    if not text:
        return None
    # Digits are checked before int(): a 5,000-digit value must not reach the parser.
    if not (text.isascii() and text.isdigit() and len(text) <= 10 and int(text) <= INT32_MAX):
        raise EnvVarError(name, value, f"an integer from 0 to {INT32_MAX}")
    return int(text)
