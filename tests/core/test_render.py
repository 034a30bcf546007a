"""Golden-file tests of the table, map and JSON views (PLACEMENT_REGEN_GOLDEN=1 rewrites)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from placement_core import Plan, plan
from placement_core.render import (
    plan_to_dict,
    render_json,
    render_map,
    render_svg,
    render_table,
)

GOLDEN = Path(__file__).parent / "golden"
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

PLACEMENT_KEYS = [
    "rank",
    "node_rank",
    "node_id",
    "placement_node_rank",
    "local_rank",
    "local_world_size",
    "hardware_ranks",
    "visible_accelerators",
    "local_accelerator_rank",
    "accelerator_type",
    "node_group",
    "isolate_accelerator",
    "interpreter",
    "env",
]


def check_golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if os.environ.get("PLACEMENT_REGEN_GOLDEN"):
        path.write_text(text, encoding="utf-8")
    assert path.exists(), f"no golden file {path}: run with PLACEMENT_REGEN_GOLDEN=1"
    assert text == path.read_text(encoding="utf-8")


def example(name: str) -> Plan:
    return plan(EXAMPLES / f"{name}.yaml")


@pytest.mark.parametrize("name", ["colocated_strided", "disaggregated", "heterogeneous"])
def test_table_golden(name: str) -> None:
    check_golden(f"{name}.table.txt", render_table(example(name)))


@pytest.mark.parametrize("name", ["colocated_strided", "disaggregated", "heterogeneous"])
def test_map_golden(name: str) -> None:
    check_golden(f"{name}.map.txt", render_map(example(name)))


@pytest.mark.parametrize("name", ["colocated_strided", "heterogeneous"])
def test_svg_golden(name: str) -> None:
    check_golden(f"{name}.svg", render_svg(example(name)))


def test_json_golden() -> None:
    check_golden("colocated_strided.json", render_json(example("colocated_strided")))


def test_expanded_table_golden() -> None:
    check_golden(
        "disaggregated.expanded.table.txt", render_table(example("disaggregated"), fold=False)
    )


def test_json_has_exactly_the_documented_fields() -> None:
    document = json.loads(render_json(example("heterogeneous")))
    assert list(document) == ["schema", "nodes", "components", "warnings"]
    assert document["schema"] == 1
    assert list(document["components"]) == ["actor", "rollout", "env", "agent"]
    for placements in document["components"].values():
        for entry in placements:
            assert list(entry) == PLACEMENT_KEYS


def test_json_matches_the_plan_records() -> None:
    result = example("heterogeneous")
    document = plan_to_dict(result)
    robot = document["components"]["env"][1]
    record = result.components["env"][1]
    assert robot["node_rank"] == record.node_rank == 17
    assert robot["hardware_ranks"] == [0]
    assert robot["local_accelerator_rank"] == -1
    assert robot["accelerator_type"] is None
    assert robot["node_group"] == "franka"
    actor = document["components"]["actor"][9]
    assert actor["env"]["CUDA_VISIBLE_DEVICES"] == "1"
    assert actor["env"]["GLOO_SOCKET_IFNAME"] == "eth0"
    assert actor["env"]["RANK"] == "9"


def test_json_lists_nodes_with_their_hardware() -> None:
    nodes = plan_to_dict(example("heterogeneous"))["nodes"]
    assert [n["node_rank"] for n in nodes] == list(range(18))
    assert len(nodes[0]["accelerators"]) == 8
    assert nodes[0]["accelerators"][0]["model"] == "A800-SXM4-80GB"
    assert nodes[16]["accelerators"] == []
    assert nodes[16]["hardware"][0]["type"] == "Franka"
    assert nodes[16]["hardware"][0]["config"]["robot_ip"] == "10.10.10.1"


def test_json_without_env() -> None:
    document = plan_to_dict(example("colocated_strided"), env=False)
    assert document["components"]["actor"][0]["env"] is None


def test_json_is_valid_json_for_warnings() -> None:
    result = plan(
        {
            "cluster": {
                "num_nodes": 1,
                "component_placement": {"a": "0-3:0-1", "b": "1-2:0"},
                "inventory": [{"node_ranks": 0, "accelerators": {"count": 4}}],
            }
        }
    )
    document = json.loads(render_json(result))
    assert document["warnings"] == list(result.warnings)
    assert document["warnings"]


def test_json_gives_each_placement_its_interpreter() -> None:
    result = example("heterogeneous")
    document = plan_to_dict(result)
    actor, rollout = document["components"]["actor"][0], document["components"]["rollout"][0]
    assert actor["interpreter"] == result.interpreter("actor", 0) == "/opt/venv/openpi/bin/python3"
    assert rollout["interpreter"] is None
