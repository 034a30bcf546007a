"""Spares by NVLink domain: replan picks a spare in the lost node's domain first, then
the domain of the rest of its groups, then any (with a warning); spare_nodes per domain;
and the replan regressions of the "nothing silent" round (issue 30 items 4, 6, 7, 8, 11)."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from placement_core import (
    Inventory,
    NoSpareError,
    PlacementRuleError,
    load_config,
    plan,
    replan,
)
from placement_core._sources import inventory_from_snapshots
from placement_core.render import render_json, render_table

from .test_cli_spares import Run, run

Write = Callable[[str, str], Path]
__all__ = ["run"]  # the fixture, shared with test_cli_spares

SWITCHES = Path(__file__).parent / "data" / "snapshot_pcie_two_switches.json"


def _machine(document: dict[str, Any], name: str) -> dict[str, Any]:
    """A copy of a snapshot as another machine's: the same hardware, GPUs of its own."""
    other = copy.deepcopy(document)
    for accelerator in other["accelerators"]:
        accelerator["uuid"] += f"-{name}"
    return other


def racks(
    rules: dict[str, Any], spares: Any = "2,5", racks: str = "0-2:3-5", nodes: int = 6, **more: Any
) -> Any:
    """Two racks of 4-GPU trays, as the issue's generated inputs: a (0-2) and b (3-5)."""
    a, b = racks.split(":")
    inventory = [
        {"node_ranks": a, "accelerators": {"count": 4}, "nvlink_domain": "rack-a"},
        {"node_ranks": b, "accelerators": {"count": 4}, "nvlink_domain": "rack-b"},
    ]
    section = {
        "num_nodes": nodes,
        "spare_nodes": spares,
        "component_placement": rules,
        "inventory": inventory,
        **more,
    }
    return plan({"cluster": section})


GROUPED = {"actor": {"placement": "0-7,12-19", "nvlink_group": 8}}


def test_a_lost_node_takes_the_spare_of_its_own_domain() -> None:
    result = replan(racks(GROUPED), 3)
    (move,) = result.moves
    assert (move.spare, move.domain) == (5, "same domain")
    assert result.plan.config.spare_nodes == (2,)
    assert not any("span" in w for w in result.plan.warnings)


def test_the_moves_say_where_the_spare_lies() -> None:
    assert replan(racks(GROUPED), 3).lines() == [
        "actor 8-11: node 3 -> node 5 (spare in the same NVLink domain)"
    ]


def test_the_domain_of_the_rest_of_the_group_comes_next() -> None:
    # Rack b has no spare; node 1 (rack a) is lost and its group lives in rack a with a
    # spare there: same domain. Lose the rack-a spare first, and a second spare in rack b
    # is only "other domain".
    rules = {"actor": {"placement": "0-7", "nvlink_group": 8}}
    result = replan(racks(rules, spares="2,4-5"), "1")
    assert result.moves[0].spare == 2
    assert result.moves[0].domain == "same domain"


def test_a_group_on_the_lost_node_alone_still_takes_its_own_domains_spare() -> None:
    inventory = [
        {"node_ranks": "0-1", "accelerators": {"count": 4}, "nvlink_domain": "rack-a"},
        {"node_ranks": "2", "accelerators": {"count": 4}},
        {"node_ranks": "3-4", "accelerators": {"count": 4}, "nvlink_domain": "rack-b"},
        {"node_ranks": "5", "accelerators": {"count": 4}, "nvlink_domain": "rack-a"},
    ]
    config = {
        "cluster": {
            "num_nodes": 6,
            "spare_nodes": "3,5",
            "fabric_health": "warn",
            "component_placement": {"actor": {"placement": "0-7", "nvlink_group": 4}},
            "inventory": inventory,
        }
    }
    # Lost node 0 (rack a): its group is on node 0 alone, so rack a's spare 5 is "same".
    assert replan(plan(config), 0).moves[0].domain == "same domain"


def test_no_spare_in_the_domain_moves_anyway_and_names_the_groups_now_spanning() -> None:
    result = replan(racks(GROUPED, spares="2"), 3)
    (move,) = result.moves
    assert (move.spare, move.domain) == (2, "other domain")
    [warning] = [w for w in result.plan.warnings if "span" in w]
    assert "node 3 -> spare 2" in warning
    assert "group actor 8-15 now span" in warning


def test_nvlink_on_loss_refuse_makes_it_an_error_that_recovery_types() -> None:
    # NoSpareError: placement-ray's recover() raises it as NoSpareNodeError, nothing moved.
    with pytest.raises(NoSpareError) as caught:
        replan(racks(GROUPED, spares="2", nvlink_on_loss="refuse"), 3)
    assert caught.value.path == "cluster.nvlink_on_loss"
    assert caught.value.lost == (3,)
    assert "actor 8-15" in str(caught.value)


