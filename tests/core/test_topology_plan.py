"""Topology-aware plans: `topology: any | best | nvlink`, link/NUMA/CPUs, busy accelerators."""

from __future__ import annotations

import copy
import json
from collections import Counter
from itertools import combinations
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from placement_core import Plan, _topology, plan
from placement_core._config import load_config
from placement_core._errors import ConfigError, InventoryError, PlacementRuleError
from placement_core._inventory import Inventory
from placement_core._sources import inventory_from_snapshots, node_from_snapshot
from placement_core.render import plan_to_dict, render_map, render_table

HERE = Path(__file__).parent
BRIDGED = HERE / "data" / "snapshot_pcie_nvbridge.json"  # NVLink bridges 0-2, 1-3, 4-6, 5-7
SWITCHES = HERE / "data" / "snapshot_pcie_two_switches.json"  # sockets: {0,1,4,5} {2,3,6,7}
DGX = HERE / "golden" / "snapshot_dgx_h100.json"  # NVSwitch: NV18 everywhere


def snapshots(path: Path, nodes: int) -> list[dict[str, Any]]:
    """``nodes`` machines like the one of ``path`` (each with GPU UUIDs of its own)."""
    document = json.loads(path.read_text())
    copies = [copy.deepcopy(document) for _ in range(nodes)]
    for machine, copied in enumerate(copies):
        for accelerator in copied["accelerators"]:
            accelerator["uuid"] = f"{accelerator['uuid']}-{machine}"
    return copies


def inventory(path: Path, nodes: int = 1) -> Inventory:
    return inventory_from_snapshots(snapshots(path, nodes))


def planned(
    rule: dict[str, Any] | str, inv: Inventory, *, extra: dict[str, Any] | None = None
) -> Plan:
    placement = {"rollout": rule, **(extra or {})}
    config = {"cluster": {"num_nodes": inv.num_nodes, "component_placement": placement}}
    return plan(load_config(config), inv)


def groups(result: Plan, component: str = "rollout") -> list[tuple[int, ...]]:
    return [p.hardware_ranks for p in result.placements(component)]


def links(result: Plan, component: str = "rollout") -> list[str | None]:
    return [p.link for p in result.placements(component)]


# ---------------------------------------------------------------- any / best / nvlink


def test_any_keeps_index_order_and_reports_the_links() -> None:
    result = planned("0-7:0-3", inventory(BRIDGED))
    assert groups(result) == [(0, 1), (2, 3), (4, 5), (6, 7)]
    assert links(result) == ["PIX", "PIX", "PIX", "PIX"]


def test_best_pairs_the_nvlink_bridges() -> None:
    result = planned({"placement": "0-7:0-3", "topology": "best"}, inventory(BRIDGED))
    assert groups(result) == [(0, 2), (1, 3), (4, 6), (5, 7)]
    assert links(result) == ["NV4"] * 4
    assert [p.local_rank for p in result.placements("rollout")] == [0, 1, 2, 3]


def test_best_keeps_tensor_parallel_four_on_one_socket() -> None:
    inv = inventory(SWITCHES)
    assert links(planned("0-7:0-1", inv)) == ["SYS", "SYS"]
    result = planned({"placement": "0-7:0-1", "topology": "best"}, inv)
    assert groups(result) == [(0, 1, 4, 5), (2, 3, 6, 7)]
    assert links(result) == ["NODE", "NODE"]
    assert [p.numa_node for p in result.placements("rollout")] == [0, 1]


@pytest.mark.parametrize("rule", ["0-7:0-3", "0-7:0-1", "0-15:0-1"])
def test_best_equals_any_on_an_nvswitch_node(rule: str) -> None:
    inv = inventory(DGX, 2)
    assert groups(planned({"placement": rule, "topology": "best"}, inv)) == groups(
        planned(rule, inv)
    )


def test_best_regroups_only_the_accelerators_the_rule_gives() -> None:
    result = planned({"placement": "4-7:0-1", "topology": "best"}, inventory(BRIDGED))
    assert groups(result) == [(4, 6), (5, 7)]


def test_nvlink_passes_where_every_process_gets_nvlink() -> None:
    result = planned({"placement": "0-7:0-3", "topology": "nvlink"}, inventory(BRIDGED))
    assert links(result) == ["NV4"] * 4


