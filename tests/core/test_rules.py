"""The component_placement rule language: parsing, checks and resolution.

See docs/concepts/placement-language.md.
"""

from __future__ import annotations

import pytest

from placement_core._errors import PlacementError, PlacementRuleError, PlacementSyntaxError
from placement_core._inventory import Inventory
from placement_core._records import Placement, build_placements
from placement_core._rules import Segment, parse_rule, resolve_rule
from placement_core._spaces import build_space

PATH = "cluster.component_placement.actor.placement"


def place(
    text: str, inventory: Inventory, node_group: str = "cluster", stride: int = 1
) -> tuple[Placement, ...]:
    space = build_space(inventory, None, node_group)
    return build_placements(resolve_rule(parse_rule(text), space, stride=stride), inventory)


def gpus(placements: tuple[Placement, ...]) -> list[tuple[int, tuple[int, ...]]]:
    return [(p.node_rank, p.hardware_ranks) for p in placements]


# --- parsing -----------------------------------------------------------------------------


def test_segments_keep_explicit_and_implicit_processes() -> None:
    rule = parse_rule("0-1:0-3,3-5,7-10:7-14")
    assert rule.segments == (
        Segment((0, 1), (0, 3), (0, 7)),
        Segment((3, 5), None, (8, 11)),
        Segment((7, 10), (7, 14), (12, 21)),
    )
    assert rule.num_processes == 15


def test_single_int_and_yaml_int_are_one_resource() -> None:
    assert parse_rule("5").segments[0].resources == (5, 5)
    assert parse_rule(5).source == "5"


def test_whitespace_around_tokens_is_ignored() -> None:
    rule = parse_rule(" 0 - 3 : 0 - 7 , 4 ")
    assert [(s.resources, s.processes) for s in rule.segments] == [((0, 3), (0, 7)), ((4, 4), None)]


def test_all_is_case_insensitive_and_depends_on_the_space() -> None:
    rule = parse_rule("ALL")
    assert rule.segments[0].resources is None
    assert rule.num_processes is None


def test_path_is_kept_on_the_rule() -> None:
    assert parse_rule("0-7", path=PATH).path == PATH


@pytest.mark.parametrize(
    ("text", "span", "fragment"),
    [
        ("a-b", (0, 3), "expected resource ranks"),
        ("0-3:all", (4, 7), "process ranks cannot be 'all'"),
        ("0-3:0-1:2", (7, 8), "at most one ':'"),
        ("-1", (0, 2), "cannot be negative"),
        ("3-1", (0, 3), "ends before it starts"),
        (":0-3", (0, 1), "got nothing"),
        ("0-3:", (4, 5), "got nothing"),
        ("0-1-2", (0, 5), "expected resource ranks"),
        ("1.0", (0, 3), "expected resource ranks"),
        ("\u0663", (0, 1), "expected resource ranks"),  # a non-ASCII digit is not an INT
        ("", (0, 1), "at least one segment"),
        (" , ", (0, 3), "at least one segment"),
    ],
)
def test_syntax_errors_carry_a_caret_under_the_bad_span(
    text: str, span: tuple[int, int], fragment: str
) -> None:
    with pytest.raises(PlacementSyntaxError) as info:
        parse_rule(text, path=PATH)
    error = info.value
    assert error.span == span
    assert error.source == text
    assert error.path == PATH
    assert fragment in error.reason
    lines = str(error).splitlines()
    assert lines[0].startswith(PATH + ": ")
    assert lines[2].strip() == "^" * max(1, span[1] - span[0])
    assert lines[2].index("^") - 4 == span[0]


@pytest.mark.parametrize("value", [True, None, 1.5, ["0-3"]])
def test_a_rule_must_be_text_or_int(value: object) -> None:
    with pytest.raises(PlacementRuleError, match="expected a placement rule"):
        parse_rule(value, path=PATH)  # type: ignore[arg-type]


def test_counts_that_do_not_divide_state_both_counts() -> None:
    with pytest.raises(PlacementRuleError, match="6 resources and 4 processes do not divide"):
        parse_rule("0-5:0-3", path=PATH)


def test_resource_ranks_must_ascend() -> None:
    with pytest.raises(PlacementRuleError, match="resource ranks must ascend") as info:
        parse_rule("2-3,0-1", path=PATH)
    assert info.value.path == PATH
    assert "    2-3,0-1\n        ^^^" in str(info.value)


