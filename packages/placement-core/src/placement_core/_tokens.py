"""Tokens shared by rank lists and placement rules, and the caret under a bad span.

Nearly a leaf module (it imports only the leaf modules ``_limits`` and ``_shown``):
:mod:`placement_core._ranks`, the rule grammar and the errors use it.
"""

from __future__ import annotations

import re

from ._limits import MAX_RANK_DIGITS
from ._shown import window

__all__ = ["RANK_TOKEN", "caret_block", "rank_int"]

#: One rank item: ``all`` (any case), ``INT`` or ``INT-INT``, whitespace around allowed.
#: Groups: ``all``, ``lo``, ``hi``.
RANK_TOKEN = re.compile(
    r"\s*(?:(?P<all>[aA][lL][lL])|(?P<lo>[0-9]+)(?:\s*-\s*(?P<hi>[0-9]+))?)\s*\Z"
)


def rank_int(digits: str) -> int | None:
    """The value of a rank token's digits; None when it has more than
    :data:`~placement_core._limits.MAX_RANK_DIGITS` digits (no rank is that large, and
    ``int()`` of thousands of digits is slow or refused)."""
    return int(digits) if len(digits) <= MAX_RANK_DIGITS else None


def caret_block(head: str, source: str, span: tuple[int, int]) -> str:
    """``head``, then ``source`` and a caret line under ``span``, both indented.

    A long ``source`` is cut to a window around ``span``.
    """
    source, (start, end) = window(source, span)
    caret = " " * start + "^" * max(1, end - start)
    return f"{head}\n    {source}\n    {caret}"
