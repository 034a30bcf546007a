"""Loading cluster configs: the accepted forms and what they mean.

See docs/concepts/cluster-config.md and docs/concepts/placement-language.md.
"""

from __future__ import annotations

import pickle
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from placement_core._config import ClusterConfig, ComponentRule, config_json_schema, load_config
from placement_core._errors import ConfigError, PlacementRuleError
from placement_core._hardware import FrankaConfig
from placement_core._yamlio import line_of, yaml_lines


def cluster(**section: Any) -> dict[str, Any]:
    """A config document with defaults for the required keys."""
    section.setdefault("num_nodes", 2)
    section.setdefault("component_placement", {"actor": "0-1"})
    return {"cluster": section}


def test_seed_config_loads(heterogeneous_yaml: str) -> None:
    config = load_config(heterogeneous_yaml)
    assert config.num_nodes == 18
    assert list(config.components()) == ["actor", "rollout", "env", "agent"]
    assert config.labels == ("a800", "4090", "franka")
    assert config.group("a800").node_ranks == tuple(range(8))
    assert config.components()["agent"].placement == "0-1:0-199,2-3:200-399"
    assert config.components()["agent"].node_groups == ("node",)


def test_seed_franka_configs_keep_their_settings(heterogeneous_yaml: str) -> None:
    hardware = load_config(heterogeneous_yaml).group("franka").hardware
    assert hardware is not None
    assert hardware.type == "Franka"
    first = hardware.configs[0]
    assert isinstance(first, FrankaConfig)
    assert first.node_rank == 16
    assert first.robot_ip == "10.10.10.1"
    assert first.camera_serials == ("322142001230", "322142001231")


def test_integer_label_and_node_group_become_strings() -> None:
    config = load_config(
        cluster(
            component_placement={"rollout": {"node_group": 4090, "placement": "0-1"}},
            node_groups=[{"label": 4090, "node_ranks": "0-1"}],
        )
    )
    assert config.labels == ("4090",)
    assert config.components()["rollout"].node_groups == ("4090",)


def test_short_form_places_on_cluster() -> None:
    rule = load_config(cluster(component_placement={"actor": "0-7"})).components()["actor"]
    assert rule == ComponentRule(key="actor", node_groups=("cluster",), placement="0-7")


def test_shared_key_gives_each_component_the_same_rule() -> None:
    config = load_config(cluster(component_placement={"actor,inference": "0-7"}))
    components = config.components()
    assert list(components) == ["actor", "inference"]
    assert components["actor"] is components["inference"]
    assert components["actor"].key == "actor,inference"


def test_integer_placement_becomes_its_string() -> None:
    rule = load_config(cluster(component_placement={"actor": 5})).components()["actor"]
    assert rule.placement == "5"


@pytest.mark.parametrize("written", ["a800,4090", " a800 , 4090 ", ["a800", 4090]])
def test_node_group_takes_a_comma_string_or_a_list(written: object) -> None:
    config = load_config(
        cluster(
            component_placement={"actor": {"node_group": written, "placement": "0-1"}},
            node_groups=[{"label": "a800", "node_ranks": 0}, {"label": "4090", "node_ranks": 1}],
        )
    )
    assert config.components()["actor"].node_groups == ("a800", "4090")


def test_group_form_stride() -> None:
    config = load_config(
        cluster(component_placement={"rollout": {"placement": "0-15:0-3", "stride": 2}})
    )
    assert config.components()["rollout"].stride == 2
    assert load_config(cluster()).components()["actor"].stride == 1


@pytest.mark.parametrize(
    ("written", "ranks"),
    [(3, (3,)), ([0, 1, "4-5"], (0, 1, 4, 5)), ("all", (0, 1, 2, 3, 4, 5)), ("5,0-1,1", (0, 1, 5))],
)
def test_node_ranks_accept_yaml_ints_lists_and_all(written: object, ranks: tuple[int, ...]) -> None:
    config = load_config(cluster(num_nodes=6, node_groups=[{"label": "g", "node_ranks": written}]))
    assert config.group("g").node_ranks == ranks


def test_env_vars_values_become_strings() -> None:
    config = load_config(
        cluster(
            node_groups=[
                {
                    "label": "g",
                    "node_ranks": "0-1",
                    "env_configs": [
                        {"node_ranks": 0, "env_vars": [{"NCCL_NVLS_ENABLE": 0}, {"RATIO": 0.5}]}
                    ],
                }
            ]
        )
    )
    env_vars = config.group("g").env_configs[0].env_vars
    assert env_vars == (("NCCL_NVLS_ENABLE", "0"), ("RATIO", "0.5"))


def test_node_environment_comes_from_the_groups_env_config() -> None:
    config = load_config(
        cluster(
            node_groups=[
                {
                    "label": "g",
                    "node_ranks": "0-1",
                    "env_configs": [
                        {
                            "node_ranks": 1,
                            "python_interpreter_path": "/venv/bin/python",
                            "env_vars": [{"A": "x"}],
                        }
                    ],
                }
            ]
        )
    )
    assert config.node_environment("g", 1) == ("/venv/bin/python", {"A": "x"})
    assert config.node_environment("g", 0) == (None, {})
    assert config.node_environment("cluster", 1) == (None, {})
    assert config.node_environment("node", 0) == (None, {})


