"""Every config rule (docs/concepts/cluster-config.md) is enforced, with the YAML path, the value
and the rule."""

from __future__ import annotations

import pickle
from typing import Any

import pytest

from placement_core._config import load_config
from placement_core._env import RESERVED_ENV_VARS
from placement_core._errors import ConfigError, PlacementError, Problem


def cluster(**section: Any) -> dict[str, Any]:
    section.setdefault("num_nodes", 4)
    section.setdefault("component_placement", {"actor": "0-1"})
    return {"cluster": section}


def problems(source: Any) -> list[Problem]:
    with pytest.raises(ConfigError) as caught:
        load_config(source)
    return list(caught.value.problems)


def only(source: Any) -> Problem:
    found = problems(source)
    assert len(found) == 1, found
    return found[0]


def group(label: str = "g", node_ranks: object = "0-3", **rest: Any) -> dict[str, Any]:
    return {"label": label, "node_ranks": node_ranks, **rest}


# ----------------------------------------------------------------------------- keys and types


def test_misspelled_key_reports_unknown_and_missing() -> None:
    found = problems(cluster(node_groups=[{"label": "g", "node_rank": 0}]))
    by_path = {p.path: p.message for p in found}
    assert by_path["cluster.node_groups[0].node_ranks"] == "required key is missing"
    assert "did you mean 'node_ranks'" in by_path["cluster.node_groups[0].node_rank"]
    assert (
        "allowed keys: label, node_ranks, env_configs, hardware"
        in by_path["cluster.node_groups[0].node_rank"]
    )


def test_unknown_key_in_a_component() -> None:
    problem = only(cluster(component_placement={"actor": {"placement": "0-1", "strid": 2}}))
    assert problem.path == "cluster.component_placement.actor.strid"
    assert "did you mean 'stride'" in problem.message


def test_unknown_top_level_cluster_key() -> None:
    problem = only(cluster(num_node=3))
    assert problem.path == "cluster.num_node"
    assert "did you mean 'num_nodes'" in problem.message


@pytest.mark.parametrize("value", [0, -1, True, "4", 2.0, None])
def test_num_nodes_must_be_a_positive_int(value: object) -> None:
    problem = only(cluster(num_nodes=value))
    assert problem.path == "cluster.num_nodes"
    assert "expected an integer" in problem.message


def test_bool_num_nodes_says_it_is_a_boolean() -> None:
    assert "boolean" in only(cluster(num_nodes=True)).message


def test_missing_required_keys() -> None:
    paths = {p.path for p in problems({"cluster": {"node_groups": []}})}
    assert paths == {"cluster.num_nodes", "cluster.component_placement"}


@pytest.mark.parametrize("stride", [0, -2, True, "2"])
def test_stride_must_be_an_int_of_at_least_one(stride: object) -> None:
    problem = only(cluster(component_placement={"a": {"placement": "0-1", "stride": stride}}))
    assert problem.path == "cluster.component_placement.a.stride"


def test_placement_is_required_in_the_group_form() -> None:
    problem = only(cluster(component_placement={"a": {"node_group": "node"}}))
    assert problem.path == "cluster.component_placement.a.placement"
    assert problem.message == "required key is missing"


@pytest.mark.parametrize("placement", [True, None, 1.5, "", [0, 1]])
def test_placement_must_be_a_rule(placement: object) -> None:
    problem = only(cluster(component_placement={"a": {"placement": placement}}))
    assert problem.path == "cluster.component_placement.a.placement"


@pytest.mark.parametrize("rule", [[0, 1], None, True, 1.5])
def test_component_rule_must_be_a_rule_or_a_mapping(rule: object) -> None:
    problem = only(cluster(component_placement={"a": rule}))
    assert problem.path == "cluster.component_placement.a"
    assert "expected a rule such as '0-7', or a mapping with placement" in problem.message


def test_placement_syntax_error_shows_path_and_caret() -> None:
    problem = only(cluster(component_placement={"actor": "0-3:x"}))
    assert problem.path == "cluster.component_placement.actor.placement"
    lines = problem.message.splitlines()
    assert lines[1].strip() == "0-3:x"
    assert lines[2].index("^") - lines[1].index("0") == 4


