"""The one rank-item grammar of rank lists and placement rules.

:mod:`placement_core._ranks` (``"0-3,8,all"``) and the rule grammar (each side of
``"0-15:0-3"``) read their items with :func:`read_item` (a list's items with
:func:`rank_items`), on the one token of :mod:`placement_core._tokens`, so the same
mistake gets the same caret error in both. Its options: whether ``all`` is allowed
(and what to say when it is not) and what the message of a bad item says was expected;
a negative number is refused with a hint in both. Bounds and the meaning of ``all`` are
the callers' (a rank list knows the ranks that exist, a rule its resource space).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from ._errors import PlacementSyntaxError
from ._shown import shown
from ._tokens import RANK_TOKEN, rank_int

__all__ = ["RankItem", "rank_items", "read_item"]


@dataclass(frozen=True, slots=True)
class RankItem:
    """One item: ``all``, ``INT`` or ``INT-INT``, with where it sits in the source.

    Attributes:
        is_all: The item is ``all`` (any case).
        lo: The first rank; None for ``all`` or when it has too many digits.
        hi: The last rank (``lo`` for ``INT``); None as for ``lo``.
        digits: The digits as written (``lo``, ``hi``), for messages about huge ranks.
        span: The item without its surrounding whitespace.
        lo_span: The digits of ``lo`` (or the word ``all``).
        hi_span: The digits of ``hi`` (``lo_span`` for ``INT``).
    """

    is_all: bool
    lo: int | None
    hi: int | None
    digits: tuple[str, str]
    span: tuple[int, int]
    lo_span: tuple[int, int]
    hi_span: tuple[int, int]

    def descending(self, source: str, noun: str, path: str | None) -> PlacementSyntaxError | None:
        """The error of a range that ends before it starts (``5-3``), or None."""
        if self.lo is None or self.hi is None or self.hi >= self.lo:
            return None
        return PlacementSyntaxError(
            f"{noun}range {self.lo}-{self.hi} ends before it starts",
            source=source,
            span=(self.lo_span[0], self.hi_span[1]),
            path=path,
        )


def read_item(
    source: str,
    item: str,
    start: int,
    *,
    expected: str,
    all_error: str | None = None,
    path: str | None = None,
) -> RankItem:
    """Read ``item := "all" | INT | INT "-" INT`` (whitespace around tokens ignored).

    Args:
        source: The whole text, for the caret line.
        item: The item's text; it starts at offset ``start`` of ``source``.
        start: Where ``item`` starts in ``source``.
        expected: What the message of a bad item says was expected
            (``"INT, INT-INT or 'all' in a rank list"``).
        all_error: When set, ``all`` is not allowed here and this is the message.
        path: The YAML path, for errors.

    Returns:
        The item; its ranks are None when they have too many digits (the caller says
        so in its own terms).

    Raises:
        PlacementSyntaxError: The item is not in the grammar (a negative number gets a
            hint) or is ``all`` where it is not allowed.
    """
    lead = len(item) - len(item.lstrip())
    span = (start + lead, start + len(item.rstrip()))
    match = RANK_TOKEN.match(item)
    if match is None:
        if not item.strip():
            span, found = (start, start + max(1, len(item))), "nothing"
        else:
            found = shown(item.strip())
        hint = " (ranks cannot be negative)" if item.strip().startswith("-") else ""
        raise PlacementSyntaxError(
            f"expected {expected}, got {found}{hint}", source=source, span=span, path=path
        )
    if match["all"]:
        if all_error is not None:
            raise PlacementSyntaxError(all_error, source=source, span=span, path=path)
        word = (start + match.start("all"), start + match.end("all"))
        return RankItem(True, None, None, ("", ""), span, word, word)
    high = "hi" if match["hi"] is not None else "lo"
    return RankItem(
        False,
        rank_int(match["lo"]),
        rank_int(match[high]),
        (match["lo"], match[high]),
        span,
        (start + match.start("lo"), start + match.end("lo")),
        (start + match.start(high), start + match.end(high)),
    )


def rank_items(
    source: str, *, expected: str, all_error: str | None = None, path: str | None = None
) -> Iterator[RankItem]:
    """Read ``list := item ("," item)*``; empty items are skipped."""
    offset = 0
    for item in source.split(","):
        start, offset = offset, offset + len(item) + 1
        if item.strip():
            yield read_item(source, item, start, expected=expected, all_error=all_error, path=path)
