"""The grammar of ``component_placement`` rules: text to segments.

See docs/concepts/placement-language.md.

:func:`parse_rule` checks the text and everything that needs no resource space; mapping a
parsed rule onto a resource space is :mod:`placement_core._rule_resolve`'s job.
"""

from __future__ import annotations

from dataclasses import dataclass

from ._errors import PlacementRuleError, PlacementSyntaxError
from ._limits import MAX_RANK_DIGITS
from ._rank_items import read_item
from ._scalars import is_int
from ._shown import shown, shown_digits
from ._tokens import caret_block

__all__ = ["Rule", "Segment", "check_divides", "parse_rule", "rule_error", "spans_resources"]


@dataclass(frozen=True, slots=True)
class Segment:
    """One ``resources[:processes]`` segment of a rule.

    Attributes:
        resources: Inclusive ``(first, last)`` resource ranks, or None for ``all``.
        processes: Inclusive ``(first, last)`` process ranks, or None when implicit
            (as many processes as resources, numbered on from the previous segment).
        span: ``(start, end)`` character offsets of the segment in the rule text.
    """

    resources: tuple[int, int] | None
    processes: tuple[int, int] | None
    span: tuple[int, int]

    @property
    def num_resources(self) -> int | None:
        """How many resources the segment names; None for ``all``."""
        if self.resources is None:
            return None
        return self.resources[1] - self.resources[0] + 1

    @property
    def num_processes(self) -> int | None:
        """How many processes the segment places; None when it depends on the space."""
        if self.processes is not None:
            return self.processes[1] - self.processes[0] + 1
        return self.num_resources


@dataclass(frozen=True, slots=True)
class Rule:
    """A parsed placement rule: its text, its segments and where it was written."""

    source: str
    segments: tuple[Segment, ...]
    path: str | None = None

    @property
    def num_processes(self) -> int | None:
        """The component's process count; None when it depends on the space (``all``)."""
        total = 0
        for segment in self.segments:
            count = segment.num_processes
            if count is None:
                return None
            total += count
        return total


def parse_rule(text: str | int, *, path: str | None = None) -> Rule:
    """Parse ``rule := segment ("," segment)*``.

    Grammar (whitespace around tokens is ignored, empty segments are skipped)::

        segment   := resources [":" processes]
        resources := INT | INT "-" INT | "all"
        processes := INT | INT "-" INT

    Besides the syntax, every check that needs no resource space is made here: ``all``
    stands alone; resource ranks ascend without repeats across segments; process ranks
    run ``0 .. N-1``, each once, ascending segment by segment; and each segment's counts
    divide (one process spans ``R/P`` resources, or ``P/R`` processes share one).

    Args:
        text: The rule as written (a YAML int is accepted and read as its text).
        path: The YAML path of the rule, used in error messages.

    Returns:
        The parsed rule.

    Raises:
        PlacementSyntaxError: The text does not follow the grammar; the message shows
            the text with a caret under the bad part.
        PlacementRuleError: The rule parses but breaks one of the checks above.

    >>> parse_rule("0-3:0-7").segments[0]
    Segment(resources=(0, 3), processes=(0, 7), span=(0, 7))
    """
    if not (is_int(text) or isinstance(text, str)):
        raise PlacementRuleError(
            f"expected a placement rule such as '0-7' or '0-3:0-7', "
            f"got {type(text).__name__} {shown(text)}",
            path=path,
        )
    source = str(text)
    segments: list[Segment] = []
    offset = 0
    for item in source.split(","):
        start, end = offset, offset + len(item)
        offset = end + 1
        if item.strip():
            segments.append(_parse_segment(source, item, start, path))
    if not segments:
        raise PlacementSyntaxError(
            "a placement rule needs at least one segment such as '0-7' or '0-3:0-7'",
            source=source,
            span=(0, max(1, len(source))),
            path=path,
        )
    rule = Rule(source, tuple(segments), path)
    _check_static(rule)
    return rule