@pytest.mark.parametrize(
    ("node_ranks", "path"),
    [
        ("0-a", "cluster.node_groups[0].node_ranks"),
        ("3-1", "cluster.node_groups[0].node_ranks"),
        ("1.0", "cluster.node_groups[0].node_ranks"),
        ([0, 1.5], "cluster.node_groups[0].node_ranks[1]"),
        ([0, True], "cluster.node_groups[0].node_ranks[1]"),
        (None, "cluster.node_groups[0].node_ranks"),
        (-1, "cluster.node_groups[0].node_ranks"),
    ],
)
def test_bad_rank_lists(node_ranks: object, path: str) -> None:
    assert only(cluster(node_groups=[group(node_ranks=node_ranks)])).path == path


def test_node_ranks_out_of_range_name_the_valid_range() -> None:
    problem = only(cluster(num_nodes=4, node_groups=[group(node_ranks="0-5")]))
    assert problem.path == "cluster.node_groups[0].node_ranks"
    assert "out of range" in problem.message
    assert "0-3" in problem.message
    assert "num_nodes is 4" in problem.message


# ----------------------------------------------------------------------------- labels


@pytest.mark.parametrize("label", ["cluster", "node"])
def test_reserved_labels(label: str) -> None:
    problem = only(cluster(node_groups=[group(label=label)]))
    assert problem.path == "cluster.node_groups[0].label"
    assert "reserved" in problem.message


def test_reserved_labels_are_exact_matches() -> None:
    config = load_config(cluster(node_groups=[group(label="Node"), group(label="clusters")]))
    assert config.labels == ("Node", "clusters")


def test_labels_are_unique() -> None:
    problem = only(cluster(node_groups=[group(), group(node_ranks=1)]))
    assert problem.path == "cluster.node_groups[1].label"
    assert "node_groups[0]" in problem.message


def test_labels_are_case_sensitive() -> None:
    assert load_config(cluster(node_groups=[group("gpu"), group("GPU")])).labels == ("gpu", "GPU")


@pytest.mark.parametrize("label", ["", "a,b", " a"])
def test_bad_label_text(label: str) -> None:
    assert only(cluster(node_groups=[group(label=label)])).path == "cluster.node_groups[0].label"


# ----------------------------------------------------------------------------- env_configs


def test_env_config_nodes_must_be_inside_the_group() -> None:
    source = cluster(node_groups=[group(node_ranks="0-1", env_configs=[{"node_ranks": "1-2"}])])
    problem = only(source)
    assert problem.path == "cluster.node_groups[0].env_configs[0].node_ranks"
    assert "node 2 is not in the group's node_ranks 0-1" in problem.message
    assert problem.value == "1-2"


def test_env_configs_of_one_group_may_not_share_a_node() -> None:
    source = cluster(
        node_groups=[group(env_configs=[{"node_ranks": "0-1"}, {"node_ranks": "1-2"}])]
    )
    problem = only(source)
    assert problem.path == "cluster.node_groups[0].env_configs[1].node_ranks"
    assert "env_configs[0]" in problem.message


@pytest.mark.parametrize(
    ("env_vars", "path_suffix"),
    [
        ([{"A": "1", "B": "2"}], "env_vars[0]"),
        (["A=1"], "env_vars[0]"),
        ([{"1A": "x"}], "env_vars[0]"),
        ([{"A": True}], "env_vars[0].A"),
        ([{"A": None}], "env_vars[0].A"),
        ([{"A": "1"}, {"A": "2"}], "env_vars[1]"),
        ("A=1", "env_vars"),
    ],
)
def test_env_vars_are_single_key_maps(env_vars: object, path_suffix: str) -> None:
    source = cluster(node_groups=[group(env_configs=[{"node_ranks": 0, "env_vars": env_vars}])])
    assert only(source).path == f"cluster.node_groups[0].env_configs[0].{path_suffix}"


def test_yaml_boolean_env_value_tells_to_quote_it() -> None:
    source = (
        "cluster:\n  num_nodes: 1\n  component_placement: {a: 0}\n  node_groups:\n"
        "    - {label: g, node_ranks: 0, env_configs: [{node_ranks: 0, env_vars: [{X: true}]}]}\n"
    )
    assert "quote the value" in only(source).message