def test_nvlink_fails_naming_the_node_and_its_best_link() -> None:
    with pytest.raises(PlacementRuleError) as caught:
        planned({"placement": "0-7:0-1", "topology": "nvlink"}, inventory(SWITCHES))
    message = str(caught.value)
    assert "component_placement.rollout.topology" in message
    assert "node 0" in message
    assert "over NODE" in message


def test_nvlink_without_link_information_fails() -> None:
    with pytest.raises(PlacementRuleError, match="node 0's accelerators, but its inventory"):
        planned({"placement": "0-7:0-3", "topology": "nvlink"}, Inventory.uniform(1, 8))


def test_best_without_link_information_warns_and_keeps_index_order() -> None:
    result = planned({"placement": "0-15:0-7", "topology": "best"}, Inventory.uniform(2, 8))
    assert groups(result) == [(0, 1), (2, 3), (4, 5), (6, 7)] * 2
    assert result.warnings == (
        "'rollout': topology: best has no link information for node(s) 0-1 (no node "
        "snapshot): their accelerators keep index order",
    )


def test_best_with_stride_is_a_config_error() -> None:
    rule = {"placement": "0-7:0-3", "stride": 2, "topology": "best"}
    with pytest.raises(ConfigError, match="topology: best would regroup"):
        planned(rule, inventory(BRIDGED))


def test_nvlink_with_stride_checks_the_strided_pairs_without_moving_them() -> None:
    rule = {"placement": "0-7:0-3", "stride": 2, "topology": "nvlink"}
    result = planned(rule, inventory(BRIDGED))  # stride 2 pairs 0-2, 1-3: the bridges
    assert groups(result) == [(0, 2), (1, 3), (4, 6), (5, 7)]
    with pytest.raises(PlacementRuleError, match=r"strided process on accelerators \[0, 2\]"):
        planned(rule, inventory(SWITCHES))


def test_topology_on_a_node_space_is_an_error() -> None:
    rule = {"node_group": "node", "placement": "0:0-1", "topology": "best"}
    with pytest.raises(PlacementRuleError, match="holds none to group"):
        planned(rule, inventory(BRIDGED))


def test_unknown_topology_mode_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="topology"):
        planned({"placement": "0-7:0-3", "topology": "fastest"}, inventory(BRIDGED))


