"""The examples of RLinf's documentation (seeds 001, 002, 004) plan as documented.

Where placement deliberately differs (docs/guides/coming-from-rlinf.md), the test says so.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml

from placement_core import Plan, plan
from placement_core._config import load_config
from placement_core._errors import ConfigError
from placement_core._inventory import Inventory
from placement_core._strategies import flexible, packed

# Seed 001 ("示例配置"), verbatim.
HETEROGENEOUS = """\
cluster:
  num_nodes: 18

  component_placement:
    actor:
      node_group: a800
      placement: 0-63
    rollout:
      node_group: 4090
      placement: 0-63
    env:
      node_group: franka
      placement: 0-1
    agent:
      node_group: node
      placement: 0-1:0-199,2-3:200-399

  node_groups:
    - label: a800
      node_ranks: 0-7
      env_configs:
        - node_ranks: 0-7
          python_interpreter_path: /opt/venv/openpi/bin/python3
          env_vars:
            - GLOO_SOCKET_IFNAME: "eth0"

    - label: 4090
      node_ranks: 8-15
      env_configs:
        - node_ranks: 8-15
          env_vars:
            - GLOO_SOCKET_IFNAME: "eth1"

    - label: franka
      node_ranks: 16-17
      hardware:
        type: Franka
        configs:
          - robot_ip: "10.10.10.1"
            node_rank: 16
            camera_serials:
              - "322142001230"
              - "322142001231"
          - robot_ip: "10.10.10.2"
            node_rank: 17
            camera_serials:
              - "322142001232"
              - "322142001233"
"""


@pytest.fixture(scope="module")
def heterogeneous() -> Plan:
    """Seed 001's cluster on 16 eight-GPU nodes and two GPU-less robot nodes."""
    document = yaml.safe_load(HETEROGENEOUS)
    document["cluster"]["inventory"] = [{"node_ranks": "0-15", "accelerators": {"count": 8}}]
    return plan(document)


def where(result: Plan, component: str) -> list[tuple[int, tuple[int, ...]]]:
    return [(p.node_rank, p.hardware_ranks) for p in result.placements(component)]