def test_resource_ranks_may_not_repeat_across_segments() -> None:
    with pytest.raises(PlacementRuleError, match="without repeats"):
        parse_rule("0-3,3-5")


def test_process_ranks_must_start_at_zero() -> None:
    with pytest.raises(PlacementRuleError, match="process ranks must start at 0, got 1"):
        parse_rule("0-3:1-4")


@pytest.mark.parametrize("text", ["0-1:0-1,2-3:3-4", "0-1:0-1,2-3:1-2", "0-1,2-3:0-1"])
def test_process_ranks_run_each_once_ascending(text: str) -> None:
    with pytest.raises(PlacementRuleError, match=r"process ranks must run 0\.\.N-1"):
        parse_rule(text)


def test_all_must_be_the_only_segment() -> None:
    with pytest.raises(PlacementRuleError, match="must be the only segment"):
        parse_rule("0-3,all")


def test_rule_errors_are_placement_errors_and_value_errors() -> None:
    with pytest.raises(PlacementError):
        parse_rule("2-3,0-1")
    with pytest.raises(ValueError):
        parse_rule("0-3:1-4")


# --- worked examples of docs/concepts/placement-language.md, field by field ----------


def test_spec5_two_processes_share_each_gpu() -> None:
    placements = place("0-3:0-7", Inventory.uniform(1, 8))
    assert len(placements) == 8
    for p in placements:
        gpu = p.rank // 2
        assert p == Placement(
            rank=p.rank,
            node_rank=0,
            node_id="node-0",
            placement_node_rank=0,
            local_rank=p.rank,
            local_world_size=8,
            hardware_ranks=(gpu,),
            visible_accelerators=(gpu,),
            local_accelerator_rank=gpu,
            accelerator_type="nvidia",
            node_group="cluster",
            isolate_accelerator=True,
            hardware_type=None,
        )


def test_spec5_one_process_spans_four_gpus() -> None:
    placements = place("0-7:0-1", Inventory.uniform(1, 8))
    assert gpus(placements) == [(0, (0, 1, 2, 3)), (0, (4, 5, 6, 7))]
    assert [p.visible_accelerators for p in placements] == [(0, 1, 2, 3), (4, 5, 6, 7)]
    assert [p.local_accelerator_rank for p in placements] == [0, 4]
    assert [(p.local_rank, p.local_world_size) for p in placements] == [(0, 2), (1, 2)]


def test_spec5_mixed_segments_on_two_nodes() -> None:
    placements = place("0-1:0-3,3-5,7-10:7-14", Inventory.uniform(2, 8))
    assert gpus(placements) == [
        (0, (0,)), (0, (0,)), (0, (1,)), (0, (1,)),
        (0, (3,)), (0, (4,)), (0, (5,)),
        (0, (7,)), (0, (7,)),
        (1, (0,)), (1, (0,)), (1, (1,)), (1, (1,)), (1, (2,)), (1, (2,)),
    ]  # fmt: skip
    assert [p.rank for p in placements] == list(range(15))
    assert [p.local_rank for p in placements] == [*range(9), *range(6)]
    assert [p.local_world_size for p in placements] == [9] * 9 + [6] * 6
    assert [p.placement_node_rank for p in placements] == [0] * 9 + [1] * 6
    assert [p.node_id for p in placements] == ["node-0"] * 9 + ["node-1"] * 6


def test_spec5_range_across_two_nodes() -> None:
    placements = place("4-11", Inventory.uniform(2, 8))
    assert gpus(placements) == [
        (0, (4,)), (0, (5,)), (0, (6,)), (0, (7,)), (1, (0,)), (1, (1,)), (1, (2,)), (1, (3,))
    ]  # fmt: skip
    assert [p.local_rank for p in placements] == [0, 1, 2, 3, 0, 1, 2, 3]
    assert {p.local_world_size for p in placements} == {4}
    assert [p.local_accelerator_rank for p in placements] == [4, 5, 6, 7, 0, 1, 2, 3]