def test_nodes_of_one_model_are_solved_once(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = Counter[int]()
    real = _topology.best_groups

    def counting(*args: Any) -> tuple[tuple[int, ...], ...]:
        calls[0] += 1
        return real(*args)

    monkeypatch.setattr("placement_core._topology_plan.best_groups", counting)
    result = planned({"placement": "0-399:0-199", "topology": "best"}, inventory(BRIDGED, 50))
    assert calls[0] == 1
    assert set(groups(result)) == {(0, 2), (1, 3), (4, 6), (5, 7)}


# ---------------------------------------------------------------- CPUs and NUMA


def test_processes_split_their_numa_nodes_cpus_without_overlap() -> None:
    result = planned("0-7", inventory(BRIDGED))  # 4 GPUs per NUMA node
    cpus = [p.cpus for p in result.placements("rollout")]
    assert cpus == [
        "0-7,64-71",
        "8-15,72-79",
        "16-23,80-87",
        "24-31,88-95",
        "32-39,96-103",
        "40-47,104-111",
        "48-55,112-119",
        "56-63,120-127",
    ]


def test_a_process_across_sockets_gets_both_sides_and_no_numa_node() -> None:
    placement = planned("0-7:0", inventory(BRIDGED)).placement("rollout", 0)
    assert (placement.link, placement.numa_node, placement.cpus) == ("SYS", None, "0-127")


def test_worker_env_carries_the_cpu_set() -> None:
    result = planned("0-7:0-1", inventory(SWITCHES))  # both processes span both sockets
    assert result.env("rollout", 0)["PLACEMENT_CPU_AFFINITY"] == "0-63"
    assert result.env("rollout", 1)["PLACEMENT_CPU_AFFINITY"] == "64-127"
    assert "PLACEMENT_CPU_AFFINITY" not in planned("0-7", Inventory.uniform(1, 8)).env("rollout", 0)


def test_node_placed_processes_take_the_numa_node_they_ask_for() -> None:
    extra = {"agent": {"node_group": "node", "placement": "0:0-1", "numa_node": 1}}
    result = planned("0-7", inventory(BRIDGED), extra=extra)
    agents = result.placements("agent")
    assert [(p.numa_node, p.cpus) for p in agents] == [
        (1, "32-47,96-111"),
        (1, "48-63,112-127"),
    ]


def test_numa_node_the_node_does_not_have_is_an_error() -> None:
    extra = {"agent": {"node_group": "node", "placement": "0", "numa_node": 3}}
    with pytest.raises(PlacementRuleError, match="no CPUs of NUMA node 3"):
        planned("0-7", inventory(BRIDGED), extra=extra)


def test_numa_node_without_snapshots_warns() -> None:
    extra = {"agent": {"node_group": "node", "placement": "0", "numa_node": 0}}
    result = planned("0-7", Inventory.uniform(1, 8), extra=extra)
    assert result.placement("agent", 0).cpus is None
    assert (
        "numa_node 0: nothing is known about the NUMA layout of node(s) 0" in (result.warnings[0])
    )


def test_numa_node_on_accelerator_processes_is_an_error() -> None:
    with pytest.raises(PlacementRuleError, match="numa_node is for node and hardware"):
        planned({"placement": "0-7", "numa_node": 0}, inventory(BRIDGED))


def test_no_topology_leaves_the_fields_empty() -> None:
    placement = planned("0-7:0-3", Inventory.uniform(1, 8)).placement("rollout", 0)
    assert (placement.link, placement.numa_node, placement.cpus) == (None, None, None)


# ---------------------------------------------------------------- busy accelerators


def busy_snapshot() -> dict[str, Any]:
    document = json.loads(SWITCHES.read_text())
    document["accelerators"][3]["memory_used_bytes"] = 3 << 30
    document["accelerators"][3]["processes"] = [
        {"pid": 4242, "used_memory_bytes": 2 << 30},
        {"pid": 77, "used_memory_bytes": None},
    ]
    return document


def test_planned_busy_accelerators_are_warned_about() -> None:
    result = planned("0-7:0-3", inventory_from_snapshots([busy_snapshot()]))
    assert result.warnings == (
        "node 0 (l40s-4sw) accelerator 3 already runs 2 processes: pid 4242 (2.0 GiB), "
        "pid 77; 3.0 GiB in use (planned for rollout)",
    )


def test_busy_accelerators_the_plan_leaves_free_are_not_warned_about() -> None:
    assert planned("0-1", inventory_from_snapshots([busy_snapshot()])).warnings == ()


def test_busy_fields_are_optional_and_read_when_present() -> None:
    node = node_from_snapshot(busy_snapshot(), rank=0)
    assert node.accelerators[0].processes == ()
    assert node.accelerators[0].memory_used_bytes is None
    assert [p.pid for p in node.accelerators[3].processes] == [4242, 77]


def test_a_malformed_process_entry_names_the_field() -> None:
    document = busy_snapshot()
    document["accelerators"][3]["processes"] = [{"pid": -1}]
    with pytest.raises(InventoryError, match=r"accelerators\[3\]\.processes\[0\]\.pid"):
        node_from_snapshot(document, rank=0)


# ---------------------------------------------------------------- snapshot links


@pytest.mark.parametrize(
    ("link", "message"),
    [
        ([1, 0, "PIX"], "expected a pair a < b"),
        ([0, 9, "PIX"], "accelerator 9 is not in the snapshot"),
        ([0, 1, 5], "links"),
    ],
)
def test_malformed_links_name_the_field(link: list[object], message: str) -> None:
    document = json.loads(SWITCHES.read_text())
    document["links"][0] = link
    with pytest.raises(InventoryError, match=message):
        node_from_snapshot(document, rank=0)


def test_a_malformed_cpu_affinity_names_the_field() -> None:
    document = json.loads(SWITCHES.read_text())
    document["accelerators"][2]["cpu_affinity"] = "0-x"
    with pytest.raises(InventoryError, match=r"accelerators\[2\]\.cpu_affinity"):
        node_from_snapshot(document, rank=0)


# ---------------------------------------------------------------- rendering


def test_json_carries_link_numa_and_cpus_with_topology() -> None:
    data = plan_to_dict(planned({"placement": "0-7:0-3", "topology": "best"}, inventory(BRIDGED)))
    first = data["components"]["rollout"][0]
    assert (first["link"], first["numa_node"], first["cpus"]) == ("NV4", 0, "0-15,64-79")
    assert data["nodes"][0]["links"][0] == [0, 1, "PIX"]


def test_json_has_no_topology_keys_without_topology() -> None:
    data = plan_to_dict(planned("0-7:0-3", Inventory.uniform(1, 8)), env=False)
    assert "link" not in data["components"]["rollout"][0]
    assert "links" not in data["nodes"][0]


def test_table_shows_link_numa_and_cpus_columns() -> None:
    table = render_table(planned("0-7:0-1", inventory(SWITCHES)))
    assert "LINK  NUMA  CPUS" in table
    assert "SYS   -     0-127" in table


def test_a_folded_row_says_how_many_cpus_each_process_holds() -> None:
    table = render_table(planned("0-7:0-1", inventory(SWITCHES)))
    assert "SYS   -     0-127 (64 each)" in table


def test_an_unfolded_row_shows_its_own_cpus() -> None:
    table = render_table(planned("0-7:0-1", inventory(SWITCHES)), fold=False)
    assert "SYS   -     0-63\n" in table
    assert "each)" not in table


def test_map_marks_processes_across_sockets() -> None:
    text = render_map(planned("0-7:0-1", inventory(SWITCHES)))
    assert "r0!" in text
    assert "'!' marks processes whose accelerators meet across sockets" in text
    best = render_map(planned({"placement": "0-7:0-1", "topology": "best"}, inventory(SWITCHES)))
    assert "!" not in best


# ---------------------------------------------------------------- properties

LEVELS = ["SYS", "NODE", "PHB", "PXB", "PIX", "NV2", "NV4", "NV12"]


@st.composite
def clusters(draw: st.DrawFn) -> tuple[Inventory, str]:
    size = draw(st.sampled_from([2, 4]))
    per_node = size * draw(st.integers(1, 8 // size))
    nodes = draw(st.integers(1, 3))
    docs = []
    for rank in range(nodes):
        labels = draw(st.lists(st.sampled_from(LEVELS), min_size=1, max_size=3, unique=True))
        docs.append(
            {
                "schema": 1,
                "node_rank": rank,
                "accelerators": [{"index": i, "type": "nvidia"} for i in range(per_node)],
                "links": [
                    [a, b, draw(st.sampled_from(labels))]
                    for a, b in combinations(range(per_node), 2)
                ],
            }
        )
    total = per_node * nodes
    return inventory_from_snapshots(docs), f"0-{total - 1}:0-{total // size - 1}"


@settings(max_examples=60, deadline=None)
@given(clusters())
def test_best_never_worsens_a_node_and_keeps_counts_and_order(
    cluster: tuple[Inventory, str],
) -> None:
    inv, rule = cluster
    loose = planned(rule, inv).placements("rollout")
    best = planned({"placement": rule, "topology": "best"}, inv).placements("rollout")
    assert Counter(p.node_rank for p in best) == Counter(p.node_rank for p in loose)
    assert [p.node_rank for p in best] == sorted(p.node_rank for p in best)
    for node_rank in {p.node_rank for p in loose}:
        mine = sorted(_topology.link_score(p.link) for p in best if p.node_rank == node_rank)
        theirs = sorted(_topology.link_score(p.link) for p in loose if p.node_rank == node_rank)
        assert mine[0] >= theirs[0]  # the node's worst process link
        assert mine >= theirs  # worst first, then the next worst, ...
    again = planned({"placement": rule, "topology": "best"}, inv).placements("rollout")
    assert again == best


def test_svg_tooltips_name_the_link_and_the_cpus() -> None:
    from placement_core.render import render_svg

    svg = render_svg(planned({"placement": "0-7:0-3", "topology": "best"}, inventory(BRIDGED)))
    assert "rollout rank 0 (accelerators 0,2; link NV4)" in svg
    assert "PLACEMENT_CPU_AFFINITY=0-15,64-79" in svg
