"""What the table and map views show: folding, colocation, big and mixed clusters."""

from __future__ import annotations

from typing import Any

from placement_core import plan
from placement_core._inventory import Accelerator, Inventory, Node
from placement_core.render import render_map, render_table
from placement_core.render._map import component_codes


def config(num_nodes: int, placement: dict[str, Any], **rest: Any) -> dict[str, Any]:
    return {"cluster": {"num_nodes": num_nodes, "component_placement": placement, **rest}}


def rows(text: str) -> list[list[str]]:
    return [line.split() for line in text.splitlines()]


def test_component_codes_are_shortest_unique_prefixes() -> None:
    assert component_codes(["actor", "agent", "rollout", "env"]) == {
        "actor": "ac",
        "agent": "ag",
        "rollout": "r",
        "env": "e",
    }


def test_component_codes_for_prefix_names_and_digits() -> None:
    assert component_codes(["a", "ab"]) == {"a": "a", "ab": "ab"}
    assert component_codes(["env1", "env2"]) == {"env1": "env1:", "env2": "env2:"}


def test_map_shows_processes_sharing_an_accelerator() -> None:
    result = plan(config(1, {"actor": "0-3:0-7"}), Inventory.uniform(1, 4))
    grid = rows(render_map(result))
    node_row = next(r for r in grid if r[:1] == ["0"])
    assert node_row[3:7] == ["a0-1", "a2-3", "a4-5", "a6-7"]


def test_map_joins_components_with_plus() -> None:
    result = plan(config(1, {"actor,critic": "0-1"}), Inventory.uniform(1, 2))
    node_row = next(r for r in rows(render_map(result)) if r[:1] == ["0"])
    assert node_row[3:5] == ["a0+c0", "a1+c1"]


def test_map_marks_free_accelerators() -> None:
    result = plan(config(1, {"actor": "1"}), Inventory.uniform(1, 3))
    node_row = next(r for r in rows(render_map(result)) if r[:1] == ["0"])
    assert node_row[3:6] == [".", "a0", "."]


def test_map_folds_identical_consecutive_nodes() -> None:
    result = plan(config(100, {"actor": "all"}), Inventory.uniform(100, 8))
    text = render_map(result)
    assert "nodes 1-98: same layout, ranks continue" in text
    first_column = [r[0] for r in rows(text)[4:] if r]
    assert first_column == ["0", "⋮", "99"]


def test_a_fold_of_one_node_names_it_in_the_singular() -> None:
    result = plan(config(3, {"actor": "all"}), Inventory.uniform(3, 2))
    text = render_map(result)
    assert "node 1: same layout, ranks continue" in text
    assert "nodes 1-1" not in text


def test_map_caps_long_maps() -> None:
    # Every node differs (one more free accelerator each), so nothing folds.
    nodes = tuple(
        Node(
            rank=r,
            node_id=f"node-{r}",
            accelerators=tuple(Accelerator(i) for i in range(r % 7 + 1)),
        )
        for r in range(100)
    )
    result = plan(
        config(100, {"agent": {"node_group": "node", "placement": "all"}}), Inventory(nodes)
    )
    text = render_map(result, max_nodes=10)
    assert "... 90 more nodes not shown" in text


def test_map_of_mixed_nodes() -> None:
    nodes = (
        Node(rank=0, node_id="node-0", accelerators=tuple(Accelerator(i) for i in range(4))),
        Node(rank=1, node_id="node-1", accelerators=(Accelerator(0, type="amd", model="MI300X"),)),
        Node(rank=2, node_id="node-2"),
    )
    result = plan(
        config(3, {"agent": {"node_group": "node", "placement": "0-2"}}), Inventory(nodes)
    )
    text = render_map(result)
    assert "4x nvidia" in text
    assert "1x MI300X" in text
    assert "no accelerators" in text
    assert "node: a2" in text


def test_map_summarises_robots_per_node(heterogeneous_yaml: str) -> None:
    text = render_map(plan(heterogeneous_yaml))
    assert "Franka #0: e0" in text
    assert "Franka #1: e1" in text
    assert "node: ag0-99" in text


