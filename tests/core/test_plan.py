"""plan(): every component's placements, warnings, worker env and occupancy."""

from __future__ import annotations

import gc
import pickle
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from placement_core import Plan, plan
from placement_core._config import load_config
from placement_core._errors import (
    ConfigError,
    InventoryError,
    PlacementError,
    PlacementRuleError,
    PlacementSyntaxError,
)
from placement_core._inventory import Accelerator, Inventory, Node


def cluster(num_nodes: int, placement: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"cluster": {"num_nodes": num_nodes, "component_placement": placement, **extra}}


@pytest.fixture
def heterogeneous(heterogeneous_yaml: str) -> Plan:
    return plan(heterogeneous_yaml)


# --- the seed's heterogeneous cluster ----------------------------------------------------------


def test_heterogeneous_components_in_config_order(heterogeneous: Plan) -> None:
    assert list(heterogeneous.components) == ["actor", "rollout", "env", "agent"]
    assert [len(p) for p in heterogeneous.components.values()] == [64, 64, 2, 400]
    assert heterogeneous.warnings == ()


def test_heterogeneous_groups_map_to_their_nodes(heterogeneous: Plan) -> None:
    actor = heterogeneous.components["actor"]
    rollout = heterogeneous.components["rollout"]
    assert [(p.node_rank, p.hardware_ranks) for p in actor[7:9]] == [(0, (7,)), (1, (0,))]
    assert {p.node_group for p in actor} == {"a800"}
    assert rollout[0].node_rank == 8
    assert rollout[0].placement_node_rank == 0
    assert rollout[-1].node_rank == 15


def test_heterogeneous_robot_controllers(heterogeneous: Plan) -> None:
    env = heterogeneous.components["env"]
    assert [(p.node_rank, p.hardware_ranks, p.hardware_type) for p in env] == [
        (16, (0,), "Franka"),
        (17, (0,), "Franka"),
    ]
    assert {p.visible_accelerators for p in env} == {()}
    assert {p.local_accelerator_rank for p in env} == {-1}


def test_heterogeneous_agents_by_node(heterogeneous: Plan) -> None:
    agent = heterogeneous.components["agent"]
    assert [p.node_rank for p in agent[::100]] == [0, 1, 2, 3]
    assert agent[250].local_rank == 50
    assert agent[250].local_world_size == 100
    assert agent[250].hardware_ranks == ()


def test_env_vars_and_interpreter_come_only_through_the_placements_group(
    heterogeneous: Plan,
) -> None:
    actor_env = heterogeneous.env("actor", 9)
    assert actor_env["GLOO_SOCKET_IFNAME"] == "eth0"
    assert heterogeneous.interpreter("actor", 9) == "/opt/venv/openpi/bin/python3"
    assert heterogeneous.env("rollout", 0)["GLOO_SOCKET_IFNAME"] == "eth1"
    assert heterogeneous.interpreter("rollout", 0) is None
    # agent 0 runs on node 0 (an a800 node) but came through `node`: no a800 settings.
    assert "GLOO_SOCKET_IFNAME" not in heterogeneous.env("agent", 0)
    assert heterogeneous.interpreter("agent", 0) is None
    assert "GLOO_SOCKET_IFNAME" not in heterogeneous.env("env", 0)


def test_worker_env_fields(heterogeneous: Plan) -> None:
    env = heterogeneous.env("actor", 9, master_port=29500)
    assert env["RANK"] == "9"
    assert env["WORLD_SIZE"] == "64"
    assert env["LOCAL_RANK"] == "0"
    assert env["LOCAL_WORLD_SIZE"] == "8"
    assert env["NODE_RANK"] == "1"
    assert env["MASTER_ADDR"] == "node-0"
    assert env["MASTER_PORT"] == "29500"
    assert env["CUDA_VISIBLE_DEVICES"] == "1"
    assert "MASTER_PORT" not in heterogeneous.env("actor", 9)
    assert heterogeneous.env("actor", 9, master_addr="10.1.1.1")["MASTER_ADDR"] == "10.1.1.1"


def test_node_placements_see_the_whole_node(heterogeneous: Plan) -> None:
    env = heterogeneous.env("agent", 0)
    assert env["CUDA_VISIBLE_DEVICES"] == "0,1,2,3,4,5,6,7"
    assert env["LOCAL_RANK"] == "0"