def test_node_environment_returns_a_fresh_dict() -> None:
    config = load_config(
        cluster(
            node_groups=[
                {
                    "label": "g",
                    "node_ranks": 0,
                    "env_configs": [{"node_ranks": 0, "env_vars": [{"A": "1"}]}],
                }
            ]
        )
    )
    config.node_environment("g", 0)[1]["A"] = "changed"
    assert config.node_environment("g", 0) == (None, {"A": "1"})


def test_node_environment_outside_the_group_is_an_error() -> None:
    config = load_config(cluster(node_groups=[{"label": "g", "node_ranks": 0}]))
    with pytest.raises(PlacementRuleError, match="node 1 is not in node group 'g'"):
        config.node_environment("g", 1)
    with pytest.raises(PlacementRuleError, match="'h' is not a defined node group: the defined"):
        config.node_environment("h", 0)


def test_reserved_groups_cover_every_node() -> None:
    config = load_config(cluster(num_nodes=3))
    assert config.group("cluster").node_ranks == (0, 1, 2)
    assert config.group("node").node_ranks == (0, 1, 2)


def test_unknown_group_suggests_a_close_label() -> None:
    config = load_config(cluster(node_groups=[{"label": "a800", "node_ranks": 0}]))
    with pytest.raises(PlacementRuleError, match="did you mean 'a800'"):
        config.group("a80")


def test_groups_may_overlap() -> None:
    config = load_config(
        cluster(
            node_groups=[{"label": "gpu", "node_ranks": "0-1"}, {"label": "cpu", "node_ranks": 1}]
        )
    )
    assert config.group("cpu").node_ranks == (1,)


# ----------------------------------------------------------------------------- sources


def test_load_from_a_path(write_file: Any, heterogeneous_yaml: str) -> None:
    path = write_file("cluster.yaml", heterogeneous_yaml)
    assert load_config(path).num_nodes == 18
    assert load_config(str(path)).num_nodes == 18


def test_load_from_a_cluster_section_mapping() -> None:
    assert load_config({"num_nodes": 3, "component_placement": {"a": "0-1"}}).num_nodes == 3


def test_other_top_level_keys_belong_to_the_rest_of_the_job() -> None:
    document = {**cluster(), "runner": {"max_epochs": 3}, "algorithm": {"name": "ppo"}}
    assert load_config(document).num_nodes == 2


class FrozenMapping(Mapping[str, Any]):
    """A read-only Mapping that is not a dict, as OmegaConf's DictConfig is."""

    def __init__(self, data: dict[str, Any]) -> None:
        self._data = {
            k: FrozenMapping(v) if isinstance(v, dict) else tuple(v) if isinstance(v, list) else v
            for k, v in data.items()
        }

    def __getitem__(self, key: str) -> Any:
        return self._data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)


def test_load_from_a_non_dict_mapping() -> None:
    document = cluster(node_groups=[{"label": "g", "node_ranks": [0, 1]}])
    assert load_config(FrozenMapping(document)).group("g").node_ranks == (0, 1)


def test_a_built_config_is_returned_as_is(heterogeneous_yaml: str) -> None:
    config = load_config(heterogeneous_yaml)
    assert load_config(config) is config


def test_configs_are_frozen(heterogeneous_yaml: str) -> None:
    config = load_config(heterogeneous_yaml)
    with pytest.raises(ValueError, match="frozen"):
        config.num_nodes = 3  # type: ignore[misc]


def test_lookups_do_not_change_equality(heterogeneous_yaml: str) -> None:
    used, fresh = load_config(heterogeneous_yaml), load_config(heterogeneous_yaml)
    used.components()
    used.node_environment("a800", 0)
    assert used == fresh


def test_config_pickles(heterogeneous_yaml: str) -> None:
    config = load_config(heterogeneous_yaml)
    assert pickle.loads(pickle.dumps(config)) == config


def test_model_validate_without_context_still_checks_ranges() -> None:
    section = cluster(node_groups=[{"label": "g", "node_ranks": 5}])["cluster"]
    with pytest.raises(ValueError, match="out of range"):
        ClusterConfig.model_validate(section)


@given(st.lists(st.integers(0, 15), min_size=1, max_size=12))
def test_node_ranks_forms_agree(ranks: list[int]) -> None:
    text = ",".join(map(str, ranks))
    from_text = load_config(cluster(num_nodes=16, node_groups=[{"label": "g", "node_ranks": text}]))
    from_list = load_config(
        cluster(num_nodes=16, node_groups=[{"label": "g", "node_ranks": ranks}])
    )
    expected = tuple(sorted(set(ranks)))
    assert from_text.group("g").node_ranks == from_list.group("g").node_ranks == expected


# ----------------------------------------------------------------------------- schema


