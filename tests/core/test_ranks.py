"""Rank lists: ``parse_rank_list`` and ``format_rank_list``.

See docs/concepts/rank-lists.md.
"""

from __future__ import annotations

import pytest

from placement_core._errors import PlacementError, PlacementRuleError, PlacementSyntaxError
from placement_core._ranks import format_rank_list, parse_rank_list

NODES = range(10)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("0-3,8,10-11", (0, 1, 2, 3, 8, 10, 11)),
        (" 0 - 3 , 5 ", (0, 1, 2, 3, 5)),
        ("0-3,", (0, 1, 2, 3)),
        (",0-3", (0, 1, 2, 3)),
        ("2-2", (2,)),
        (5, (5,)),
        ([0, 1, "4-7"], (0, 1, 4, 5, 6, 7)),
    ],
)
def test_written_forms_parse_inclusively(value: object, expected: tuple[int, ...]) -> None:
    assert parse_rank_list(value) == expected


@pytest.mark.parametrize("text", ["all", "ALL", "All", " aLl "])
def test_all_in_any_case_is_every_available_rank(text: str) -> None:
    assert parse_rank_list(text, available=NODES) == tuple(NODES)


def test_all_without_an_available_set_is_an_error() -> None:
    with pytest.raises(PlacementSyntaxError, match="'all' has no meaning here"):
        parse_rank_list("all")


@pytest.mark.parametrize(
    ("value", "error"),
    [
        (1.0, PlacementRuleError),
        (True, PlacementRuleError),
        (None, PlacementRuleError),
        ([1.5], PlacementRuleError),
        ([False], PlacementRuleError),
        (-1, PlacementRuleError),
        ("1.0", PlacementSyntaxError),
        ("a-b", PlacementSyntaxError),
        ("0-1-2", PlacementSyntaxError),
        ("-1", PlacementSyntaxError),
        ("3-1", PlacementSyntaxError),
        ("\u0663", PlacementSyntaxError),  # ARABIC-INDIC DIGIT THREE is not an INT
        ("", PlacementRuleError),
        ([], PlacementRuleError),
    ],
)
def test_anything_else_is_a_typed_error(value: object, error: type[PlacementError]) -> None:
    with pytest.raises(error):
        parse_rank_list(value, available=NODES)


def test_a_descending_range_says_so() -> None:
    with pytest.raises(PlacementSyntaxError, match="range 3-1 ends before it starts"):
        parse_rank_list("3-1")


def test_out_of_range_names_the_valid_range() -> None:
    with pytest.raises(PlacementRuleError, match=r"rank 10 .* valid ranks are 0-9"):
        parse_rank_list("8-12", available=NODES)


def test_sets_are_sorted_and_deduplicated() -> None:
    assert parse_rank_list("5,0-2,1") == (0, 1, 2, 5)


def test_segments_keep_their_written_order() -> None:
    assert parse_rank_list([5, "1-2", 1], as_set=False) == (5, 1, 2, 1)


def test_format_writes_the_shortest_form() -> None:
    assert format_rank_list([0, 1, 2, 3, 5, 7, 8]) == "0-3,5,7-8"