def test_occupancy_per_node_and_accelerator(heterogeneous: Plan) -> None:
    occupancy = heterogeneous.occupancy()
    assert len(occupancy) == 18
    node1 = occupancy[1]
    assert node1.accelerators[0] == (("actor", 8),)
    assert len(node1.node) == 100
    assert node1.node[0] == ("agent", 100)
    assert occupancy[16].hardware == {("Franka", 0): (("env", 0),)}
    assert occupancy[16].accelerators == {}
    assert occupancy[4].node == ()
    assert heterogeneous.occupancy() is occupancy


# --- inputs ----------------------------------------------------------------------------------


def test_plan_accepts_a_path_a_mapping_and_a_loaded_config(
    write_file: Callable[[str, str], Path], heterogeneous_yaml: str
) -> None:
    path = write_file("cluster.yaml", heterogeneous_yaml)
    from_path = plan(path)
    from_config = plan(load_config(heterogeneous_yaml))
    assert from_path.components == from_config.components
    small = plan(cluster(1, {"actor": "0-3"}), Inventory.uniform(1, 4))
    assert len(small.components["actor"]) == 4


def test_inventory_must_have_num_nodes_nodes() -> None:
    with pytest.raises(InventoryError, match=r"inventory has 3 node.*num_nodes: 2") as info:
        plan(cluster(2, {"actor": "0-3"}), Inventory.uniform(3, 8))
    assert info.value.path == "cluster.num_nodes"


def test_rule_errors_name_the_rule_path() -> None:
    with pytest.raises(PlacementRuleError, match="would span nodes 0 and 1") as info:
        plan(cluster(2, {"actor": "6-11:0-1"}), Inventory.uniform(2, 8))
    assert info.value.path == "cluster.component_placement.actor.placement"


def test_syntax_errors_surface_from_plan() -> None:
    with pytest.raises((PlacementSyntaxError, ConfigError)) as info:
        plan(cluster(1, {"actor": "0-3:x"}), Inventory.uniform(1, 8))
    assert "cluster.component_placement.actor" in str(info.value)


def test_out_of_range_resource_in_a_group() -> None:
    raw = cluster(2, {"actor": {"node_group": "g", "placement": "0-8"}},
                  node_groups=[{"label": "g", "node_ranks": "1"}])  # fmt: skip
    with pytest.raises(PlacementRuleError, match=r"valid ranks are 0\.\.7"):
        plan(raw, Inventory.uniform(2, 8))


def test_reserved_env_vars_in_a_group_are_an_error() -> None:
    raw = cluster(
        1,
        {"actor": {"node_group": "g", "placement": "0"}},
        node_groups=[
            {"label": "g", "node_ranks": "0",
             "env_configs": [{"node_ranks": "0", "env_vars": [{"CUDA_VISIBLE_DEVICES": "3"}]}]}
        ],
    )  # fmt: skip
    with pytest.raises(PlacementError, match="CUDA_VISIBLE_DEVICES") as info:
        plan(raw, Inventory.uniform(1, 8))
    assert "cluster.node_groups[0].env_configs[0].env_vars" in str(info.value)


def test_one_key_gives_each_component_the_same_placements() -> None:
    result = plan(cluster(1, {"actor,inference": "0-7"}), Inventory.uniform(1, 8))
    assert list(result.components) == ["actor", "inference"]
    assert result.components["actor"] == result.components["inference"]
    assert result.warnings == ()


def test_stride_rule_places_a_strided_rollout() -> None:
    raw = cluster(2, {"actor": "0-15", "rollout": {"placement": "0-15:0-3", "stride": 2}})
    result = plan(raw, Inventory.uniform(2, 8))
    assert [p.hardware_ranks for p in result.components["rollout"]] == [
        (0, 2, 4, 6), (1, 3, 5, 7), (0, 2, 4, 6), (1, 3, 5, 7)
    ]  # fmt: skip
    assert result.warnings == ()  # a strided rule declares its colocation


def test_multi_group_list_places_across_groups() -> None:
    raw = cluster(
        2,
        {"actor": {"node_group": ["a", "b"], "placement": "0-15"}},
        node_groups=[{"label": "a", "node_ranks": "1"}, {"label": "b", "node_ranks": "0"}],
    )
    actor = plan(raw, Inventory.uniform(2, 8)).components["actor"]
    assert [(p.node_rank, p.node_group) for p in actor[7:9]] == [(1, "a"), (0, "b")]
    assert [p.placement_node_rank for p in actor[7:9]] == [0, 1]