def test_env_var_key_set_twice_on_a_node_across_groups() -> None:
    source = cluster(
        node_groups=[
            group("a", "0-1", env_configs=[{"node_ranks": "0-1", "env_vars": [{"IFNAME": "e0"}]}]),
            group("b", "1-2", env_configs=[{"node_ranks": "1-2", "env_vars": [{"IFNAME": "e1"}]}]),
        ]
    )
    problem = only(source)
    assert problem.path == "cluster.node_groups[1].env_configs[0].env_vars[0]"
    assert "IFNAME is already set on node 1 by" in problem.message
    assert "cluster.node_groups[0].env_configs[0].env_vars[0]" in problem.message


def test_same_key_on_different_nodes_is_fine() -> None:
    config = load_config(
        cluster(
            node_groups=[
                group("a", "0-1", env_configs=[{"node_ranks": "0-1", "env_vars": [{"X": "0"}]}]),
                group("b", "2-3", env_configs=[{"node_ranks": "2-3", "env_vars": [{"X": "1"}]}]),
            ]
        )
    )
    assert config.node_environment("b", 2) == (None, {"X": "1"})


def test_one_interpreter_per_node_across_groups() -> None:
    source = cluster(
        node_groups=[
            group("a", "0-1", env_configs=[{"node_ranks": "0-1", "python_interpreter_path": "/a"}]),
            group("b", "1", env_configs=[{"node_ranks": 1, "python_interpreter_path": "/b"}]),
        ]
    )
    problem = only(source)
    assert problem.path == "cluster.node_groups[1].env_configs[0].python_interpreter_path"
    assert "at most one python_interpreter_path per node" in problem.message


def test_reserved_worker_variables_cannot_be_set() -> None:
    assert "CUDA_VISIBLE_DEVICES" in RESERVED_ENV_VARS
    source = cluster(
        node_groups=[
            group(env_configs=[{"node_ranks": 0, "env_vars": [{"CUDA_VISIBLE_DEVICES": "0"}]}])
        ]
    )
    problem = only(source)
    assert problem.path == "cluster.node_groups[0].env_configs[0].env_vars[0]"
    assert "CUDA_VISIBLE_DEVICES is a reserved variable" in problem.message


# ----------------------------------------------------------------------------- hardware


def franka(node_rank: int, ip: str = "10.0.0.1", **rest: Any) -> dict[str, Any]:
    return {"robot_ip": ip, "node_rank": node_rank, **rest}


def test_unknown_hardware_type() -> None:
    source = cluster(node_groups=[group(hardware={"type": "franka", "configs": [franka(0)]})])
    problem = only(source)
    assert problem.path == "cluster.node_groups[0].hardware.type"
    assert "did you mean 'Franka'" in problem.message


def test_hardware_config_fields_are_checked() -> None:
    source = cluster(
        node_groups=[
            group(
                hardware={
                    "type": "Franka",
                    "configs": [{"robot_ip": "10.0.0", "node_rank": True, "camera": "x"}],
                }
            )
        ]
    )
    paths = {p.path for p in problems(source)}
    assert paths == {
        "cluster.node_groups[0].hardware.configs[0].robot_ip",
        "cluster.node_groups[0].hardware.configs[0].node_rank",
        "cluster.node_groups[0].hardware.configs[0].camera",
    }


def test_hardware_node_rank_must_be_in_the_group() -> None:
    source = cluster(
        node_groups=[group(node_ranks="0-1", hardware={"type": "Franka", "configs": [franka(3)]})]
    )
    problem = only(source)
    assert problem.path == "cluster.node_groups[0].hardware.configs[0].node_rank"
    assert problem.value == 3


def test_identical_hardware_configs() -> None:
    hardware = {"type": "Franka", "configs": [franka(0), franka(0)]}
    source = cluster(node_groups=[group(hardware=hardware)])
    problem = only(source)
    assert problem.path == "cluster.node_groups[0].hardware.configs[1]"
    assert "identical to configs[0]" in problem.message


def test_two_robots_on_one_node_are_fine() -> None:
    hardware = {"type": "Franka", "configs": [franka(0, "10.0.0.1"), franka(0, "10.0.0.2")]}
    config = load_config(cluster(node_groups=[group(hardware=hardware)]))
    assert config.group("g").hardware is not None


