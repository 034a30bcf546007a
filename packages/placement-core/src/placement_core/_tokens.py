"""Tokens shared by rank lists and placement rules, and the caret under a bad span.

A leaf module: :mod:`placement_core.ranks`, the rule grammar and the errors use it.
"""

from __future__ import annotations

import re

__all__ = ["RANK_TOKEN", "caret_block"]

#: One rank item: ``all`` (any case), ``INT`` or ``INT-INT``, whitespace around allowed.
#: Groups: ``all``, ``lo``, ``hi``.
RANK_TOKEN = re.compile(
    r"\s*(?:(?P<all>[aA][lL][lL])|(?P<lo>[0-9]+)(?:\s*-\s*(?P<hi>[0-9]+))?)\s*\Z"
)


def caret_block(head: str, source: str, span: tuple[int, int]) -> str:
    """``head``, then ``source`` and a caret line under ``span``, both indented."""
    start, end = span
    caret = " " * start + "^" * max(1, end - start)
    return f"{head}\n    {source}\n    {caret}"