# --- sharing warnings ----------------------------------------------------------------------


def test_sharing_with_separate_keys_is_not_a_warning() -> None:
    # RLinf's time-shared colocation: `actor: all` next to `rollout: 0-1`.
    result = plan(cluster(1, {"actor": "all", "rollout": "0-1"}), Inventory.uniform(1, 8))
    assert result.warnings == ()


def test_sharing_lists_the_components_each_one_shares_with() -> None:
    raw = cluster(1, {"actor": "0-3", "critic": "2-5", "reward": "6-7"})
    result = plan(raw, Inventory.uniform(1, 8))
    assert dict(result.sharing()) == {"actor": ("critic",), "critic": ("actor",), "reward": ()}


def test_a_process_inside_another_components_process_is_not_a_warning() -> None:
    # A strided 2-GPU rollout engine inside a 4-GPU trainer group.
    raw = cluster(1, {"actor": "0-7:0-1", "rollout": {"placement": "0-7:0-3", "stride": 2}})
    assert plan(raw, Inventory.uniform(1, 8)).warnings == ()


def test_partly_overlapping_processes_are_a_warning() -> None:
    # 2-GPU engines on 1-2 and 5-6 straddle the 2-GPU actor groups 0-1 / 2-3 and 4-5 / 6-7.
    raw = cluster(1, {"actor": "0-7:0-3", "rollout": "1-2:0,5-6:1"})
    (warning,) = plan(raw, Inventory.uniform(1, 8)).warnings
    assert "'actor' and 'rollout' have processes whose accelerators partly overlap" in warning
    assert "(node 0 accelerators 0-1 and node 0 accelerators 1-2)" in warning


def test_colocate_declares_a_share() -> None:
    raw = cluster(1, {"actor": "0-7:0-3", "rollout": "1-2:0,5-6:1"})
    assert plan(raw, Inventory.uniform(1, 8), colocate=[("actor", "rollout")]).warnings == ()


def test_disjoint_components_give_no_warning() -> None:
    assert (
        plan(cluster(1, {"actor": "0-3", "rollout": "4-7"}), Inventory.uniform(1, 8)).warnings == ()
    )


def test_node_placements_never_count_as_sharing() -> None:
    raw = cluster(1, {"actor": "0-7", "agent": {"node_group": "node", "placement": "0:0-9"}})
    assert plan(raw, Inventory.uniform(1, 8)).warnings == ()


# --- lookups ------------------------------------------------------------------------------------


def test_unknown_component_or_rank_is_a_typed_error(heterogeneous: Plan) -> None:
    with pytest.raises(PlacementRuleError, match="no component is called 'critic'"):
        heterogeneous.env("critic", 0)
    with pytest.raises(PlacementRuleError, match=r"ranks 0\.\.63, got 64"):
        heterogeneous.env("actor", 64)


def test_master_addr_prefers_ip_then_hostname_then_node_id() -> None:
    nodes = (
        Node(0, "id-0", hostname="host0", ip="10.0.0.5", accelerators=(Accelerator(0),)),
        Node(1, "id-1", hostname="host1", accelerators=(Accelerator(0),)),
        Node(2, "id-2", accelerators=(Accelerator(0),)),
    )
    raw = cluster(3, {"a": "0", "b": "1", "c": "2"})
    result = plan(raw, Inventory(nodes))
    assert result.env("a", 0)["MASTER_ADDR"] == "10.0.0.5"
    assert result.env("b", 0)["MASTER_ADDR"] == "host1"
    assert result.env("c", 0)["MASTER_ADDR"] == "id-2"


def test_a_plan_and_its_occupancy_pickle(heterogeneous: Plan) -> None:
    copy = pickle.loads(pickle.dumps(heterogeneous))
    assert copy == heterogeneous
    assert list(copy.components) == list(heterogeneous.components)
    assert copy.env("actor", 3) == heterogeneous.env("actor", 3)
    assert pickle.loads(pickle.dumps(heterogeneous.occupancy())) == heterogeneous.occupancy()