def _parse_segment(source: str, item: str, start: int, path: str | None) -> Segment:
    parts = item.split(":")
    if len(parts) > 2:
        colon = start + len(parts[0]) + 1 + len(parts[1])
        raise PlacementSyntaxError(
            "a segment has at most one ':' (resources:processes)",
            source=source,
            span=(colon, colon + 1),
            path=path,
        )
    lead = len(item) - len(item.lstrip())
    span = (start + lead, start + len(item.rstrip()))
    resources = _parse_part(source, parts[0], start, "resource", path)
    processes = None
    if len(parts) == 2:
        processes = _parse_part(source, parts[1], start + len(parts[0]) + 1, "process", path)
    return Segment(resources, processes, span)


def _parse_part(
    source: str, part: str, start: int, what: str, path: str | None
) -> tuple[int, int] | None:
    """One side of a segment: ``resources := INT | INT "-" INT | "all"``, ``processes :=
    INT | INT "-" INT``; None for ``all``."""
    allowed = "INT, INT-INT or 'all'" if what == "resource" else "INT or INT-INT"
    not_all = f"{what} ranks cannot be 'all': write them as INT or INT-INT"
    item = read_item(
        source,
        part,
        start,
        expected=f"{what} ranks as {allowed}",
        all_error=None if what == "resource" else not_all,
        path=path,
    )
    if item.is_all:
        return None
    if item.lo is None or item.hi is None:
        digits, span = (
            (item.digits[0], item.lo_span) if item.lo is None else (item.digits[1], item.hi_span)
        )
        raise PlacementSyntaxError(
            f"{what} rank {shown_digits(digits)} is too large: a rank has at most "
            f"{MAX_RANK_DIGITS} digits",
            source=source,
            span=span,
            path=path,
        )
    error = item.descending(source, f"{what} ", path)
    if error is not None:
        raise error
    return (item.lo, item.hi)


def _check_static(rule: Rule) -> None:
    segments = rule.segments
    if len(segments) > 1:
        for segment in segments:
            if segment.resources is None:
                raise rule_error(
                    "'all' already names every resource, so it must be the only segment",
                    rule,
                    segment.span,
                )
    previous_last = -1
    next_process: int | None = 0
    for segment in segments:
        if segment.resources is not None:
            first, last = segment.resources
            if first <= previous_last:
                raise rule_error(
                    f"resource ranks must ascend without repeats across segments: "
                    f"this segment starts at {first}, after resource {previous_last}",
                    rule,
                    segment.span,
                )
            previous_last = last
        if segment.processes is not None and next_process is not None:
            first_process = segment.processes[0]
            if first_process != next_process:
                if next_process == 0:
                    reason = f"process ranks must start at 0, got {first_process}"
                else:
                    reason = (
                        f"process ranks must run 0..N-1, each once, ascending segment by "
                        f"segment: expected this segment to start at process "
                        f"{next_process}, got {first_process}"
                    )
                raise rule_error(reason, rule, segment.span)
        count = segment.num_processes
        next_process = None if count is None or next_process is None else next_process + count
        resources = segment.num_resources
        if resources is not None and count is not None:
            check_divides(resources, count, rule, segment.span)


def spans_resources(segment: Segment) -> bool:
    """Whether a process of the segment may span several resources (where ``stride``
    applies); for ``all:P`` that depends on the resource space."""
    if segment.processes is None:
        return False
    resources = segment.num_resources
    return resources is None or resources > (segment.num_processes or 0)


def check_divides(resources: int, processes: int, rule: Rule, span: tuple[int, int]) -> None:
    """Raise unless ``resources`` and ``processes`` divide one way or the other."""
    if resources % processes and processes % resources:
        raise rule_error(
            f"{resources} resources and {processes} processes do not divide: one process "
            f"must span a whole number of resources, or a whole number of processes must "
            f"share one resource",
            rule,
            span,
        )


def rule_error(reason: str, rule: Rule, span: tuple[int, int]) -> PlacementRuleError:
    """A :class:`PlacementRuleError` showing ``rule``'s text with a caret under ``span``."""
    return PlacementRuleError(caret_block(reason, rule.source, span), path=rule.path)
