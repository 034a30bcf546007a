"""A problem shows its offending value once: appended only when the message lacks it."""

from __future__ import annotations

import pytest

from placement_core._config import load_config
from placement_core._errors import ConfigError, Problem


def test_a_value_the_message_quotes_is_not_repeated() -> None:
    problem = Problem("cluster.x.node_group", "'gpu' is not a defined node group", "gpu")
    assert str(problem) == "cluster.x.node_group: 'gpu' is not a defined node group"


def test_a_value_opening_the_message_is_not_repeated() -> None:
    problem = Problem("p", "RANK is a reserved variable that env_vars may not set", "RANK")
    assert str(problem) == "p: RANK is a reserved variable that env_vars may not set"


def test_a_value_the_message_lacks_is_appended() -> None:
    assert str(Problem("cluster.num_nodes", "expected an integer >= 1", 0)) == (
        "cluster.num_nodes: expected an integer >= 1 (got 0)"
    )


def test_a_value_inside_a_longer_token_is_still_appended() -> None:
    # '0-1' is not the '0-1' of a wider range such as '10-12'
    assert str(Problem("p", "node 1 is not in 10-12", "0-1")).endswith("(got '0-1')")


def test_an_empty_string_is_shown() -> None:
    assert str(Problem("p", "expected a non-empty label", "")) == (
        "p: expected a non-empty label (got '')"
    )


@pytest.mark.parametrize(
    "cluster",
    [
        {"num_nodes": 1, "component_placement": {"actor": {"node_group": "gpu", "placement": 0}}},
        {
            "num_nodes": 1,
            "component_placement": {"a": 0},
            "node_groups": [{"label": "node", "node_ranks": 0}],
        },
    ],
)
def test_config_errors_never_print_the_value_twice(cluster: dict[str, object]) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config({"cluster": cluster})
    for problem in caught.value.problems:
        shown_in_message = repr(problem.value) in problem.message
        assert not (shown_in_message and str(problem).endswith(f"(got {problem.value!r})"))


def test_a_word_of_the_message_is_not_the_value_shown() -> None:
    problem = Problem("p", "expected true or false (yes/no/on/off are text in YAML 1.2)", "yes")
    assert str(problem).endswith("(got 'yes')")
