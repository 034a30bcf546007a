"""Text that goes into error messages: Ray's colour codes stripped, long text shortened.

Every message that embeds text from Ray (an exception, a death cause) passes through
:func:`clean`, so no ANSI escape sequence reaches a log, and no message is cut mid-word.
"""

from __future__ import annotations

import re

__all__ = ["ELLIPSIS", "clean", "shorten", "strip_ansi"]

ELLIPSIS = "…"

_ANSI = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[@-Z\\-_])")


def strip_ansi(text: str) -> str:
    """``text`` without ANSI escape sequences (colours, cursor moves, OSC titles)."""
    return _ANSI.sub("", text)


def shorten(text: str, limit: int, *, keep_end: bool = False) -> str:
    """``text`` cut to at most ``limit`` characters on a word boundary, with an ellipsis.

    A text that fits is returned as it is. A single word longer than the limit is cut
    inside (there is no boundary to cut at), still marked by the ellipsis. With
    ``keep_end`` the end is kept (the last lines of a traceback) and the ellipsis leads.
    """
    if limit < 1:
        raise ValueError(f"limit: expected an int >= 1, got {limit!r}")
    if len(text) <= limit:
        return text
    if keep_end:
        return shorten(text[::-1], limit)[::-1]
    room = limit - len(ELLIPSIS)
    head = text[: room + 1]
    cut = head.rfind(" ")
    if cut <= 0:
        return text[:room].rstrip() + ELLIPSIS
    return text[:cut].rstrip(" ,;:|") + ELLIPSIS


def clean(text: str, limit: int = 800, *, keep_end: bool = False) -> str:
    """Ray's text fit for our messages: colour codes removed, shortened to ``limit``."""
    return shorten(strip_ansi(text), limit, keep_end=keep_end)
