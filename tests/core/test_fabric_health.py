"""NVLink fabric health: NVML's fields decoded, degraded nodes and domains in the plan,
``cluster.fabric_health``, and where a node's domain comes from."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from placement_core import InventoryError, PlacementRuleError, inventory_for, load_config, plan
from placement_core._fabric import check_health_mask, decode_health_mask
from placement_core._sources import inventory_from_snapshots
from placement_core.render import render_map

from .test_snapshot_fabric import CLUSTER, OTHER, tray

# nvml.h: NVML_GPU_FABRIC_HEALTH_MASK_<FIELD>_TRUE << NVML_GPU_FABRIC_HEALTH_MASK_SHIFT_<FIELD>
DEGRADED_BW = 1 << 0
ROUTE_RECOVERY = 1 << 2
ROUTE_UNHEALTHY = 1 << 4
ACCESS_TIMEOUT = 1 << 6
ALL_FALSE = 2 | 2 << 2 | 2 << 4 | 2 << 6 | 1 << 8  # a healthy v3 driver's answer


def racks(*degraded: tuple[int, dict[str, Any]], nodes: int = 6) -> list[dict[str, Any]]:
    """Snapshots of ``nodes`` 4-GPU trays: the first half in clique 1, the rest in 2; each
    ``(rank, change)`` changes GPU 1's fabric of that node."""
    out = []
    for rank in range(nodes):
        data = tray(4, clique_id=1 if rank < nodes // 2 else 2, health_mask=ALL_FALSE)
        data["node_rank"] = rank
        out.append(data)
    for rank, change in degraded:
        out[rank]["accelerators"][1]["fabric"].update(change)
    return out


def cluster(rules: dict[str, Any], nodes: int = 6, **section: Any) -> Any:
    return load_config({"cluster": {"num_nodes": nodes, "component_placement": rules, **section}})


# ------------------------------------------------------------------ decoding the mask


@pytest.mark.parametrize(
    ("mask", "fields"),
    [
        (0, ()),
        (ALL_FALSE, ()),
        (DEGRADED_BW, ("degraded bandwidth",)),
        (ROUTE_RECOVERY, ("route recovery",)),
        (ROUTE_UNHEALTHY, ("route unhealthy",)),
        (ACCESS_TIMEOUT, ("access timeout recovery",)),
        (2 << 8, ("incorrect configuration: incorrect system GUID",)),
        (3 << 8, ("incorrect configuration: incorrect chassis serial number",)),
        (4 << 8, ("incorrect configuration: no partition",)),
        (5 << 8, ("incorrect configuration: insufficient NVLinks",)),
        (DEGRADED_BW | ROUTE_UNHEALTHY, ("degraded bandwidth", "route unhealthy")),
    ],
)
def test_each_health_field_decodes_as_nvml_h_defines_it(mask: int, fields: tuple[str]) -> None:
    assert check_health_mask(mask) is None
    assert decode_health_mask(mask) == fields


@pytest.mark.parametrize("mask", [1 << 12, 1 << 31, 3, 3 << 6, 6 << 8, 15 << 8])
def test_a_mask_with_unknown_bits_or_values_does_not_decode(mask: int) -> None:
    assert "does not decode" in (check_health_mask(mask) or "")


def test_a_snapshot_with_an_unknown_health_bit_is_refused_naming_the_field() -> None:
    data = tray(4, health_mask=1 << 20)
    with pytest.raises(InventoryError) as caught:
        inventory_from_snapshots([data])
    message = str(caught.value)
    assert "accelerators[0].fabric.health_mask" in message
    assert "0x100000" in message
    assert "bits 20" in message


def test_a_snapshot_with_an_unknown_fabric_state_is_refused() -> None:
    with pytest.raises(InventoryError, match=r"fabric.state.*unknown fabric state 'done'"):
        inventory_from_snapshots([tray(4, state="done")])


# ------------------------------------------------------------------ every state in the plan


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"state": "not_started"}, "fabric state not_started"),
        ({"state": "in_progress"}, "fabric state in_progress"),
        ({"status": "error_unknown"}, "fabric status error_unknown"),
        ({"health_mask": ALL_FALSE & ~3 | DEGRADED_BW}, "degraded bandwidth"),
        ({"health_mask": ALL_FALSE & ~(3 << 2) | ROUTE_RECOVERY}, "route recovery"),
        ({"health_mask": ALL_FALSE & ~(3 << 4) | ROUTE_UNHEALTHY}, "route unhealthy"),
        ({"health_mask": ALL_FALSE & ~(3 << 6) | ACCESS_TIMEOUT}, "access timeout recovery"),
        ({"health_mask": 4 << 8}, "incorrect configuration: no partition"),
    ],
)
def test_every_degraded_state_is_named_in_the_warning(change: dict[str, Any], reason: str) -> None:
    inventory = inventory_from_snapshots(racks((4, change)))
    result = plan(cluster({"rollout": "0-23"}), inventory)
    warning = next(w for w in result.warnings if "degraded" in w)
    assert f"node 4 GPU 1: {reason}" in warning