def test_json_schema_describes_the_yaml() -> None:
    schema = config_json_schema()
    assert schema["required"] == ["cluster"]
    defs = schema["$defs"]
    assert set(defs["ClusterConfig"]["properties"]) == {
        "num_nodes",
        "component_placement",
        "node_groups",
        "inventory",
        "node_order",
        "spare_nodes",
        "fabric_health",
        "nvlink_on_loss",
        *RLINF_ONLY,
    }
    rule = defs["ComponentRule"]["properties"]
    assert "key" not in rule
    assert "node_group" in rule
    assert "Franka" in defs["HardwareSpec"]["properties"]["type"]["enum"]
    assert "robot_ip" in defs["FrankaConfig"]["properties"]


def test_examples_load(examples: Path) -> None:
    paths = sorted(examples.glob("*.yaml"))
    assert paths
    for path in paths:
        assert load_config(path).num_nodes > 0


def test_config_error_is_raised_not_pydantics(write_file: Any) -> None:
    with pytest.raises(ConfigError):
        load_config(write_file("bad.yaml", "cluster: {num_nodes: 0, component_placement: {a: 1}}"))


def test_yaml_lines_locate_problem_paths(heterogeneous_yaml: str) -> None:
    lines = yaml_lines(heterogeneous_yaml)
    text = heterogeneous_yaml.splitlines()
    where = line_of("cluster.node_groups[1].env_configs[0].env_vars[0]", lines)
    assert where is not None
    assert "GLOO_SOCKET_IFNAME" in text[where - 1]
    # A key that is not written is located at its nearest enclosing key.
    missing = line_of("cluster.component_placement.actor.stride", lines)
    assert missing is not None
    assert text[missing - 1].strip() == "actor:"


def test_yaml_lines_of_a_bare_cluster_section() -> None:
    assert yaml_lines("num_nodes: 2\ncomponent_placement: {a: 1}\n") == {
        "cluster.num_nodes": 1,
        "cluster.component_placement": 2,
        "cluster.component_placement.a": 2,
    }


def test_examples_satisfy_the_json_schema(examples: Path) -> None:
    validator = jsonschema.Draft202012Validator(config_json_schema())
    for path in sorted(examples.glob("*.yaml")):
        document = yaml.safe_load(path.read_text(encoding="utf-8"))
        assert [error.message for error in validator.iter_errors(document)] == [], path


def test_a_path_that_does_not_exist_reads_as_text() -> None:
    with pytest.raises(ConfigError, match="if it is a file path: no such file"):
        load_config("configs/cluster")


# --- RLinf's own cluster keys ------------------------------------------------------------------

RLINF_ONLY = {
    "auto_scheduler": True,
    "use_pre_process_policy": True,
    "use_wait_before_last_iter_policy": False,
    "recreate_nccl_groups": True,
    "rollout_use_all_gpus": False,
    "net_emulation": {"enable": False},
    "tracer": {"enable": True, "port": 8265},
    "profiling": {"steps": [1, 2]},
    "num_gpus_per_node": 8,
}


def test_rlinfs_own_cluster_keys_are_accepted_and_named() -> None:
    config = load_config(
        {"cluster": {"num_nodes": 1, "component_placement": {"actor": "0-7"}, **RLINF_ONLY}}
    )
    assert config.ignored_keys == tuple(RLINF_ONLY)
    assert list(config.components()) == ["actor"]


def test_a_key_neither_knows_is_still_an_error_with_did_you_mean() -> None:
    with pytest.raises(ConfigError) as caught:
        load_config({"cluster": {"num_nodes": 1, "component_placement": {"a": 0}, "tracr": {}}})
    assert str(caught.value) == (
        "cluster.tracr: unknown key; allowed keys: num_nodes, component_placement, "
        "node_groups, inventory, node_order, spare_nodes, fabric_health, nvlink_on_loss "
        "(did you mean 'tracer'?)"
    )


def test_rlinf_keys_do_not_hide_other_problems() -> None:
    with pytest.raises(ConfigError) as caught:
        load_config({"cluster": {"num_nodes": 0, "component_placement": {"a": 0}, "tracer": {}}})
    assert [p.path for p in caught.value.problems] == ["cluster.num_nodes"]


def test_the_schema_accepts_rlinf_keys() -> None:
    properties = config_json_schema()["$defs"]["ClusterConfig"]["properties"]
    assert properties["auto_scheduler"] == {"description": "used by RLinf, ignored by placement"}


def test_references_in_the_cluster_section_are_resolved_against_the_job() -> None:
    config = load_config(
        {
            "cluster": {"num_nodes": "${runner.nodes}", "component_placement": {"a": "${p}"}},
            "runner": {"nodes": 2},
            "p": "0-1",
        }
    )
    assert (config.num_nodes, config.components()["a"].placement) == (2, "0-1")


def test_a_resolver_in_an_rlinf_only_key_is_left_alone() -> None:
    document = cluster(tracer={"dir": "${oc.env:HOME}"})
    assert load_config(document).ignored_keys == ("tracer",)


def test_an_unresolvable_reference_names_its_key() -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(cluster(num_nodes="${runner.nodes}"))
    assert str(caught.value) == (
        "cluster.num_nodes: cannot resolve '${runner.nodes}': the job document has no key "
        "runner.nodes"
    )
