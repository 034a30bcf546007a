"""Rank lists: ``"0-3,8,10-11"``, ``"all"``, YAML ints and YAML lists (SPEC 2)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from ._scalars import is_int
from ._tokens import RANK_TOKEN
from .errors import PlacementRuleError, PlacementSyntaxError

__all__ = ["format_rank_list", "parse_rank_list"]


def parse_rank_list(
    value: object,
    *,
    available: Sequence[int] | None = None,
    path: str | None = None,
    as_set: bool = True,
) -> tuple[int, ...]:
    """Parse ``rank_list := item ("," item)* ; item := INT | INT "-" INT | "all"``.

    Whitespace around tokens and empty items are ignored. ``a-b`` is inclusive.

    Args:
        value: A string, a non-negative int, or a list of ints and range strings.
        available: The ranks that exist in this context. ``all`` expands to them and
            every rank must be one of them. None means no such set: ``all`` is an error.
        path: The YAML path of the value, used in error messages.
        as_set: Sort and de-duplicate the result (node ranks); otherwise keep the
            written order (placement segments).

    Returns:
        The ranks, as a tuple of ints.

    Raises:
        PlacementSyntaxError: The text does not follow the grammar (with a caret under it).
        PlacementRuleError: The value has the wrong type, is empty, or names a rank
            outside ``available``.

    >>> parse_rank_list("0-3, 8,10-11")
    (0, 1, 2, 3, 8, 10, 11)
    >>> parse_rank_list([5, "1-2"], as_set=False)
    (5, 1, 2)
    """
    ranks: list[int] = []
    if not (is_int(value) or isinstance(value, str | list | tuple)):
        raise PlacementRuleError(
            f"expected a rank list such as '0-3,5', an int or a list of them, "
            f"got {type(value).__name__} {value!r}",
            path=path,
        )
    if isinstance(value, int):
        ranks.append(_check_int(value, path))
    elif isinstance(value, str):
        ranks.extend(_parse_text(value, available, path))
    else:
        for i, element in enumerate(value):
            where = f"{path}[{i}]" if path else f"[{i}]"
            if not (is_int(element) or isinstance(element, str)):
                raise PlacementRuleError(
                    f"expected an int or a range string such as '4-7', "
                    f"got {type(element).__name__} {element!r}",
                    path=where,
                )
            if isinstance(element, int):
                ranks.append(_check_int(element, where))
            else:
                ranks.extend(_parse_text(element, available, where))
    if not ranks:
        raise PlacementRuleError(f"the rank list {value!r} names no rank", path=path)
    if available is not None:
        _check_available(ranks, available, value, path)
    return tuple(sorted(set(ranks))) if as_set else tuple(ranks)


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


def _check_int(value: int, path: str | None) -> int:
    if value < 0:
        raise PlacementRuleError(f"ranks cannot be negative, got {value}", path=path)
    return value


def _parse_text(text: str, available: Sequence[int] | None, path: str | None) -> list[int]:
    ranks: list[int] = []
    offset = 0
    for item in text.split(","):
        start, end = offset, offset + len(item)
        offset = end + 1
        if not item.strip():
            continue
        match = RANK_TOKEN.match(item)
        if match is None:
            lead = len(item) - len(item.lstrip())
            span = (start + lead, start + len(item.rstrip()))
            hint = " (ranks cannot be negative)" if item.strip().startswith("-") else ""
            raise PlacementSyntaxError(
                f"expected INT, INT-INT or 'all' in a rank list, got {item.strip()!r}{hint}",
                source=text,
                span=span,
                path=path,
            )
        if match["all"]:
            if available is None:
                raise PlacementSyntaxError(
                    "'all' has no meaning here: name the ranks explicitly",
                    source=text,
                    span=(start + match.start("all"), start + match.end("all")),
                    path=path,
                )
            ranks.extend(available)
            continue
        lo = int(match["lo"])
        hi = int(match["hi"]) if match["hi"] is not None else lo
        if hi < lo:
            raise PlacementSyntaxError(
                f"range {lo}-{hi} ends before it starts",
                source=text,
                span=(start + match.start("lo"), start + match.end("hi")),
                path=path,
            )
        ranks.extend(range(lo, hi + 1))
    return ranks


def _check_available(
    ranks: list[int], available: Sequence[int], value: object, path: str | None
) -> None:
    allowed = available if isinstance(available, range) else frozenset(available)
    outside = [r for r in ranks if r not in allowed]
    if outside:
        valid = format_rank_list(sorted(available)) or "none"
        raise PlacementRuleError(
            f"rank {outside[0]} in {value!r} is out of range: valid ranks are {valid}",
            path=path,
        )
