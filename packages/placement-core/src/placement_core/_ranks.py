"""Rank lists: ``"0-3,8,10-11"``, ``"all"``, YAML ints and YAML lists.

See docs/concepts/rank-lists.md.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from ._errors import PlacementRuleError
from ._limits import MAX_NODES
from ._rank_items import rank_items
from ._scalars import is_int
from ._shown import shown, shown_digits

__all__ = ["format_rank_list", "parse_rank_list"]


def parse_rank_list(
    value: object,
    *,
    available: Sequence[int] | None = None,
    path: str | None = None,
    as_set: bool = True,
    limit: int = MAX_NODES,
) -> tuple[int, ...]:
    """Parse ``rank_list := item ("," item)* ; item := INT | INT "-" INT | "all"``.

    Whitespace around tokens and empty items are ignored. ``a-b`` is inclusive. Ranges
    are checked on their bounds before anything is expanded, so a typo such as
    ``0-100000000`` is refused at once.

    Args:
        value: A string, a non-negative int, or a list of ints and range strings.
        available: The ranks that exist in this context. ``all`` expands to them and
            every rank must be one of them. None means no such set: ``all`` is an error.
        path: The YAML path of the value, used in error messages.
        as_set: Sort and de-duplicate the result (node ranks); otherwise keep the
            written order (placement segments).
        limit: Every rank is below it (default: the node limit,
            :data:`~placement_core._limits.MAX_NODES`); without ``as_set`` the list also
            names at most this many ranks.

    Returns:
        The ranks, as a tuple of ints.

    Raises:
        PlacementSyntaxError: The text does not follow the grammar (with a caret under it).
        PlacementRuleError: The value has the wrong type, is empty, names a rank
            outside ``available`` or not below ``limit``.

    >>> parse_rank_list("0-3, 8,10-11")
    (0, 1, 2, 3, 8, 10, 11)
    >>> parse_rank_list([5, "1-2"], as_set=False)
    (5, 1, 2)
    """
    spans: list[tuple[int, int]] = []
    if not (is_int(value) or isinstance(value, str | list | tuple)):
        raise PlacementRuleError(
            f"expected a rank list such as '0-3,5', an int or a list of them, "
            f"got {type(value).__name__} {shown(value)}",
            path=path,
        )
    bound = _bound(available, limit)
    if isinstance(value, int):
        spans.append(_check_int(value, bound, value, available, path))
    elif isinstance(value, str):
        spans.extend(_parse_text(value, available, bound, value, path))
    else:
        for i, element in enumerate(value):
            where = f"{path}[{i}]" if path else f"[{i}]"
            if not (is_int(element) or isinstance(element, str)):
                raise PlacementRuleError(
                    f"expected an int or a range string such as '4-7', "
                    f"got {type(element).__name__} {shown(element)}",
                    path=where,
                )
            if isinstance(element, int):
                spans.append(_check_int(element, bound, value, available, where))
            else:
                spans.extend(_parse_text(element, available, bound, value, where))
    if not spans:
        raise PlacementRuleError(f"the rank list {shown(value)} names no rank", path=path)
    if as_set:
        ranks = _union(spans)
    else:
        if sum(hi - lo + 1 for lo, hi in spans) > limit:
            raise PlacementRuleError(
                f"the rank list {shown(value)} names more than {limit:,} ranks", path=path
            )
        ranks = [rank for lo, hi in spans for rank in range(lo, hi + 1)]
    if available is not None:
        _check_available(ranks, available, value, path)
    return tuple(ranks)


def _bound(available: Sequence[int] | None, limit: int) -> tuple[int, str]:
    """The exclusive upper bound of ranks and how to name the valid ones."""
    if available is None:
        return limit, f"ranks are below {limit:,} (the limit)"
    top = max(available, default=-1) + 1
    if top > limit:
        return limit, f"ranks are below {limit:,} (the limit)"
    return top, f"valid ranks are {format_rank_list(sorted(available)) or 'none'}"


def _union(spans: list[tuple[int, int]]) -> list[int]:
    """The sorted union of inclusive spans, expanded (never more than the bound)."""
    ranks: list[int] = []
    last = -1
    for lo, hi in sorted(spans):
        if hi > last:
            ranks.extend(range(max(lo, last + 1), hi + 1))
            last = hi
    return ranks


def format_rank_list(ranks: Iterable[int]) -> str:
    """Render ranks as the shortest rank-list string, keeping their order.

    >>> format_rank_list([0, 1, 2, 3, 5, 7, 8])
    '0-3,5,7-8'
    """
    parts: list[str] = []
    run_start: int | None = None
    previous: int | None = None
    for rank in ranks:
        if previous is not None and rank == previous + 1:
            previous = rank
            continue
        if run_start is not None:
            parts.append(_run(run_start, previous))
        run_start = previous = rank
    if run_start is not None:
        parts.append(_run(run_start, previous))
    return ",".join(parts)


def _run(start: int, end: int | None) -> str:
    return str(start) if end is None or end == start else f"{start}-{end}"


def _out_of_range(
    rank: int | str, bound: tuple[int, str], value: object, path: str | None
) -> PlacementRuleError:
    return PlacementRuleError(
        f"rank {rank} in {shown(value)} is out of range: {bound[1]}", path=path
    )


def _check_int(
    rank: int,
    bound: tuple[int, str],
    value: object,
    available: Sequence[int] | None,
    path: str | None,
) -> tuple[int, int]:
    if rank < 0:
        raise PlacementRuleError(f"ranks cannot be negative, got {shown(rank)}", path=path)
    if rank >= bound[0]:
        raise _out_of_range(shown(rank), bound, value, path)
    return rank, rank


def _parse_text(
    text: str,
    available: Sequence[int] | None,
    bound: tuple[int, str],
    value: object,
    path: str | None,
) -> list[tuple[int, int]]:
    spans: list[tuple[int, int]] = []
    items = rank_items(
        text,
        expected="INT, INT-INT or 'all' in a rank list",
        all_error=None if available is not None else _ALL_HERE,
        path=path,
    )
    for item in items:
        if available is not None and item.is_all:
            if isinstance(available, range) and available.step == 1:
                if available:
                    spans.append((available.start, available.stop - 1))
            else:
                spans.extend((rank, rank) for rank in available)
            continue
        lo, hi = item.lo, item.hi
        if lo is None or hi is None or hi >= bound[0]:
            if lo is None or hi is None:
                first = shown_digits(item.digits[0] if lo is None else item.digits[1])
            else:  # the first rank outside a known set; the typed bound otherwise
                first = str(hi if available is None else max(lo, bound[0]))
            raise _out_of_range(first, bound, value, path)
        error = item.descending(text, "", path)
        if error is not None:
            raise error
        spans.append((lo, hi))
    return spans


_ALL_HERE = "'all' has no meaning here: name the ranks explicitly"


def _check_available(
    ranks: list[int], available: Sequence[int], value: object, path: str | None
) -> None:
    allowed = available if isinstance(available, range) else frozenset(available)
    outside = [r for r in ranks if r not in allowed]
    if outside:
        valid = format_rank_list(sorted(available)) or "none"
        raise PlacementRuleError(
            f"rank {outside[0]} in {shown(value)} is out of range: valid ranks are {valid}",
            path=path,
        )
