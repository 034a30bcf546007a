"""A syntax error keeps its source and caret wherever it is reported again."""

from __future__ import annotations

import pickle

import pytest

from placement_core import ConfigError, PlacementSyntaxError, load_config, parse_rule, plan
from placement_core._inventory import Inventory


def _config(**cluster: object) -> dict[str, object]:
    return {"cluster": {"num_nodes": 2, "component_placement": {"actor": "0-3"}, **cluster}}


def test_a_rule_syntax_error_shows_its_caret_in_load_config() -> None:
    with pytest.raises(ConfigError) as info:
        load_config(_config(component_placement={"actor": "0-3:x"}))
    (problem,) = info.value.problems
    assert problem.path == "cluster.component_placement.actor.placement"
    assert problem.message.endswith("\n    0-3:x\n        ^")


def test_a_node_ranks_syntax_error_shows_its_caret_in_load_config() -> None:
    with pytest.raises(ConfigError) as info:
        load_config(_config(node_groups=[{"label": "g", "node_ranks": "0,x-1"}]))
    (problem,) = info.value.problems
    assert problem.path == "cluster.node_groups[0].node_ranks"
    assert problem.message.endswith("\n    0,x-1\n      ^^^")


def test_plan_of_a_mapping_reports_the_caret() -> None:
    with pytest.raises(ConfigError) as info:
        plan(_config(component_placement={"actor": "0-3:x"}), Inventory.uniform(2, 8))
    assert "\n    0-3:x\n        ^" in str(info.value)


def test_with_path_keeps_source_and_span() -> None:
    with pytest.raises(PlacementSyntaxError) as info:
        parse_rule("0-3:x")
    moved = info.value.with_path("cluster.component_placement.actor.placement")
    assert (moved.source, moved.span) == ("0-3:x", info.value.span)
    assert str(moved) == (
        "cluster.component_placement.actor.placement: "
        "expected process ranks as INT or INT-INT, got 'x'\n    0-3:x\n        ^"
    )


def test_a_repathed_syntax_error_still_pickles() -> None:
    with pytest.raises(PlacementSyntaxError) as info:
        parse_rule("0-3:x")
    moved = info.value.with_path("x.placement")
    assert str(pickle.loads(pickle.dumps(moved))) == str(moved)


@pytest.mark.parametrize(
    ("item", "span", "words"),
    [
        (" -3", (1, 3), "got '-3' (ranks cannot be negative)"),
        ("5 - 3", (0, 5), "range 5-3 ends before it starts"),
        ("x-1", (0, 3), "got 'x-1'"),
    ],
)
def test_rank_lists_and_rules_read_an_item_with_one_grammar(
    item: str, span: tuple[int, int], words: str
) -> None:
    from placement_core._ranks import parse_rank_list

    errors = []
    for parse in (parse_rank_list, parse_rule):
        with pytest.raises(PlacementSyntaxError) as info:
            parse(item)
        errors.append(info.value)
    assert [(e.source, e.span) for e in errors] == [(item, span), (item, span)]
    assert all(words in e.reason for e in errors)
