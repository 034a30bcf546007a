"""Cross-part rules run whenever their own inputs are valid, even when other fields fail.

A broken field is reported once, by itself; rules that need it are skipped, so there are
no derived errors, while every rule whose inputs are fine still reports its problems.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from placement_core._config import load_config
from placement_core._errors import ConfigError, Problem

BRIEF = """\
cluster:
  num_nodes: 4
  component_placement:
    actor: {node_group: gpu, placement: 0-3}
  node_groups:
    - label: node
      node_ranks: 0-9
      env_configs:
        - node_ranks: 5
          env_vars: [{RANK: 1}]
    - label: b
      node_ranks: [0, "2-3"]
      env_configs:
        - node_ranks: 0-1
          python_interpreter_path: /x
"""


def problems(source: Any) -> dict[str, str]:
    with pytest.raises(ConfigError) as caught:
        load_config(source)
    found: list[Problem] = list(caught.value.problems)
    by_path = {p.path: p.message for p in found}
    assert len(by_path) == len(found), f"a path is reported twice: {found}"
    return by_path


def cluster(**section: Any) -> dict[str, Any]:
    section.setdefault("num_nodes", 4)
    section.setdefault("component_placement", {"actor": "0-1"})
    return {"cluster": section}


def test_every_problem_of_a_broken_config_is_reported() -> None:
    found = problems(BRIEF)
    assert set(found) == {
        "cluster.node_groups[0].node_ranks",
        "cluster.node_groups[0].env_configs[0].node_ranks",
        "cluster.node_groups[1].env_configs[0].node_ranks",
        "cluster.node_groups[0].label",
        "cluster.component_placement.actor.node_group",
        "cluster.node_groups[0].env_configs[0].env_vars[0]",
    }


def test_reserved_label_is_reported_when_the_groups_ranks_are_out_of_range() -> None:
    found = problems(cluster(node_groups=[{"label": "node", "node_ranks": "0-9"}]))
    assert "'node' is reserved" in found["cluster.node_groups[0].label"]
    assert "nodes 4-9 are out of range" in found["cluster.node_groups[0].node_ranks"]


def test_unknown_group_is_reported_next_to_a_field_error_and_lists_the_defined_groups() -> None:
    found = problems(
        cluster(
            num_nodes=4,
            component_placement={"actor": {"node_group": "gpu", "placement": "0-3"}},
            node_groups=[
                {"label": "a800", "node_ranks": "0-9"},
                {"label": "franka", "node_ranks": 3},
            ],
        )
    )
    assert found["cluster.component_placement.actor.node_group"] == (
        "'gpu' is not a defined node group: the defined groups are a800, franka, plus the "
        "reserved 'cluster' and 'node'"
    )


def test_unknown_group_without_any_node_groups_says_only_the_reserved_ones_exist() -> None:
    found = problems(
        cluster(component_placement={"actor": {"node_group": "gpu", "placement": "0-3"}})
    )
    assert found["cluster.component_placement.actor.node_group"] == (
        "'gpu' is not a defined node group: no node_groups are defined, so only the reserved "
        "'cluster' and 'node' exist"
    )


def test_reserved_env_var_is_reported_when_the_env_configs_ranks_are_broken() -> None:
    env = {"node_ranks": 7, "env_vars": [{"RANK": 1}]}
    found = problems(
        cluster(node_groups=[{"label": "g", "node_ranks": "0-3", "env_configs": [env]}])
    )
    message = found["cluster.node_groups[0].env_configs[0].env_vars[0]"]
    assert message.startswith("RANK is a reserved variable that env_vars may not set")


def test_env_var_clash_across_groups_is_reported_when_another_field_fails() -> None:
    env = {"node_ranks": 1, "env_vars": [{"IFNAME": "eth0"}]}
    found = problems(
        cluster(
            num_nodes="four",
            node_groups=[
                {"label": "a", "node_ranks": "0-1", "env_configs": [env]},
                {"label": "b", "node_ranks": "1-2", "env_configs": [env]},
            ],
        )
    )
    assert (
        "IFNAME is already set on node 1"
        in found["cluster.node_groups[1].env_configs[0].env_vars[0]"]
    )


def test_interpreter_clash_is_reported_when_a_component_rule_fails() -> None:
    env = {"node_ranks": 0, "python_interpreter_path": "/venv/bin/python"}
    found = problems(
        cluster(
            component_placement={"actor": "0-1:x"},
            node_groups=[
                {"label": "a", "node_ranks": 0, "env_configs": [env]},
                {"label": "b", "node_ranks": 0, "env_configs": [env]},
            ],
        )
    )
    assert set(found) == {
        "cluster.component_placement.actor.placement",
        "cluster.node_groups[1].env_configs[0].python_interpreter_path",
    }


def test_a_broken_label_does_not_make_references_unknown() -> None:
    found = problems(
        cluster(
            component_placement={"actor": {"node_group": "gpu", "placement": 0}},
            node_groups=[{"label": "", "node_ranks": 0}],
        )
    )
    assert set(found) == {"cluster.node_groups[0].label"}


def test_broken_env_config_ranks_give_no_derived_subset_or_overlap_errors() -> None:
    found = problems(
        cluster(
            node_groups=[
                {
                    "label": "g",
                    "node_ranks": "0-1",
                    "env_configs": [{"node_ranks": "0-9"}, {"node_ranks": 0}],
                }
            ]
        )
    )
    assert set(found) == {"cluster.node_groups[0].env_configs[0].node_ranks"}


def test_broken_group_ranks_give_no_derived_subset_errors() -> None:
    group = {"label": "g", "node_ranks": "0-x", "env_configs": [{"node_ranks": 3}]}
    assert set(problems(cluster(node_groups=[group]))) == {"cluster.node_groups[0].node_ranks"}


def test_broken_num_nodes_gives_no_range_errors() -> None:
    found = problems(cluster(num_nodes=0, node_groups=[{"label": "g", "node_ranks": "0-99"}]))
    assert set(found) == {"cluster.num_nodes"}


def test_broken_num_nodes_does_not_make_all_an_error() -> None:
    found = problems(cluster(num_nodes=0, node_groups=[{"label": "g", "node_ranks": "all"}]))
    assert set(found) == {"cluster.num_nodes"}


def test_broken_node_group_reference_is_reported_once() -> None:
    found = problems(cluster(component_placement={"actor": {"node_group": 1.5, "placement": 0}}))
    assert set(found) == {"cluster.component_placement.actor.node_group"}


def test_same_hardware_in_two_groups_is_reported_when_a_robot_config_is_broken() -> None:
    arm = {"robot_ip": "10.0.0.1", "node_rank": 1}
    broken = {"robot_ip": "not-an-ip", "node_rank": 2}
    found = problems(
        cluster(
            node_groups=[
                {
                    "label": "a",
                    "node_ranks": "1-2",
                    "hardware": {"type": "Franka", "configs": [arm]},
                },
                {
                    "label": "b",
                    "node_ranks": "1-2",
                    "hardware": {"type": "Franka", "configs": [arm, broken]},
                },
            ]
        )
    )
    assert set(found) == {
        "cluster.node_groups[1].hardware.configs[1].robot_ip",
        "cluster.node_groups[1].hardware",
    }
    assert found["cluster.node_groups[1].hardware"].startswith(
        "Franka devices of node 1 are already declared by node_groups[0]"
    )


@pytest.mark.parametrize(
    ("env_ranks", "expected"),
    [
        ("0-1", "node 1 is not in the group's node_ranks 0"),
        ("0-2", "nodes 1-2 are not in the group's node_ranks 0"),
    ],
)
def test_messages_agree_in_number(env_ranks: str, expected: str) -> None:
    group = {"label": "g", "node_ranks": 0, "env_configs": [{"node_ranks": env_ranks}]}
    found = problems(cluster(node_groups=[group]))
    assert found["cluster.node_groups[0].env_configs[0].node_ranks"].startswith(expected)


@pytest.mark.parametrize(
    ("ranks", "expected"),
    [
        ("3-4", "node 4 is out of range: num_nodes is 4, so valid node ranks are 0-3"),
        ([0, "5-6"], "nodes 5-6 are out of range: num_nodes is 4, so valid node ranks are 0-3"),
    ],
)
def test_out_of_range_names_every_node_outside(ranks: object, expected: str) -> None:
    found = problems(cluster(node_groups=[{"label": "g", "node_ranks": ranks}]))
    assert found["cluster.node_groups[0].node_ranks"] == expected


def test_a_key_of_only_commas_is_reported_once() -> None:
    found = problems(cluster(component_placement={",": "0-1"}))
    assert found == {
        "cluster.component_placement.,": "empty component name in the key (stray comma?)"
    }


# Near-valid configs: right keys, values sometimes wrong, so both passes run on them.
_ranks = st.one_of(
    st.sampled_from(["0-3", "0-9", "x", "all", "5", "", "1-0"]),
    st.integers(-1, 9),
    st.lists(st.one_of(st.integers(-1, 9), st.just("2-3")), max_size=3),
    st.none(),
)
_env = st.fixed_dictionaries(
    {},
    optional={
        "node_ranks": _ranks,
        "python_interpreter_path": st.sampled_from(["/x", "", 3, None]),
        "env_vars": st.one_of(
            st.lists(
                st.dictionaries(
                    st.sampled_from(["RANK", "A", "B", "1x", "PLACEMENT_HARDWARE_TYPE"]),
                    st.one_of(st.sampled_from(["v", ""]), st.integers(), st.none()),
                    max_size=2,
                ),
                max_size=3,
            ),
            st.just(3),
        ),
    },
)
_arm = st.fixed_dictionaries(
    {},
    optional={
        "robot_ip": st.sampled_from(["10.0.0.1", "bad"]),
        "node_rank": st.one_of(st.integers(-1, 9), st.just("1")),
        "controller_node_rank": st.integers(0, 9),
    },
)
_hardware = st.one_of(
    st.just(3),
    st.fixed_dictionaries(
        {},
        optional={
            "type": st.sampled_from(["Franka", "Nope"]),
            "configs": st.one_of(st.lists(_arm, max_size=3), st.just("x")),
        },
    ),
)
_group = st.one_of(
    st.just(3),
    st.fixed_dictionaries(
        {},
        optional={
            "label": st.sampled_from(["a", "b", "node", "", 4090, None, "a,b"]),
            "node_ranks": _ranks,
            "env_configs": st.one_of(st.lists(_env, max_size=3), st.just({})),
            "hardware": _hardware,
        },
    ),
)
_rule = st.one_of(
    st.sampled_from(["0-3", "0-1:0-3", "x", 3, None]),
    st.fixed_dictionaries(
        {},
        optional={
            "node_group": st.one_of(
                st.sampled_from(["a", "gpu", "a,b", "node", "", 1.5]),
                st.lists(st.sampled_from(["a", "zz", 3]), max_size=3),
            ),
            "placement": st.sampled_from(["0-3", "bad:"]),
            "stride": st.integers(0, 2),
        },
    ),
)
_sections = st.fixed_dictionaries(
    {},
    optional={
        "num_nodes": st.one_of(st.integers(-1, 6), st.just("4")),
        "component_placement": st.dictionaries(
            st.sampled_from(["actor", "a,b", "b,", 7]), _rule, max_size=3
        ),
        "node_groups": st.one_of(st.lists(_group, max_size=3), st.just({})),
        "inventory": st.lists(st.fixed_dictionaries({"node_ranks": _ranks}), max_size=2),
    },
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_sections)
def test_near_valid_configs_give_each_problem_once_and_nothing_else(section: Any) -> None:
    try:
        load_config({"cluster": section})
    except ConfigError as error:
        reported = [(p.path, p.message) for p in error.problems]
        assert len(reported) == len(set(reported))
