"""Accelerator types: the Ray resource of each, and registering new ones.

See docs/concepts/worker-environment.md.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from hypothesis import given
from hypothesis import strategies as st

from placement_core import config_json_schema, load_config, plan
from placement_core._accelerators import (
    RAY_RESOURCES,
    VISIBILITY_ENV_VARS,
    accelerator_kind,
    ray_resource,
    register_accelerator,
    registered_accelerators,
    reserved_env_vars,
    unregister_accelerator,
)
from placement_core._env import check_user_env, visibility_env
from placement_core._errors import ConfigError, PlacementRuleError
from placement_core._sources import inventory_for


@pytest.fixture
def cambricon() -> Iterator[str]:
    register_accelerator("cambricon", ray_resource="MLU", env_var="MLU_VISIBLE_DEVICES")
    try:
        yield "cambricon"
    finally:
        unregister_accelerator("cambricon")


@pytest.mark.parametrize(
    ("kind", "resource"),
    [
        ("nvidia", "GPU"),
        ("amd", "GPU"),
        ("intel", "GPU"),
        ("ascend", "NPU"),
        ("gaudi", "HPU"),
        ("musa", "MUSA"),
        ("kunlun", "XPU"),
    ],
)
def test_each_built_in_type_has_its_ray_resource(kind: str, resource: str) -> None:
    assert ray_resource(kind) == resource


def test_the_ray_resource_ignores_case() -> None:
    assert ray_resource("Ascend") == "NPU"


def test_every_registered_type_has_a_resource_and_a_visibility_variable() -> None:
    assert set(RAY_RESOURCES) == set(VISIBILITY_ENV_VARS) == set(registered_accelerators())


def test_an_unknown_type_has_no_resource_and_the_error_lists_the_known_ones() -> None:
    with pytest.raises(PlacementRuleError, match=r"'tpu'.*registered types: amd, ascend"):
        ray_resource("tpu")


def test_a_registered_type_gets_its_resource_and_variable(cambricon: str) -> None:
    kind = accelerator_kind(cambricon)
    assert kind is not None
    assert (kind.ray_resource, kind.visibility.env_var) == ("MLU", "MLU_VISIBLE_DEVICES")
    assert visibility_env(cambricon, (1, 3)) == {
        "MLU_VISIBLE_DEVICES": "1,3",
        "RAY_EXPERIMENTAL_NOSET_MLU_VISIBLE_DEVICES": "1",
    }


def test_a_registered_type_is_valid_in_a_config_inventory(cambricon: str) -> None:
    config = load_config(
        {
            "cluster": {
                "num_nodes": 1,
                "component_placement": {"actor": "0-1"},
                "inventory": [{"node_ranks": 0, "accelerators": {"type": cambricon, "count": 2}}],
            }
        }
    )
    placements = plan(config, inventory_for(config)).components["actor"]
    assert [p.accelerator_type for p in placements] == [cambricon, cambricon]


def test_a_registered_type_is_in_the_config_schema(cambricon: str) -> None:
    schema = config_json_schema()
    assert cambricon in schema["$defs"]["AcceleratorSpec"]["properties"]["type"]["enum"]


def test_a_registered_types_variable_is_reserved(cambricon: str) -> None:
    assert "MLU_VISIBLE_DEVICES" in reserved_env_vars()
    with pytest.raises(PlacementRuleError, match="MLU_VISIBLE_DEVICES"):
        check_user_env({"MLU_VISIBLE_DEVICES": "0"})


def test_an_unregistered_type_in_a_config_is_an_error_naming_the_registered_ones() -> None:
    with pytest.raises(ConfigError, match=r"accelerators\.type.*registered types 'amd', 'ascend'"):
        load_config(
            {
                "cluster": {
                    "num_nodes": 1,
                    "component_placement": {"actor": 0},
                    "inventory": [{"node_ranks": 0, "accelerators": {"type": "mlu", "count": 1}}],
                }
            }
        )


def test_registering_a_taken_name_needs_replace(cambricon: str) -> None:
    with pytest.raises(ConfigError, match="already registered; pass replace=True"):
        register_accelerator(cambricon, ray_resource="MLU2", env_var="MLU_VISIBLE_DEVICES")
    register_accelerator(cambricon, ray_resource="MLU2", env_var="X_DEVICES", replace=True)
    assert ray_resource(cambricon) == "MLU2"


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"name": "Cambricon"}, "expected a lower-case name"),
        ({"ray_resource": "CPU"}, "Ray's own resource"),
        ({"ray_resource": "two words"}, "expected a Ray resource name"),
        ({"env_var": "MLU-DEVICES"}, "env_var: expected an environment variable"),
        ({"noset_env_vars": ["X"]}, "noset_env_vars: expected a tuple"),
        ({"env_var": "MASTER_ADDR"}, "env_var: set by the planner on every worker"),
        ({"env_var": "RANK"}, "env_var: set by the planner on every worker"),
        (
            {"noset_env_vars": ("WORLD_SIZE",)},
            "noset_env_vars: set by the planner on every worker.*'WORLD_SIZE'",
        ),
        (
            {"noset_env_vars": ("MLU_VISIBLE_DEVICES",)},
            "noset_env_vars: names env_var itself",
        ),
    ],
)
def test_a_malformed_registration_names_the_field(fields: dict[str, object], message: str) -> None:
    arguments: dict[str, object] = {
        "name": "mlu",
        "ray_resource": "MLU",
        "env_var": "MLU_VISIBLE_DEVICES",
        **fields,
    }
    with pytest.raises(ConfigError, match=message):
        register_accelerator(**arguments)  # type: ignore[arg-type]
    assert "mlu" not in registered_accelerators()


def test_a_built_in_type_cannot_be_unregistered() -> None:
    with pytest.raises(ConfigError, match="built in"):
        unregister_accelerator("ascend")
    assert ray_resource("ascend") == "NPU"


@given(
    name=st.from_regex(r"[a-z][a-z0-9_]{2,10}", fullmatch=True),
    resource=st.from_regex(r"[A-Z][A-Z0-9_]{1,8}", fullmatch=True),
)
def test_registering_then_unregistering_leaves_the_table_as_it_was(
    name: str, resource: str
) -> None:
    if name in registered_accelerators() or resource == "CPU":
        return
    before = dict(RAY_RESOURCES)
    register_accelerator(name, ray_resource=resource, env_var=f"{resource}_VISIBLE_DEVICES")
    assert ray_resource(name) == resource
    unregister_accelerator(name)
    assert dict(RAY_RESOURCES) == before


def test_a_snapshot_without_accelerators_leaves_them_to_the_inventory_entry() -> None:
    config = load_config(
        {
            "cluster": {
                "num_nodes": 1,
                "component_placement": {"actor": "0-7"},
                "inventory": [{"node_ranks": 0, "accelerators": {"type": "ascend", "count": 8}}],
            }
        }
    )
    snapshot = {"schema": 1, "hostname": "npu-0", "node_rank": 0, "cpus": 192}
    (node,) = inventory_for(
        config, snapshots=[{**snapshot, "accelerators": [], "nvml_error": "no NVML"}]
    ).nodes
    assert (node.hostname, node.cpus, node.accelerator_type) == ("npu-0", 192, "ascend")
    assert len(node.accelerators) == 8


@pytest.mark.parametrize(
    ("written", "hint"),
    [
        ("Ascend", "did you mean 'ascend'? types are lower case"),
        ("npu", "did you mean 'ascend'? 'npu' is the Ray resource, not the type"),
        ("HPU", "did you mean 'gaudi'?"),
        ("GPU", "did you mean 'amd' or 'intel' or 'nvidia'?"),
        ("nvidai", "did you mean 'nvidia'?"),
    ],
)
def test_a_type_written_as_its_resource_or_in_capitals_gets_a_did_you_mean(
    written: str, hint: str
) -> None:
    inventory = [{"node_ranks": 0, "accelerators": {"type": written, "count": 1}}]
    with pytest.raises(ConfigError) as caught:
        load_config(
            {
                "cluster": {
                    "num_nodes": 1,
                    "component_placement": {"actor": 0},
                    "inventory": inventory,
                }
            }
        )
    assert hint in str(caught.value)
