"""NVLink domains: declared by inventories, kept by nvlink_group, ordered by node_order."""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from placement_core import (
    ConfigError,
    Inventory,
    PlacementRuleError,
    derive_model_parallel,
    inventory_for,
    load_config,
    order_by_nvlink_domain,
    plan,
)
from placement_core._cli import main
from placement_core.render import plan_to_dict, render_html, render_map, render_svg


def racks(domains: Sequence[str | None], per_node: int = 4) -> Inventory:
    """One node per entry of ``domains`` (None: no domain), ``per_node`` GPUs each."""
    base = Inventory.uniform(len(domains), per_node)
    return Inventory(
        tuple(
            dataclasses.replace(node, nvlink_domain=domain)
            for node, domain in zip(base.nodes, domains, strict=True)
        )
    )


def config(rule: Any, num_nodes: int, **section: Any) -> dict[str, Any]:
    return {"cluster": {"num_nodes": num_nodes, "component_placement": {"actor": rule}, **section}}


def domains_of_groups(result: Any, size: int, component: str = "actor") -> list[set[str | None]]:
    nodes = result.inventory.nodes
    placements = result.components[component]
    return [
        {nodes[p.node_rank].nvlink_domain for p in placements[i : i + size]}
        for i in range(0, len(placements), size)
    ]


def rule_error(rule: Any, inventory: Inventory, **section: Any) -> PlacementRuleError:
    with pytest.raises(PlacementRuleError) as caught:
        plan(config(rule, inventory.num_nodes, **section), inventory)
    return caught.value


# ----------------------------------------------------------------------------- config


def test_an_inventory_entry_declares_its_nodes_domain() -> None:
    loaded = load_config(
        config(
            "0-7",
            3,
            inventory=[
                {"node_ranks": "0-1", "accelerators": {"count": 4}, "nvlink_domain": "rack-a"},
                {"node_ranks": 2, "accelerators": {"count": 4}},
            ],
        )
    )
    assert [n.nvlink_domain for n in inventory_for(loaded).nodes] == ["rack-a", "rack-a", None]


def test_a_domain_written_as_a_yaml_int_is_its_text() -> None:
    loaded = load_config(
        config(
            "0-3",
            1,
            inventory=[{"node_ranks": 0, "accelerators": {"count": 4}, "nvlink_domain": 7}],
        )
    )
    assert loaded.inventory[0].nvlink_domain == "7"


@pytest.mark.parametrize("bad", ["", " rack", [], 1.5])
def test_a_bad_domain_name_is_located(bad: object) -> None:
    entry = {"node_ranks": 0, "accelerators": {"count": 4}, "nvlink_domain": bad}
    with pytest.raises(ConfigError) as caught:
        load_config(config("0-3", 1, inventory=[entry]))
    (problem,) = caught.value.problems
    assert problem.path == "cluster.inventory[0].nvlink_domain"


@pytest.mark.parametrize("bad", [0, -8, "8", "some", True, 2.0, [8]])
def test_a_bad_nvlink_group_names_the_field_and_what_is_allowed(bad: object) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(config({"placement": "0-7", "nvlink_group": bad}, 2))
    (problem,) = caught.value.problems
    assert problem.path == "cluster.component_placement.actor.nvlink_group"
    assert "an int >= 1" in problem.message
    assert "'all'" in problem.message


def test_nvlink_group_takes_all() -> None:
    rule = load_config(config({"placement": "0-7", "nvlink_group": "all"}, 2)).components()
    assert rule["actor"].nvlink_group == "all"


def test_node_order_takes_only_its_two_values() -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(config("0-7", 2, node_order="rack"))
    (problem,) = caught.value.problems
    assert problem.path == "cluster.node_order"
    assert "'inventory'" in problem.message
    assert "'nvlink_domain'" in problem.message


def test_a_snapshot_without_a_domain_takes_its_inventory_entrys() -> None:
    snapshot = {"schema": 1, "accelerators": [{"index": 0, "type": "nvidia"}]}
    loaded = load_config(
        config(
            "0",
            1,
            inventory=[{"node_ranks": 0, "accelerators": {"count": 1}, "nvlink_domain": "r"}],
        )
    )
    assert inventory_for(loaded, snapshots=[snapshot]).nodes[0].nvlink_domain == "r"