def test_nvlink_group_on_a_degraded_rack_is_refused_by_default() -> None:
    inventory = inventory_from_snapshots(racks((4, {"health_mask": DEGRADED_BW})))
    with pytest.raises(PlacementRuleError) as caught:
        plan(cluster({"actor": {"placement": "0-23", "nvlink_group": 4}}), inventory)
    message = str(caught.value)
    assert caught.value.path == "cluster.component_placement.actor.placement"
    assert "node 4 GPU 1: degraded bandwidth" in message
    assert "fabric_health: warn" in message


def test_fabric_health_warn_plans_there_with_a_warning() -> None:
    inventory = inventory_from_snapshots(racks((4, {"health_mask": DEGRADED_BW})))
    config = cluster({"actor": {"placement": "0-23", "nvlink_group": 4}}, fabric_health="warn")
    warnings = plan(config, inventory).warnings
    assert any("'actor' runs on node 4" in w and "degraded bandwidth" in w for w in warnings)


def test_fabric_health_ignore_says_nothing() -> None:
    inventory = inventory_from_snapshots(racks((4, {"health_mask": DEGRADED_BW})))
    config = cluster({"actor": "0-23"}, fabric_health="ignore")
    assert not any("degraded" in w for w in plan(config, inventory).warnings)


def test_without_nvlink_group_the_default_is_a_warning() -> None:
    inventory = inventory_from_snapshots(racks((0, {"state": "in_progress"})))
    warnings = plan(cluster({"actor": "0-23"}), inventory).warnings
    assert any("node 0 GPU 1: fabric state in_progress" in w for w in warnings)


def test_all_with_nvlink_group_leaves_a_degraded_domain_free() -> None:
    inventory = inventory_from_snapshots(racks((4, {"health_mask": ROUTE_UNHEALTHY})))
    result = plan(cluster({"actor": {"placement": "all", "nvlink_group": 4}}), inventory)
    assert {p.node_rank for p in result.components["actor"]} == {0, 1, 2}
    [warning] = [w for w in result.warnings if "free" in w]
    assert f"leaves NVLink domain {CLUSTER}/2 free" in warning
    assert "node 4 GPU 1: route unhealthy" in warning


def test_all_with_nvlink_group_skips_every_node_of_the_degraded_domain() -> None:
    inventory = inventory_from_snapshots(racks((4, {"health_mask": ROUTE_UNHEALTHY})))
    result = plan(cluster({"actor": {"placement": "all", "nvlink_group": 8}}), inventory)
    assert {p.node_rank for p in result.components["actor"]} == {0, 1}
    assert any(f"leaves NVLink domain {CLUSTER}/2 free" in w for w in result.warnings)


def test_all_with_nvlink_group_uses_a_degraded_domain_when_no_healthy_one_fits() -> None:
    sick = {"health_mask": DEGRADED_BW}
    inventory = inventory_from_snapshots(racks((1, sick), (4, sick)))
    with pytest.raises(PlacementRuleError, match="degraded bandwidth"):
        plan(cluster({"actor": {"placement": "all", "nvlink_group": 8}}), inventory)


def test_the_map_marks_a_degraded_domain() -> None:
    inventory = inventory_from_snapshots(racks((4, {"health_mask": DEGRADED_BW})))
    text = render_map(plan(cluster({"actor": "0-7"}), inventory))
    band = next(line for line in text.splitlines() if f"{CLUSTER}/2" in line)
    assert "DEGRADED fabric: node 4 GPU 1: degraded bandwidth" in band
    healthy = next(line for line in text.splitlines() if f"{CLUSTER}/1" in line)
    assert "DEGRADED" not in healthy


# ------------------------------------------------------------------ where the domain comes from


def _declared(entries: list[dict[str, Any]], nodes: int = 6) -> Any:
    return load_config(
        {"cluster": {"num_nodes": nodes, "component_placement": {"a": 0}, "inventory": entries}}
    )


def test_a_config_domain_the_fabric_agrees_with_names_it() -> None:
    config = _declared(
        [
            {"node_ranks": "0-2", "accelerators": {"count": 4}, "nvlink_domain": "rack-a"},
            {"node_ranks": "3-5", "accelerators": {"count": 4}, "nvlink_domain": "rack-b"},
        ]
    )
    inventory = inventory_for(config, snapshots=racks())
    assert [n.nvlink_domain for n in inventory.nodes] == ["rack-a"] * 3 + ["rack-b"] * 3
    assert not inventory.warnings