def test_two_lost_nodes_of_one_group_follow_each_other() -> None:
    # Both rack-b nodes of actor 8-15 are lost; rack b has one spare: the first takes it,
    # the second must go elsewhere and the group is named.
    rules = {"actor": {"placement": "0-7,12-19", "nvlink_group": 8}}
    result = replan(racks(rules, spares="2,5", racks="0-2:3-5"), "3-4")
    assert [(m.lost, m.spare) for m in result.moves] == [(3, 5), (4, 2)]
    assert result.moves[1].domain == "other domain"


def test_a_spare_without_nvlink_between_the_gpus_is_no_match_for_topology_nvlink() -> None:
    nvlinked = json.loads(SWITCHES.read_text())
    nvlinked["links"] = [[a, b, "NV12"] for a in range(8) for b in range(a + 1, 8)]
    pcie = json.loads(SWITCHES.read_text())
    inventory = inventory_from_snapshots([nvlinked, _machine(nvlinked, "b"), _machine(pcie, "c")])
    config = {
        "cluster": {
            "num_nodes": 3,
            "spare_nodes": "2",
            "component_placement": {"engine": {"placement": "0-7:0-1", "topology": "nvlink"}},
        }
    }
    before = plan(config, inventory)
    with pytest.raises(NoSpareError):
        replan(before, 0)
    config["cluster"]["spare_nodes"] = "1-2"
    config["cluster"]["component_placement"] = {
        "engine": {"placement": "0-7:0-1", "topology": "nvlink"}
    }
    assert replan(plan(config, inventory), 0).moves[0].spare == 1


# ------------------------------------------------------------------ spare_nodes per domain


def test_spare_nodes_per_domain_keep_each_domains_last_nodes() -> None:
    result = racks({"actor": "0-7,12-15"}, spares={"rack-a": 1, "rack-b": 2})
    assert result.config.spare_nodes == (2, 4, 5)


def test_spares_per_domain_with_placement_all_are_left_out_of_the_groups() -> None:
    rules = {"actor": {"placement": "all", "nvlink_group": 4}}
    result = racks(rules, spares={"rack-a": 1, "rack-b": 1})
    assert {p.node_rank for p in result.components["actor"]} == {0, 1, 3, 4}
    assert replan(result, 4).moves[0].spare == 5


def test_a_spare_domain_that_does_not_exist_is_an_error_listing_those_that_do() -> None:
    with pytest.raises(PlacementRuleError) as caught:
        racks({"actor": "0-7"}, spares={"rack-c": 1})
    assert caught.value.path == "cluster.spare_nodes.rack-c"
    assert "rack-a, rack-b" in str(caught.value)
    assert "did you mean" in str(caught.value)


def test_more_spares_than_the_domain_has_is_an_error() -> None:
    with pytest.raises(PlacementRuleError, match="has 3 node"):
        racks({"actor": "0-3"}, spares={"rack-a": 4})


def test_a_spare_count_must_be_positive() -> None:
    with pytest.raises(Exception, match=r"spare_nodes.rack-a.*int >= 1"):
        load_config(
            {"cluster": {"num_nodes": 2, "spare_nodes": {"rack-a": 0}, "component_placement": {}}}
        )


# ------------------------------------------------------------------ issue 30


def test_losing_two_nodes_one_flag_each_loses_both(run: Run, write_file: Write) -> None:
    path = write_file(
        "spares.yaml",
        "cluster:\n  num_nodes: 4\n  spare_nodes: 2-3\n"
        "  component_placement: {actor: 0-15}\n"
        "  inventory: [{node_ranks: all, accelerators: {count: 8}}]\n",
    )
    code, out, _ = run("plan", str(path), "--lose", "0", "--lose", "1")
    assert code == 0
    assert "node 0 -> node 2" in out
    assert "node 1 -> node 3" in out


def test_lose_without_spares_says_the_config_declares_none(run: Run, write_file: Write) -> None:
    path = write_file(
        "nospares.yaml",
        "cluster:\n  num_nodes: 2\n  component_placement: {actor: 0-15}\n"
        "  inventory: [{node_ranks: all, accelerators: {count: 8}}]\n",
    )
    code, _, err = run("plan", str(path), "--lose", "1")
    assert code != 0
    assert "declares no spare nodes" in err
    assert "no spare left" not in err
    assert "--lose" in err


def test_json_with_many_spares_grows_with_spares_plus_used_nodes() -> None:
    nodes, spares = 2000, 400
    config = {
        "cluster": {
            "num_nodes": nodes,
            "spare_nodes": f"{nodes - spares}-{nodes - 1}",
            "component_placement": {"actor": f"0-{(nodes - spares) * 8 - 1}"},
        }
    }
    document = json.loads(render_json(plan(config, Inventory.uniform(nodes, 8))))
    [group] = document["spares"]["groups"]
    assert len(group["spares"]) == spares
    assert len(group["replaces"]) == nodes - spares