def test_same_node_and_type_in_two_groups() -> None:
    source = cluster(
        node_groups=[
            group("a", "0-1", hardware={"type": "Franka", "configs": [franka(1, "10.0.0.1")]}),
            group("b", "1-2", hardware={"type": "Franka", "configs": [franka(1, "10.0.0.2")]}),
        ]
    )
    problem = only(source)
    assert problem.path == "cluster.node_groups[1].hardware"
    assert "Franka devices of node 1 are already declared by node_groups[0]" in problem.message


def test_identical_configs_in_two_groups_are_reported_once() -> None:
    same = {"type": "Franka", "configs": [franka(0), franka(1)]}
    groups = [group("a", "0-1", hardware=same), group("b", "0-1", hardware=same)]
    source = cluster(node_groups=groups)
    problem = only(source)
    assert problem.path == "cluster.node_groups[1].hardware"
    assert "nodes 0-1" in problem.message


def test_hardware_needs_configs() -> None:
    source = cluster(node_groups=[group(hardware={"type": "Franka", "configs": []})])
    assert only(source).path == "cluster.node_groups[0].hardware.configs"


# ----------------------------------------------------------------------------- components


def test_component_names_an_unknown_group() -> None:
    source = cluster(
        node_groups=[group("a800")],
        component_placement={"actor": {"node_group": "a80", "placement": "0-1"}},
    )
    problem = only(source)
    assert problem.path == "cluster.component_placement.actor.node_group"
    assert "did you mean 'a800'" in problem.message


def test_component_in_two_keys() -> None:
    problem = only(cluster(component_placement={"actor,critic": "0-1", "critic": "2-3"}))
    assert problem.path == "cluster.component_placement.critic"
    assert "already placed by component_placement.actor,critic" in problem.message


def test_empty_component_name() -> None:
    assert only(cluster(component_placement={"actor,": "0-1"})).path == (
        "cluster.component_placement.actor,"
    )


def test_empty_component_placement() -> None:
    assert only(cluster(component_placement={})).path == "cluster.component_placement"


def test_node_group_listed_twice() -> None:
    problem = only(cluster(component_placement={"a": {"node_group": "node,node", "placement": 0}}))
    assert problem.path == "cluster.component_placement.a.node_group"


def test_both_node_group_spellings_is_an_error() -> None:
    rule = {"node_group": "node", "node_groups": "node", "placement": 0}
    assert only(cluster(component_placement={"a": rule})).path == "cluster.component_placement.a"


# ----------------------------------------------------------------------------- inventory


def test_inventory_node_listed_twice() -> None:
    accelerators = {"type": "nvidia", "count": 8}
    source = cluster(
        inventory=[
            {"node_ranks": "0-1", "accelerators": accelerators},
            {"node_ranks": "1-2", "accelerators": accelerators},
        ]
    )
    assert only(source).path == "cluster.inventory[1].node_ranks"


def test_inventory_accelerator_type_is_checked() -> None:
    source = cluster(inventory=[{"node_ranks": 0, "accelerators": {"type": "cuda", "count": 8}}])
    problem = only(source)
    assert problem.path == "cluster.inventory[0].accelerators.type"
    assert "'nvidia'" in problem.message


# ----------------------------------------------------------------------------- documents


def test_every_problem_is_reported_together() -> None:
    source = cluster(
        num_nodes=2,
        component_placement={"actor": {"node_group": "x", "placement": "0-1", "strid": 1}},
        node_groups=[
            group("node", "0-3"),
            {"label": "b", "node_ranks": "0", "env_configs": [{"node_ranks": 1}]},
        ],
    )
    paths = [p.path for p in problems(source)]
    assert paths == [
        "cluster.component_placement.actor.strid",
        "cluster.node_groups[0].node_ranks",
        "cluster.node_groups[1].env_configs[0].node_ranks",
        "cluster.node_groups[0].label",
        "cluster.component_placement.actor.node_group",
    ]


def test_cross_checks_are_reported_together() -> None:
    source = cluster(
        component_placement={"actor": {"node_group": "x", "placement": "0-1"}},
        node_groups=[group("node"), group("a"), group("a")],
    )
    assert len(problems(source)) == 3


