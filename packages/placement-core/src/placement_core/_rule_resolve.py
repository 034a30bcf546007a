"""Resolution of parsed ``component_placement`` rules against a resource space.

See docs/concepts/placement-language.md and docs/concepts/strategies.md#packed.

The grammar (text to segments) is :mod:`placement_core._rule_grammar`; this module maps the
segments of a parsed :class:`~placement_core._rule_grammar.Rule` onto a
:class:`~placement_core.ResourceSpace`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._errors import PlacementRuleError
from ._rule_grammar import Rule, check_divides, rule_error
from ._scalars import is_int
from ._shown import shown

if TYPE_CHECKING:
    from ._spaces import ResourceSpace, SpaceRun

__all__ = ["Entry", "resolve_rule"]

#: One resolved group of processes of ``run``, in rank order: ``(count, run, local_ids)``
#: puts the next ``count`` processes all on the resources ``local_ids``;
#: ``(count, run, [local_ids, ...])`` puts the next ``count`` processes one per tuple.
Entry = tuple[int, "SpaceRun", tuple[int, ...] | list[tuple[int, ...]]]


def resolve_rule(rule: Rule, space: ResourceSpace, *, stride: int = 1) -> list[Entry]:
    """Map a rule onto a resource space, segment by segment, in process-rank order.

    In a segment of ``R`` resources and ``P`` processes, either each process takes ``k = R/P``
    consecutive resources (with ``stride > 1``: packed-with-stride blocks of ``k * stride``
    resources, see docs/concepts/strategies.md#packed) or ``m = P/R`` consecutive processes share
    each resource.

    Args:
        rule: A parsed rule.
        space: The resource space of the rule's node group(s).
        stride: The group form's ``stride`` (>= 1); it applies to segments in which one
            process spans several resources.

    Returns:
        :data:`Entry` s in process-rank order.

    Raises:
        PlacementRuleError: A resource is out of range, counts do not divide, or a
            process would span two nodes or two resource types.
    """
    if not is_int(stride) or stride < 1:
        raise PlacementRuleError(f"stride must be an int >= 1, got {stride!r}", path=rule.path)
    entries: list[Entry] = []
    next_process = 0
    spanning = False
    for segment in rule.segments:
        if segment.resources is None:
            if space.size == 0:
                raise rule_error(
                    f"'all' selects no resource: {space.describe()} is empty", rule, segment.span
                )
            first, last = 0, space.size - 1
        else:
            first, last = segment.resources
            if last >= space.size:
                valid = f"0..{space.size - 1}" if space.size else "none"
                raise rule_error(
                    f"resource rank {last} is out of range for {space.describe()}: "
                    f"valid ranks are {valid}",
                    rule,
                    segment.span,
                )
        num_resources = last - first + 1
        num_processes = segment.num_processes
        if num_processes is None:
            num_processes = num_resources
        check_divides(num_resources, num_processes, rule, segment.span)
        if num_processes >= num_resources:
            share = num_processes // num_resources
            for run, singles in space.single_runs(first, last):
                if share == 1:
                    entries.append((len(singles), run, singles))
                else:
                    entries.extend((share, run, ids) for ids in singles)
        else:
            per_process = num_resources // num_processes
            spanning = spanning or per_process > 1
            block_stride = stride if per_process > 1 else 1
            if num_resources % (per_process * block_stride):
                raise rule_error(
                    f"{num_resources} resources cannot be cut into blocks of "
                    f"{per_process} x stride {block_stride} = {per_process * block_stride}",
                    rule,
                    segment.span,
                )
            try:
                entries += space.packed(
                    first, last, per_process, block_stride, first_process=next_process
                )
            except PlacementRuleError as error:
                raise rule_error(error.reason, rule, segment.span) from None
        next_process += num_processes
    if stride > 1 and not spanning:
        raise PlacementRuleError(
            f"stride {stride} has no effect: each process of placement {shown(rule.source)} "
            f"holds one resource of {space.describe()}, and stride only spreads the "
            "resources of a process that spans several",
            path=rule.path,
        )
    return entries