# ----------------------------------------------------------------------------- checks


def test_explicit_ranks_that_keep_groups_in_a_domain_plan() -> None:
    result = plan(config({"placement": "0-15", "nvlink_group": 8}, 4), racks("aabb"))
    assert domains_of_groups(result, 8) == [{"a"}, {"b"}]


def test_a_group_across_two_domains_is_a_located_error_naming_ranks_nodes_and_domains() -> None:
    error = rule_error({"placement": "4-19", "nvlink_group": 8}, racks("aabbb"))
    assert error.path == "cluster.component_placement.actor.nvlink_group"
    assert "processes 0-7 of 'actor' must share one NVLink domain (nvlink_group: 8)" in (
        error.reason
    )
    assert "node 1 (domain a) and node 2 (domain b)" in error.reason
    assert "nvlink_group sizes that fit this placement: 1, 2, 4" in error.reason


def test_a_group_size_that_does_not_divide_the_processes_is_an_error() -> None:
    error = rule_error({"placement": "0-11", "nvlink_group": 8}, racks("aaa"))
    assert error.path == "cluster.component_placement.actor.nvlink_group"
    assert "nvlink_group: 8 does not divide the 12 processes" in error.reason
    assert "sizes that fit: 1, 2, 3, 4, 6, 12" in error.reason


def test_nodes_without_a_domain_are_each_a_domain_of_their_own() -> None:
    error = rule_error({"placement": "0-7", "nvlink_group": 8}, racks([None, None]))
    assert "node 0 (no domain) and node 1 (no domain)" in error.reason
    result = plan(config({"placement": "0-7", "nvlink_group": 4}, 2), racks([None, None]))
    assert len(result.components["actor"]) == 8


def test_nvlink_group_all_keeps_the_whole_component_in_one_domain() -> None:
    assert plan(config({"placement": "0-7", "nvlink_group": "all"}, 3), racks("aab"))
    error = rule_error({"placement": "0-11", "nvlink_group": "all"}, racks("aab"))
    assert "processes 0-11 of 'actor'" in error.reason


def test_the_error_suggests_node_order_only_when_renumbering_would_move_nodes() -> None:
    error = rule_error({"placement": "0-11", "nvlink_group": 12}, racks("aba"))
    assert "cluster.node_order: nvlink_domain numbers each domain's nodes" in error.reason
    ordered = rule_error({"placement": "0-11", "nvlink_group": 12}, racks("aab"))
    assert "node_order" not in ordered.reason


def test_one_process_groups_never_fail() -> None:
    assert plan(config({"placement": "all", "nvlink_group": 1}, 3), racks(["a", None, "b"]))


# ----------------------------------------------------------------------------- all


def test_all_places_whole_groups_domain_by_domain_over_unequal_domains() -> None:
    inventory = racks("aaabbc")  # 12, 8 and 4 GPUs
    result = plan(config({"placement": "all", "nvlink_group": 8}, 6), inventory)
    assert domains_of_groups(result, 8) == [{"a"}, {"b"}]
    ninth = result.components["actor"][8]
    assert (ninth.node_rank, ninth.hardware_ranks) == (3, (0,))  # node 2's GPUs stay free
    (warning,) = result.warnings
    assert "leaves 8 resource(s)" in warning
    assert "no whole group" in warning


def test_all_with_a_group_no_domain_can_hold_is_an_error_naming_the_largest() -> None:
    error = rule_error({"placement": "all", "nvlink_group": 16}, racks("aaabb"))
    assert error.path == "cluster.component_placement.actor.placement"
    assert "the largest domain of node group 'cluster' (20 accelerators) holds 12" in error.reason


def test_all_without_domains_to_split_is_planned_as_written() -> None:
    result = plan(config({"placement": "all", "nvlink_group": 8}, 4), racks("aaaa"))
    assert len(result.components["actor"]) == 16
    assert not result.warnings


# ----------------------------------------------------------------------------- node order