def test_spec5_node_group_places_100_processes_per_node() -> None:
    inventory = Inventory.uniform(4, 8)
    placements = place("0-1:0-199,2-3:200-399", inventory, node_group="node")
    assert len(placements) == 400
    for p in placements:
        node_rank = p.rank // 100
        assert p == Placement(
            rank=p.rank,
            node_rank=node_rank,
            node_id=f"node-{node_rank}",
            placement_node_rank=node_rank,
            local_rank=p.rank % 100,
            local_world_size=100,
            hardware_ranks=(),
            visible_accelerators=tuple(range(8)),
            local_accelerator_rank=0,
            accelerator_type="nvidia",
            node_group="node",
            isolate_accelerator=False,
            hardware_type=None,
        )


def test_node_placement_without_accelerators_has_rank_minus_one() -> None:
    placements = place("0-1:0-3", Inventory.uniform(2, 0), node_group="node")
    assert {p.local_accelerator_rank for p in placements} == {-1}
    assert {p.visible_accelerators for p in placements} == {()}
    assert {p.accelerator_type for p in placements} == {None}


def test_spec5_a_process_may_not_span_two_nodes() -> None:
    with pytest.raises(PlacementRuleError, match="process 0 would span nodes 0 and 1"):
        place("6-11:0-1", Inventory.uniform(2, 8))


def test_span_error_names_the_later_process_and_segment() -> None:
    with pytest.raises(PlacementRuleError, match="process 2 would span nodes 0 and 1") as info:
        place("0,1-6:1-3", Inventory.uniform(2, 4))
    assert "    0,1-6:1-3\n      ^^^^^^^" in str(info.value)


def test_all_selects_every_resource_of_the_space() -> None:
    placements = place("all", Inventory.uniform(2, 4))
    assert gpus(placements) == [(n, (g,)) for n in range(2) for g in range(4)]


def test_all_with_processes_shares_resources() -> None:
    placements = place("all:0-7", Inventory.uniform(2, 2), node_group="node")
    assert [p.node_rank for p in placements] == [0, 0, 0, 0, 1, 1, 1, 1]


def test_all_with_counts_that_do_not_divide_is_an_error() -> None:
    with pytest.raises(PlacementRuleError, match="8 resources and 3 processes"):
        place("all:0-2", Inventory.uniform(1, 8))


def test_out_of_range_resource_names_the_valid_range() -> None:
    with pytest.raises(PlacementRuleError, match=r"resource rank 8 is out of range.*0\.\.7"):
        place("0-8", Inventory.uniform(1, 8))


def test_all_on_an_empty_space_is_an_error() -> None:
    inventory = Inventory.uniform(1, 0)
    space = build_space(inventory, None, "cluster")
    assert space.is_node_space  # no accelerators anywhere: the cluster numbers nodes
    with pytest.raises(PlacementRuleError, match="out of range"):
        place("1", inventory)


# --- stride (group form) -----------------------------------------------------------------


def test_stride_spreads_each_process_over_a_block() -> None:
    placements = place("0-15:0-3", Inventory.uniform(2, 8), stride=2)
    assert gpus(placements) == [
        (0, (0, 2, 4, 6)), (0, (1, 3, 5, 7)), (1, (0, 2, 4, 6)), (1, (1, 3, 5, 7))
    ]  # fmt: skip


def test_stride_on_a_single_node_matches_spec_example() -> None:
    placements = place("0-15:0-3", Inventory.uniform(1, 16), stride=2)
    assert [p.hardware_ranks for p in placements] == [
        (0, 2, 4, 6), (1, 3, 5, 7), (8, 10, 12, 14), (9, 11, 13, 15)
    ]  # fmt: skip


def test_stride_leaves_one_resource_per_process_segments_alone() -> None:
    placements = place("0-3:0-3,4-7:4-5", Inventory.uniform(1, 8), stride=2)
    assert [p.hardware_ranks for p in placements] == [(0,), (1,), (2,), (3,), (4, 6), (5, 7)]


def test_stride_block_must_divide_the_segment() -> None:
    with pytest.raises(PlacementRuleError, match="blocks of 2 x stride 4 = 8"):
        place("0-3:0-1", Inventory.uniform(1, 8), stride=4)


@pytest.mark.parametrize("stride", [0, -1, True, 1.5])
def test_stride_must_be_a_positive_int(stride: object) -> None:
    space = build_space(Inventory.uniform(1, 8), None, "cluster")
    with pytest.raises(PlacementRuleError, match="stride must be an int >= 1"):
        resolve_rule(parse_rule("0-7:0-1"), space, stride=stride)  # type: ignore[arg-type]
