"""Reading a config or snapshot file without trusting it: regular files only, size capped.

A FIFO would block a plain ``open()`` for read until a writer appears, and ``/dev/zero``
never ends; both are refused before anything is read. The file is opened non-blocking
and checked with ``fstat`` on the open descriptor (no window between a check and the
open), then read up to one byte past the limit.
"""

from __future__ import annotations

import os
import stat
from typing import Any

__all__ = ["DuplicateKey", "FileRefused", "read_text_file", "unique_keys"]


class FileRefused(ValueError):
    """A file that is not read: not a regular file, or too large.

    Internal: callers turn it into their own error (``ConfigError``, ``InventoryError``)
    naming the file. ``FileNotFoundError`` and ``IsADirectoryError`` pass through as is.
    """


class DuplicateKey(ValueError):
    """A JSON object names one key twice (internal, like :class:`FileRefused`)."""


def unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """``json.loads``'s ``object_pairs_hook``: a JSON object, refused if a key repeats.

    ``json`` keeps the last of two equal keys without a word; YAML configs refuse them,
    and so do snapshots.

    Raises:
        DuplicateKey: A key appears twice in one object.
    """
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise DuplicateKey(f"the key {key!r} appears twice in one JSON object")
        out[key] = value
    return out


def _kind(mode: int) -> str:
    for test, name in (
        (stat.S_ISFIFO, "a FIFO (named pipe)"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
    ):
        if test(mode):
            return name
    return "not a regular file"


def read_text_file(path: str | os.PathLike[str], *, limit: int, what: str) -> str:
    """The UTF-8 text of a regular file of at most ``limit`` bytes.

    Args:
        path: The file.
        limit: The largest size read, in bytes.
        what: What the file should be, for messages (``"a YAML config"``).

    Raises:
        FileNotFoundError: No such file.
        IsADirectoryError: It is a directory.
        FileRefused: It is not a regular file or is larger than ``limit``.
        UnicodeDecodeError: It is not UTF-8 text.
        OSError: It cannot be opened or read (permissions, a name too long, ...).
    """
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
    try:
        descriptor = os.open(path, flags)
    except ValueError as error:  # an embedded NUL byte
        raise FileRefused(f"cannot open the file: {error}") from None
    try:
        mode = os.fstat(descriptor).st_mode
        if stat.S_ISDIR(mode):
            raise IsADirectoryError(f"is a directory, expected {what}")
        if not stat.S_ISREG(mode):
            raise FileRefused(f"is {_kind(mode)}, expected {what} (a regular file)")
    except BaseException:
        os.close(descriptor)
        raise
    with os.fdopen(descriptor, "rb") as file:
        data = file.read(limit + 1)
    if len(data) > limit:
        raise FileRefused(
            f"is larger than {limit:,} bytes, the limit for {what}: is it the right file?"
        )
    return data.decode("utf-8")