def test_node_order_numbers_each_domains_nodes_consecutively_keeping_identities() -> None:
    inventory = order_by_nvlink_domain(racks(["a", "b", None, "a", "b"]))
    assert [(n.rank, n.node_id, n.nvlink_domain) for n in inventory.nodes] == [
        (0, "node-0", "a"),
        (1, "node-3", "a"),
        (2, "node-1", "b"),
        (3, "node-4", "b"),
        (4, "node-2", None),
    ]


def test_ordering_an_ordered_inventory_returns_it() -> None:
    inventory = racks(["a", "a", None, "b"])
    assert order_by_nvlink_domain(inventory) is inventory


def test_the_plan_renumbers_only_when_the_config_asks() -> None:
    inventory = racks("aba")
    rule = {"placement": "0-7", "nvlink_group": 8}
    result = plan(config(rule, 3, node_order="nvlink_domain"), inventory)
    assert [n.node_id for n in result.inventory.nodes] == ["node-0", "node-2", "node-1"]
    assert [p.node_id for p in result.components["actor"]] == ["node-0"] * 4 + ["node-2"] * 4
    assert plan(config("0-7", 3), inventory).inventory is inventory


def test_a_rank_range_is_one_rack_after_renumbering() -> None:
    inventory = racks(["r1", "r2"] * 18)
    section = {"node_order": "nvlink_domain"}
    result = plan(config({"placement": "0-71", "nvlink_group": "all"}, 36, **section), inventory)
    assert domains_of_groups(result, 72) == [{"r1"}]


# ----------------------------------------------------------------------------- views


def test_json_gives_each_placement_and_node_its_domain() -> None:
    data = plan_to_dict(plan(config("0-7", 2), racks(["a", None])))
    assert [p["nvlink_domain"] for p in data["components"]["actor"]] == ["a"] * 4 + [None] * 4
    assert [n["nvlink_domain"] for n in data["nodes"]] == ["a", None]


def test_json_without_domains_keeps_its_keys() -> None:
    data = plan_to_dict(plan(config("0-7", 2), Inventory.uniform(2, 4)))
    assert "nvlink_domain" not in data["components"]["actor"][0]
    assert "nvlink_domain" not in data["nodes"][0]


def test_the_map_draws_a_band_per_domain_and_folds_inside_it() -> None:
    text = render_map(plan(config("all", 8), racks("aaaabbbb")))
    lines = text.splitlines()
    assert "── NVLink domain a: nodes 0-3 ──" in lines
    assert "── NVLink domain b: nodes 4-7 ──" in lines
    assert "⋮     nodes 1-2: same layout, ranks continue" in lines
    assert "⋮     nodes 5-6: same layout, ranks continue" in lines
    band_b = lines.index("── NVLink domain b: nodes 4-7 ──")
    assert lines[band_b - 1].startswith("3 ")
    assert lines[band_b + 1].startswith("4 ")


def test_the_map_names_nodes_renumbered_by_domain() -> None:
    text = render_map(plan(config("0-3", 3, node_order="nvlink_domain"), racks("aba")))
    assert (
        "nodes numbered by NVLink domain (cluster.node_order: nvlink_domain): "
        "1 is node-2, 2 is node-1"
    ) in text
    assert "── NVLink domain a: nodes 0-1 ──" in text


def test_the_map_without_domains_has_no_bands() -> None:
    assert "NVLink" not in render_map(plan(config("all", 2), Inventory.uniform(2, 4)))


def test_the_svg_draws_a_band_per_domain() -> None:
    svg = render_svg(plan(config("all", 3), racks(["a", "a", None])))
    assert svg.count('<g class="domain">') == 2
    assert "NVLink domain a: nodes 0-1" in svg
    assert "no NVLink domain: node 2 (each a domain of its own)" in svg


def test_the_html_page_draws_the_very_bands_of_the_svg() -> None:
    the_plan = plan(config("all", 3), racks(["a", "a", None]))

    def bands(text: str) -> list[str]:
        """Each band's markup, its height on the page left out (the page has no title)."""
        found = re.findall(r'<g class="domain">.*?</g>', text)
        return [re.sub(r' y\d?="[^"]*"', "", band) for band in found]

    assert len(bands(render_svg(the_plan))) == 2
    assert bands(render_html(the_plan)) == bands(render_svg(the_plan))


# ----------------------------------------------------------------------------- RLinf