def test_table_folds_processes_sharing_a_node() -> None:
    result = plan(
        config(2, {"agent": {"node_group": "node", "placement": "0-1:0-199"}}),
        Inventory.uniform(2, 0),
    )
    table = rows(render_table(result))
    assert ["0-99", "0", "node", "-", "0-99/100", "-1", "node"] in table
    assert ["100-199", "1", "node", "-", "0-99/100", "-1", "node"] in table


def test_table_folds_successive_blocks() -> None:
    result = plan(config(1, {"rollout": "0-7:0-3"}), Inventory.uniform(1, 8))
    assert ["0-3", "0", "0-7", "(2", "each)", "own", "0-3/4", "0", "cluster"] in rows(
        render_table(result)
    )


def test_table_does_not_fold_strided_blocks() -> None:
    result = plan(
        config(1, {"rollout": {"placement": "0-7:0-3", "stride": 2}}), Inventory.uniform(1, 8)
    )
    table = rows(render_table(result))
    assert ["0", "0", "0,2", "0,2", "0/4", "0", "cluster"] in table
    assert ["1", "0", "1,3", "1,3", "1/4", "0", "cluster"] in table


def test_expanded_table_lists_every_process() -> None:
    result = plan(config(1, {"actor": "0-7"}), Inventory.uniform(1, 8))
    table = rows(render_table(result, fold=False))
    assert [r[0] for r in table if r and r[0].isdigit()] == [str(i) for i in range(8)]


def test_table_prints_warnings() -> None:
    result = plan(config(1, {"a": "0-3:0-1", "b": "1-2:0"}), Inventory.uniform(1, 4))
    assert result.warnings
    assert f"warning: {result.warnings[0]}" in render_table(result)


def test_table_local_rank_column_is_the_local_rank_each_process_gets(
    heterogeneous_yaml: str,
) -> None:
    result = plan(heterogeneous_yaml)
    lines = render_table(result, fold=False).splitlines()
    shown: list[str] = []
    for name in result.components:
        start = lines.index(next(x for x in lines if x.startswith(f"{name}: "))) + 1
        assert lines[start].split()[-2:] == ["LOCAL_RANK", "GROUP"]
        count = len(result.components[name])
        shown += [row.split()[-2] for row in lines[start + 1 : start + 1 + count]]
    expected = [
        result.env(name, rank)["LOCAL_RANK"]
        for name, placements in result.components.items()
        for rank in range(len(placements))
    ]
    assert shown == expected


def test_robots_are_numbered_as_their_group_counts_them() -> None:
    franka = {
        "label": "franka",
        "node_ranks": "0-1",
        "hardware": {
            "type": "Franka",
            "configs": [
                {"robot_ip": "10.0.0.1", "node_rank": 0},
                {"robot_ip": "10.0.0.2", "node_rank": 1},
                {"robot_ip": "10.0.0.3", "node_rank": 1},
            ],
        },
    }
    result = plan(
        config(2, {"env": {"node_group": "franka", "placement": "0-2"}}, node_groups=[franka]),
        Inventory.uniform(2, 0),
    )
    table = rows(render_table(result, fold=False))
    assert [r[2:4] for r in table if r[:1] in (["0"], ["1"], ["2"])] == [
        ["Franka", "#0"],
        ["Franka", "#1"],
        ["Franka", "#2"],
    ]
    assert "Franka #1: e1; Franka #2: e2" in render_map(result)


def test_table_names_the_components_sharing_resources() -> None:
    table = render_table(
        plan(config(1, {"actor": "all", "rollout": "0-1"}), Inventory.uniform(1, 8))
    )
    assert (
        "actor: 8 processes on cluster (placement 'all')\n"
        "  shares resources with rollout (time-shared)\n" in table
    )
    assert (
        "rollout: 2 processes on cluster (placement '0-1')\n"
        "  shares resources with actor (time-shared)\n" in table
    )


def test_table_says_nothing_of_sharing_for_disjoint_components() -> None:
    table = render_table(
        plan(config(1, {"actor": "0-3", "rollout": "4-7"}), Inventory.uniform(1, 8))
    )
    assert "shares" not in table