def test_a_config_domain_the_fabric_contradicts_is_named_in_a_warning() -> None:
    config = _declared(
        [{"node_ranks": "0-5", "accelerators": {"count": 4}, "nvlink_domain": "rack-a"}]
    )
    inventory = inventory_for(config, snapshots=racks())
    assert [n.nvlink_domain for n in inventory.nodes] == [f"{CLUSTER}/1"] * 3 + [f"{CLUSTER}/2"] * 3
    [warning] = inventory.warnings
    assert "nvlink_domain rack-a disagrees with the NVLink fabric" in warning
    assert f"nodes 0-2 in {CLUSTER}/1; nodes 3-5 in {CLUSTER}/2" in warning


def test_a_tray_still_registering_gets_no_domain_not_even_the_configs() -> None:
    config = _declared(
        [{"node_ranks": "0-2", "accelerators": {"count": 4}, "nvlink_domain": "rack-a"}], 3
    )
    snapshots = racks((1, {"state": "in_progress"}), nodes=3)
    inventory = inventory_for(config, snapshots=snapshots[:3])
    assert inventory.nodes[1].nvlink_domain is None
    assert any(
        "node 1: the inventory entry's nvlink_domain rack-a is not used" in w
        for w in inventory.warnings
    )


def test_a_tray_in_two_cliques_is_a_domain_of_its_own_with_each_cliques_gpus() -> None:
    data = tray(4)
    data["accelerators"][2]["fabric"]["clique_id"] = 7
    data["accelerators"][3]["fabric"]["clique_id"] = 7
    inventory = inventory_from_snapshots([data])
    assert inventory.nodes[0].nvlink_domain is None
    assert (
        f"accelerators 0-1 in {CLUSTER}/1, accelerators 2-3 in {CLUSTER}/7" in inventory.warnings[0]
    )


def test_an_all_zero_cluster_uuid_is_no_domain_and_the_config_names_one() -> None:
    zero = "00000000-0000-0000-0000-000000000000"
    config = _declared(
        [{"node_ranks": 0, "accelerators": {"count": 4}, "nvlink_domain": "rack-a"}], 1
    )
    inventory = inventory_for(config, snapshots=[tray(4, cluster_uuid=zero)])
    assert inventory.nodes[0].nvlink_domain == "rack-a"
    alone = inventory_from_snapshots([tray(4, cluster_uuid=zero)])
    assert alone.nodes[0].nvlink_domain is None


def test_two_clusters_are_two_domains() -> None:
    first, second = tray(4), tray(4, cluster_uuid=OTHER)
    second = copy.deepcopy(second)
    inventory = inventory_from_snapshots([first, second])
    assert inventory.nodes[0].nvlink_domain != inventory.nodes[1].nvlink_domain


@settings(max_examples=60, deadline=None)
@given(
    cliques=st.lists(st.integers(1, 3), min_size=2, max_size=6),
    names=st.lists(st.sampled_from(["rack-a", "rack-b", "rack-c"]), min_size=6, max_size=6),
)
def test_the_fabric_always_decides_which_nodes_share_a_domain(
    cliques: list[int], names: list[str]
) -> None:
    # Whatever the config's entries say, two nodes share a domain exactly when their
    # fabric puts them in one clique; the config's name is used only where it agrees.
    count = len(cliques)
    snapshots = []
    for rank, clique in enumerate(cliques):
        data = tray(4, clique_id=clique)
        data["node_rank"] = rank
        snapshots.append(data)
    entries = [
        {"node_ranks": str(rank), "accelerators": {"count": 4}, "nvlink_domain": names[rank]}
        for rank in range(count)
    ]
    config = load_config(
        {"cluster": {"num_nodes": count, "component_placement": {"a": 0}, "inventory": entries}}
    )
    inventory = inventory_for(config, snapshots=snapshots)
    domains = [node.nvlink_domain for node in inventory.nodes]
    for a in range(count):
        for b in range(count):
            assert (domains[a] == domains[b]) == (cliques[a] == cliques[b])
    agree = all(
        (names[a] == names[b]) == (cliques[a] == cliques[b])
        for a in range(count)
        for b in range(count)
    )
    assert (domains == names[:count]) == agree
    assert bool(inventory.warnings) == (not agree)


def test_the_svg_and_html_bands_mark_a_degraded_domain() -> None:
    from placement_core.render import render_html, render_svg

    inventory = inventory_from_snapshots(racks((4, {"health_mask": DEGRADED_BW})))
    result = plan(cluster({"actor": "0-7"}), inventory)
    for text in (render_svg(result), render_html(result)):
        assert "DEGRADED fabric: node 4 GPU 1: degraded bandwidth" in text