def test_a_second_replan_keeps_the_rules_numa_node_and_cpus() -> None:
    document = json.loads(SWITCHES.read_text())
    inventory = inventory_from_snapshots([_machine(document, str(i)) for i in range(3)])
    config = {
        "cluster": {
            "num_nodes": 3,
            "spare_nodes": "1-2",
            "component_placement": {
                "agent": {"node_group": "node", "placement": "0", "numa_node": 1}
            },
        }
    }
    before = plan(config, inventory)
    once = replan(before, 0).plan
    twice = replan(once, 1).plan
    combined = replan(before, "0-1").plan
    first = before.components["agent"][0]
    assert first.numa_node == 1
    assert (once.components["agent"][0].numa_node, once.components["agent"][0].cpus) == (
        1,
        first.cpus,
    )
    moved = twice.components["agent"][0]
    assert (moved.node_rank, moved.numa_node, moved.cpus) == (2, 1, first.cpus)
    assert combined.components["agent"][0].numa_node == 1


def _busy(document: dict[str, Any]) -> dict[str, Any]:
    busy = copy.deepcopy(document)
    busy["accelerators"][0]["processes"] = [{"pid": 4242, "used_memory_bytes": 2**30}]
    busy["accelerators"][0]["memory_used_bytes"] = 2**30
    return busy


def test_lose_onto_a_busy_spare_warns_that_it_already_runs() -> None:
    document = json.loads(SWITCHES.read_text())
    inventory = inventory_from_snapshots([document, _machine(_busy(document), "b")])
    config = {"cluster": {"num_nodes": 2, "spare_nodes": "1", "component_placement": {"a": "0-7"}}}
    after = replan(plan(config, inventory), 0).plan
    assert any("node 1" in w and "already runs" in w and "pid 4242" in w for w in after.warnings)


def test_a_busy_node_moved_off_loses_its_warning() -> None:
    document = json.loads(SWITCHES.read_text())
    inventory = inventory_from_snapshots([_busy(document), _machine(document, "b")])
    config = {"cluster": {"num_nodes": 2, "spare_nodes": "1", "component_placement": {"a": "0-7"}}}
    before = plan(config, inventory)
    assert any("already runs" in w for w in before.warnings)
    after = replan(before, 0).plan
    assert not any("already runs" in w for w in after.warnings)


def test_the_table_shows_the_domain_of_each_move() -> None:
    text = render_table(replan(racks(GROUPED), 3).plan)
    assert "(spare in the same NVLink domain)" in text


@settings(max_examples=40, deadline=None)
@given(
    lost=st.sets(st.integers(0, 11), min_size=1, max_size=4),
    spares=st.lists(st.integers(1, 2), min_size=4, max_size=4),
)
def test_a_replan_with_a_spare_in_every_domain_keeps_every_group_whole(
    lost: set[int], spares: list[int]
) -> None:
    # Four racks of 4 nodes x 4 GPUs; each rack keeps 1 or 2 of its last nodes as spares.
    entries = [
        {
            "node_ranks": f"{4 * r}-{4 * r + 3}",
            "accelerators": {"count": 4},
            "nvlink_domain": f"r{r}",
        }
        for r in range(4)
    ]
    config = {
        "cluster": {
            "num_nodes": 16,
            "spare_nodes": {f"r{r}": n for r, n in enumerate(spares)},
            "component_placement": {"actor": {"placement": "all", "nvlink_group": 4}},
            "inventory": entries,
        }
    }
    before = plan(config)
    used = {p.node_rank for p in before.components["actor"]}
    per_rack: dict[int, int] = {}
    for node in sorted(lost & used):
        per_rack[node // 4] = per_rack.get(node // 4, 0) + 1
    spares_left = dict(enumerate(spares))
    for node in lost - used:
        spares_left[node // 4] -= 1
    if any(per_rack.get(r, 0) > spares_left[r] for r in range(4)):
        return  # more losses than a rack has spares: covered by the other tests
    result = replan(before, lost)
    assert all(m.domain == "same domain" for m in result.moves)
    for p in result.plan.components["actor"]:
        assert p.node_rank not in lost
    groups: dict[int, set[str | None]] = {}
    nodes = result.plan.inventory.nodes
    for p in result.plan.components["actor"]:
        groups.setdefault(p.rank // 4, set()).add(nodes[p.node_rank].nvlink_domain)
    assert all(len(domains) == 1 for domains in groups.values())


def test_validate_without_inventory_names_the_spares_per_domain(
    run: Run, write_file: Write
) -> None:
    path = write_file(
        "domains.yaml",
        "cluster:\n  num_nodes: 4\n  spare_nodes: {rack-a: 1}\n"
        "  component_placement: {actor: 0-7}\n",
    )
    code, out, _ = run("validate", str(path))
    assert code == 0
    assert "spare nodes per NVLink domain (rack-a: 1;" in out


def test_the_svg_names_what_each_spare_replaces_once_per_profile() -> None:
    from placement_core.render import render_svg

    text = render_svg(racks({"actor": "0-7,12-15"}, spares={"rack-a": 1, "rack-b": 1}))
    # Each spare's hover card, and the spares block under the grid.
    assert text.count("can replace nodes 0-1,3") == 3
