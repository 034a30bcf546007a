"""Values and source text shortened for error messages (a leaf module).

Every message that quotes a value goes through :func:`shown`, so a hostile value (a
megabyte string, a list of a million items, an integer of thousands of digits) never
makes a message long or slow to build.
"""

from __future__ import annotations

import reprlib
from collections.abc import Sequence
from typing import Any

from ._limits import MAX_SHOWN_CHARS

__all__ = ["clipped", "listed", "shown", "shown_digits", "window"]


class _Short(reprlib.Repr):
    def __init__(self) -> None:
        super().__init__()
        self.maxlevel = 3
        self.maxdict = self.maxlist = self.maxtuple = self.maxset = 6
        self.maxfrozenset = self.maxdeque = self.maxarray = 6
        self.maxstring = self.maxother = MAX_SHOWN_CHARS
        self.maxlong = 40

    def repr_int(self, x: int, level: int) -> str:
        # repr() of an int of more than 4,300 digits raises (sys.int_info); estimate.
        if x.bit_length() > 128:
            return f"<an integer of about {int(x.bit_length() * 0.30103) + 1} digits>"
        return repr(x)

    def repr_bool(self, x: bool, level: int) -> str:
        return repr(x)

    def repr_str(self, x: str, level: int) -> str:
        return _cut(repr(x[: MAX_SHOWN_CHARS + 1]), len(x))


def _cut(text: str, length: int) -> str:
    if length <= MAX_SHOWN_CHARS and len(text) <= MAX_SHOWN_CHARS + 2:
        return text
    head = text[: MAX_SHOWN_CHARS - 20]
    return f"{head}... ({length} characters)"


_REPR = _Short()


def shown(value: Any) -> str:
    """``repr(value)``, shortened to about :data:`MAX_SHOWN_CHARS` characters.

    >>> shown("x" * 1000)[-21:]
    '... (1000 characters)'
    >>> shown(list(range(100)))
    '[0, 1, 2, 3, 4, 5, ...]'
    """
    try:
        text = _REPR.repr(value)
    except Exception:  # a caller's object whose __repr__ fails: name its type
        return f"<{type(value).__name__}>"
    if len(text) > MAX_SHOWN_CHARS + 30:
        text = text[:MAX_SHOWN_CHARS] + "..."
    return text


def clipped(text: str, limit: int = 4 * MAX_SHOWN_CHARS) -> str:
    """Free text (a device's error message) as written, cut to ``limit`` characters.

    >>> clipped("E" * 1000, 10)
    'EEEEEEEEEE... (1000 characters)'
    """
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... ({len(text)} characters)"


def listed(items: Sequence[str], separator: str = "; ", limit: int = 8) -> str:
    """The first ``limit`` of ``items`` joined, and how many more there are.

    >>> listed([f"node {n}" for n in range(10)], ", ", 3)
    'node 0, node 1, node 2, ... and 7 more'
    """
    if len(items) <= limit:
        return separator.join(items)
    return separator.join(items[:limit]) + f"{separator}... and {len(items) - limit} more"


def window(source: str, span: tuple[int, int]) -> tuple[str, tuple[int, int]]:
    """``source`` cut to about :data:`MAX_SHOWN_CHARS` characters around ``span``.

    Returns the shown text and the span moved into it (cut ends are marked ``...``).
    """
    if len(source) <= MAX_SHOWN_CHARS:
        return source, span
    start, end = span
    end = min(max(end, start + 1), start + MAX_SHOWN_CHARS // 2)
    begin = max(0, start - MAX_SHOWN_CHARS // 4)
    stop = min(len(source), max(end, begin + MAX_SHOWN_CHARS))
    prefix = "..." if begin > 0 else ""
    suffix = "..." if stop < len(source) else ""
    shift = len(prefix) - begin
    return prefix + source[begin:stop] + suffix, (start + shift, end + shift)


def shown_digits(digits: str) -> str:
    """A run of digits as written, or ``12345...(5000 digits)`` when it is long."""
    if len(digits) <= 24:
        return digits
    return f"{digits[:12]}... ({len(digits):,} digits)"