def test_sharing_a_robot_is_a_warning() -> None:
    raw = cluster(
        1,
        {
            "env": {"node_group": "franka", "placement": "0"},
            "monitor": {"node_group": "franka", "placement": "0"},
        },
        node_groups=[
            {
                "label": "franka",
                "node_ranks": "0",
                "hardware": {
                    "type": "Franka",
                    "configs": [{"robot_ip": "10.10.10.1", "node_rank": 0}],
                },
            }
        ],
    )
    result = plan(raw, Inventory.uniform(1, 0))
    (warning,) = result.warnings
    assert "both drive 1 hardware device(s) (first: Franka 0 on node 0)" in warning
    assert result.occupancy()[0].hardware[("Franka", 0)] == (("env", 0), ("monitor", 0))


@pytest.mark.parametrize(
    ("rule", "nodes", "expected"),
    [
        ("0-3:0-7", 1, [(0, (i // 2,)) for i in range(8)]),
        ("0-7:0-1", 1, [(0, (0, 1, 2, 3)), (0, (4, 5, 6, 7))]),
        ("4-11", 2, [(0, (4,)), (0, (5,)), (0, (6,)), (0, (7,)),
                     (1, (0,)), (1, (1,)), (1, (2,)), (1, (3,))]),
        ("5", 1, [(0, (5,))]),
        (5, 1, [(0, (5,))]),
    ],
)  # fmt: skip
def test_short_form_yaml_rules(
    rule: object, nodes: int, expected: list[tuple[int, tuple[int, ...]]]
) -> None:
    value = rule if isinstance(rule, int) else f'"{rule}"'
    text = f"cluster:\n  num_nodes: {nodes}\n  component_placement:\n    actor: {value}\n"
    actor = plan(text, Inventory.uniform(nodes, 8)).components["actor"]
    assert [(p.node_rank, p.hardware_ranks) for p in actor] == expected
    assert {p.node_group for p in actor} == {"cluster"}


# --- the garbage collector ---------------------------------------------------------------------


def test_plan_leaves_the_garbage_collector_alone_by_default(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    touched: list[str] = []
    for name in ("disable", "enable", "freeze", "unfreeze"):
        monkeypatch.setattr(gc, name, lambda name=name: touched.append(name))
    plan(cluster(2, {"actor": "all"}), Inventory.uniform(2, 8))
    assert touched == []


def test_a_large_plan_leaves_no_tracked_object_per_process() -> None:
    agents = {"node_group": "node", "placement": "all:0-99999"}
    config = load_config(cluster(1000, {"actor": "all", "agent": agents}))
    inventory = Inventory.uniform(1000, 8)
    gc.collect()
    before = len(gc.get_objects())
    result = plan(config, inventory)
    gc.collect()
    processes = sum(len(p) for p in result.components.values())
    assert processes == 108_000
    assert len(gc.get_objects()) - before < processes // 10  # a few per node, none per process


def test_a_component_over_nvidia_and_ascend_nodes_is_warned_about() -> None:
    inventory = Inventory(
        (
            Node(0, "n0", accelerators=tuple(Accelerator(index=i) for i in range(2))),
            Node(
                1, "n1", accelerators=tuple(Accelerator(index=i, type="ascend") for i in range(2))
            ),
        )
    )
    config = {"cluster": {"num_nodes": 2, "component_placement": {"a": "all", "b": "0-1"}}}
    result = plan(config, inventory)
    (warning,) = [w for w in result.warnings if "vendors" in w]
    assert warning.startswith("'a' runs on accelerators of 2 vendors (ascend on node(s) 1; ")
    assert "nvidia on node(s) 0" in warning


def test_gaudi_hpus_shared_by_processes_are_warned_about_as_launch_refuses_them() -> None:
    config = {
        "cluster": {
            "num_nodes": 1,
            "inventory": [{"node_ranks": 0, "accelerators": {"type": "gaudi", "count": 8}}],
            "component_placement": {"actor": "all", "rollout": "0-7:0-15"},
        }
    }
    warnings = [w for w in plan(config).warnings if "Gaudi" in w]
    assert len(warnings) == 2
    assert warnings[0].startswith("'actor' shares 8 Gaudi HPU(s) with other processes")
    assert "launch refuses this plan" in warnings[0]


def test_gaudi_hpus_one_process_each_plan_without_a_warning() -> None:
    config = {
        "cluster": {
            "num_nodes": 1,
            "inventory": [{"node_ranks": 0, "accelerators": {"type": "gaudi", "count": 8}}],
            "component_placement": {"actor": "0-3", "rollout": "4-7"},
        }
    }
    assert not [w for w in plan(config).warnings if "Gaudi" in w]