def job(**actor_model: int) -> dict[str, Any]:
    return {
        "cluster": {
            "num_nodes": 4,
            "component_placement": {"actor,rollout,reward": "all"},
            "inventory": [
                {"node_ranks": "0-1", "accelerators": {"count": 4}, "nvlink_domain": "a"},
                {"node_ranks": "2-3", "accelerators": {"count": 4}, "nvlink_domain": "b"},
            ],
        },
        "actor": {"model": actor_model},
        "rollout": {"tensor_parallel_size": 2},
    }


def test_model_parallel_groups_are_tensor_times_expert_when_asked() -> None:
    document = job(tensor_model_parallel_size=4, expert_model_parallel_size=2)
    rules = derive_model_parallel(document, nvlink_groups=True).config.components()
    assert rules["actor"].nvlink_group == 8
    assert rules["rollout"].nvlink_group is None
    assert rules["reward"].nvlink_group is None


def test_model_parallel_groups_are_not_derived_unless_asked() -> None:
    document = job(tensor_model_parallel_size=4, expert_model_parallel_size=2)
    assert derive_model_parallel(document).config.components()["actor"].nvlink_group is None


def test_a_derived_group_wider_than_a_domain_fails_the_plan() -> None:
    document = job(tensor_model_parallel_size=4, expert_model_parallel_size=4)
    layout = derive_model_parallel(document, nvlink_groups=True)
    with pytest.raises(PlacementRuleError) as caught:
        plan(layout.config)
    assert caught.value.path == "cluster.component_placement.actor.nvlink_group"


def test_the_cli_refuses_nvlink_groups_without_model_parallel(
    capsys: pytest.CaptureFixture[str], write_file: Any
) -> None:
    path = write_file("job.yaml", json.dumps(job()))
    with pytest.raises(SystemExit) as exit_:
        main(["plan", str(path), "--nvlink-groups"])
    assert exit_.value.code == 2
    assert "--nvlink-groups" in capsys.readouterr().err


def test_the_cli_plans_a_model_parallel_job_with_nvlink_groups(
    capsys: pytest.CaptureFixture[str], write_file: Any
) -> None:
    document = job(tensor_model_parallel_size=4, expert_model_parallel_size=2)
    path = write_file("job.yaml", json.dumps(document))
    assert main(["plan", str(path), "-m", "--nvlink-groups", "-f", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert {p["nvlink_domain"] for p in data["components"]["actor"][:8]} == {"a"}


# ----------------------------------------------------------------------------- properties

domain_lists = st.lists(st.sampled_from(["a", "b", "c", None]), min_size=1, max_size=24)


@settings(max_examples=60, deadline=None)
@given(domains=domain_lists)
def test_ordering_makes_every_domain_consecutive_and_keeps_every_node(
    domains: list[str | None],
) -> None:
    ordered = order_by_nvlink_domain(racks(domains))
    named = [n.nvlink_domain for n in ordered.nodes if n.nvlink_domain is not None]
    assert all(d not in named[i + 1 :] for i, d in enumerate(named) if named[i + 1 : i + 2] != [d])
    assert sorted(n.node_id for n in ordered.nodes) == sorted(
        f"node-{r}" for r in range(len(domains))
    )
    assert order_by_nvlink_domain(ordered) is ordered


@settings(max_examples=60, deadline=None)
@given(domains=domain_lists, size=st.sampled_from([1, 2, 4, 8, 12]))
def test_all_with_nvlink_group_keeps_every_group_in_one_domain(
    domains: list[str | None], size: int
) -> None:
    rule = config(
        {"placement": "all", "nvlink_group": size}, len(domains), node_order="nvlink_domain"
    )
    largest = max(domains.count(d) if d is not None else 1 for d in domains) * 4
    if largest < size:
        with pytest.raises(PlacementRuleError, match=f"holds {largest}:"):
            plan(rule, racks(domains))
        return
    result = plan(rule, racks(domains))
    nodes = result.inventory.nodes
    placements = result.components["actor"]
    assert len(placements) % size == 0
    for i in range(0, len(placements), size):
        keys = {
            nodes[p.node_rank].nvlink_domain or f"alone-{p.node_rank}"
            for p in placements[i : i + size]
        }
        assert len(keys) == 1