def test_actor_uses_the_a800_gpus_in_order(heterogeneous: Plan) -> None:
    assert where(heterogeneous, "actor") == [(r // 8, (r % 8,)) for r in range(64)]


def test_rollout_ranks_count_inside_the_4090_group(heterogeneous: Plan) -> None:
    assert where(heterogeneous, "rollout") == [(8 + r // 8, (r % 8,)) for r in range(64)]


def test_env_drives_one_robot_each(heterogeneous: Plan) -> None:
    assert where(heterogeneous, "env") == [(16, (0,)), (17, (0,))]
    ips = [json.loads(heterogeneous.env("env", r)["PLACEMENT_HARDWARE_CONFIG"]) for r in (0, 1)]
    assert [ip["robot_ip"] for ip in ips] == ["10.10.10.1", "10.10.10.2"]


def test_agent_ranks_are_node_ranks_with_100_processes_each(heterogeneous: Plan) -> None:
    agents = heterogeneous.placements("agent")
    assert [p.node_rank for p in agents] == [r // 100 for r in range(400)]
    assert {(p.local_world_size, p.node_group, p.hardware_ranks) for p in agents} == {
        (100, "node", ())
    }


def test_env_configs_reach_only_their_groups_workers(heterogeneous: Plan) -> None:
    assert heterogeneous.env("actor", 0)["GLOO_SOCKET_IFNAME"] == "eth0"
    assert heterogeneous.env("rollout", 0)["GLOO_SOCKET_IFNAME"] == "eth1"
    assert "GLOO_SOCKET_IFNAME" not in heterogeneous.env("agent", 0)  # node group `node`
    assert heterogeneous.interpreter("actor", 63) == "/opt/venv/openpi/bin/python3"
    assert heterogeneous.interpreter("rollout", 0) is None


def test_label_4090_is_read_as_a_label() -> None:
    assert load_config(HETEROGENEOUS).labels == ("a800", "4090", "franka")


def test_short_form_places_each_component_of_the_key() -> None:
    source = {"cluster": {"num_nodes": 1, "component_placement": {"actor,inference": "0-7"}}}
    result = plan(source, Inventory.uniform(1, 8))
    for component in ("actor", "inference"):
        assert where(result, component) == [(0, (i,)) for i in range(8)]
    assert result.warnings == ()  # one key declares the share


def group_form(placement: dict[str, Any]) -> Plan:
    """Seed 001's group-form example, on 2 A800 nodes and 2 nodes with two arms each."""
    arms = [{"robot_ip": f"10.0.0.{i + 1}", "node_rank": 2 + i // 2} for i in range(4)]
    source = {
        "cluster": {
            "num_nodes": 4,
            "component_placement": placement,
            "node_groups": [
                {"label": "a800", "node_ranks": "0-1"},
                {
                    "label": "robot",
                    "node_ranks": "2-3",
                    "hardware": {"type": "Franka", "configs": arms},
                },
            ],
            "inventory": [{"node_ranks": "0-1", "accelerators": {"count": 8}}],
        }
    }
    return plan(source)


def test_group_form_actor_0_8_takes_nine_a800_gpus() -> None:
    result = group_form({"actor": {"node_group": "a800", "placement": "0-8"}})
    assert where(result, "actor") == [(0, (i,)) for i in range(8)] + [(1, (0,))]


def test_group_form_env_puts_two_processes_on_each_robot() -> None:
    result = group_form({"env": {"node_group": "robot", "placement": "0-3:0-7"}})
    assert where(result, "env") == [(2 + r // 4, ((r // 2) % 2,)) for r in range(8)]


def test_group_form_agent_counts_that_do_not_divide_are_an_error() -> None:
    # The seed writes 0-1:0-200 (201 processes on 2 nodes); its own rule says the counts
    # must be whole multiples of each other, so this is reported rather than guessed.
    with pytest.raises(ConfigError) as caught:
        group_form({"agent": {"node_group": "node", "placement": "0-1:0-200,2-3:201-511"}})
    (problem,) = caught.value.problems
    assert problem.path == "cluster.component_placement.agent.placement"
    assert "2 resources and 201 processes do not divide" in problem.message


def test_mixed_explicit_and_implicit_process_ranks() -> None:
    source = {"cluster": {"num_nodes": 1, "component_placement": {"a": "0-1:0-3,3-5,7-10:7-14"}}}
    result = plan(source, Inventory.uniform(1, 16))
    gpus = [p.hardware_ranks[0] for p in result.placements("a")]
    assert gpus == [0, 0, 1, 1, 3, 4, 5, 7, 7, 8, 8, 9, 9, 10, 10]


def test_packed_stride_two_of_a_four_gpu_block() -> None:
    # Seed 004: [0, 1, 2, 3] with stride 2 gives [0, 2] (and [1, 3] to the next rank).
    placements = packed(0, 3, per_process=2, stride=2).place(Inventory.uniform(1, 8))
    assert [p.hardware_ranks for p in placements] == [(0, 2), (1, 3)]
    assert [p.visible_accelerators for p in placements] == [(0, 2), (1, 3)]  # isolated


def test_packed_isolates_by_default_and_sets_the_visible_devices() -> None:
    (first, _) = packed(0, 3, per_process=2, stride=2).place(Inventory.uniform(1, 8))
    assert first.isolate_accelerator


def test_flexible_takes_global_ids_and_finds_the_node_from_them() -> None:
    # Seed 004: the node comes from the global ids; local ids are relative to that node. The
    # flexible strategy (docs/concepts/strategies.md#flexible) ranks processes by their first
    # resource.
    placements = flexible([[8, 9], [0, 1]]).place(Inventory.uniform(2, 8))
    assert [(p.rank, p.node_rank, p.hardware_ranks) for p in placements] == [
        (0, 0, (0, 1)),
        (1, 1, (0, 1)),
    ]