def test_messages_never_leak_pydantic_format() -> None:
    source = cluster(num_nodes="x", node_groups=[{"lable": 1}], component_placement=[1])
    text = str(ConfigError(problems(source)))
    for leak in ("validation error", "pydantic", "Input should", "type=", "errors.pydantic.dev"):
        assert leak not in text


def test_missing_cluster_key() -> None:
    problem = only({"runner": {}})
    assert problem.path == "cluster"
    assert "top-level 'cluster:' key" in problem.message


@pytest.mark.parametrize("document", ["", "- 1\n- 2\n", "3\n"])
def test_document_must_be_a_mapping(document: str) -> None:
    assert "expected a mapping" in only(document).message


def test_plain_text_is_not_a_config() -> None:
    assert "top-level 'cluster:' key" in only("just text").message


def test_cluster_must_be_a_mapping() -> None:
    assert only("cluster: 3\n").path == "cluster"


def test_yaml_syntax_error_has_line_and_column(write_file: Any) -> None:
    path = write_file("bad.yaml", "cluster:\n  num_nodes: 2\n  component_placement: {a: [}\n")
    problem = only(path)
    assert problem.path.startswith(f"{path}:3:")
    assert "YAML syntax error" in problem.message


def test_duplicate_yaml_keys_are_errors() -> None:
    problem = only("cluster:\n  num_nodes: 2\n  num_nodes: 3\n  component_placement: {a: 0}\n")
    assert problem.path == "<string>:3:3"
    assert "duplicate key 'num_nodes'" in problem.message


def test_missing_file(tmp_path: Any) -> None:
    problem = only(tmp_path / "nope.yaml")
    assert problem.message == "no such file"


def test_missing_file_given_as_str(tmp_path: Any) -> None:
    assert only(str(tmp_path / "nope.yaml")).message == "no such file"


def test_directory_is_not_a_config(tmp_path: Any) -> None:
    assert "is a directory" in only(tmp_path).message


def test_config_error_pickles_with_every_problem() -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(cluster(num_nodes=0, node_groups=[group("node")]))
    again = pickle.loads(pickle.dumps(caught.value))
    assert again.problems == caught.value.problems
    assert str(again) == str(caught.value)
    assert isinstance(again, PlacementError)
    assert isinstance(again, ValueError)


# ----------------------------------------------------------------------------- stride


@pytest.mark.parametrize("placement", ["0-7", "0-3:0-3", "0-1:0-7", "0-3,4-7"])
def test_stride_on_one_resource_processes_is_an_error_at_the_stride(placement: str) -> None:
    rule = {"placement": placement, "stride": 3}
    problem = only(cluster(num_nodes=1, component_placement={"rollout": rule}))
    assert problem.path == "cluster.component_placement.rollout.stride"
    assert problem.value == 3
    assert problem.message.startswith(
        f"stride 3 has no effect: each process of placement '{placement}'"
    )


def test_stride_on_processes_that_span_resources_is_accepted() -> None:
    rule = {"placement": "0-7,8-15:8-9", "stride": 2}
    config = load_config(cluster(num_nodes=2, component_placement={"rollout": rule}))
    assert config.component_placement["rollout"].stride == 2


def test_stride_on_all_with_one_resource_per_process_fails_when_planned() -> None:
    from placement_core import plan
    from placement_core._inventory import Inventory

    rule = {"placement": "all:0-7", "stride": 2}
    config = load_config(cluster(num_nodes=1, component_placement={"rollout": rule}))
    with pytest.raises(PlacementError, match="stride 2 has no effect") as caught:
        plan(config, Inventory.uniform(1, 8))
    assert caught.value.path == "cluster.component_placement.rollout.placement"


def test_unknown_key_in_a_rule_lists_every_rule_key() -> None:
    problem = only(cluster(component_placement={"actor": {"placement": "0-1", "numa": 0}}))
    assert problem.message.startswith(
        "unknown key; allowed keys: node_group, placement, stride, topology, numa_node"
    )
    assert "did you mean 'numa_node'" in problem.message


def test_a_rule_built_directly_is_checked_as_in_a_config() -> None:
    from placement_core._config import ComponentRule

    with pytest.raises(ValueError, match="stride 2 has no effect"):
        ComponentRule(key="rollout", placement="0-7", stride=2)
