"""Sizes far beyond any real cluster are errors, not a planner building billions of records."""

from __future__ import annotations

import pytest

from placement_core import ConfigError, Inventory, InventoryError, load_config
from placement_core._cli import main
from placement_core._inventory import MAX_ACCELERATORS_PER_NODE, MAX_NODES
from placement_core._sources import inventory_for


def _cluster(**extra: object) -> dict[str, object]:
    return {"cluster": {"num_nodes": 2, "component_placement": {"actor": "0-3"}, **extra}}


def test_num_nodes_above_the_limit_names_the_limit() -> None:
    config = _cluster()
    config["cluster"]["num_nodes"] = MAX_NODES + 1  # type: ignore[index]
    with pytest.raises(ConfigError) as info:
        load_config(config)
    assert info.value.problems[0].path == "cluster.num_nodes"
    assert str(MAX_NODES) in str(info.value)


def test_num_nodes_at_the_limit_is_accepted() -> None:
    config = _cluster()
    config["cluster"]["num_nodes"] = MAX_NODES  # type: ignore[index]
    assert load_config(config).num_nodes == MAX_NODES


def test_inventory_count_above_the_limit_names_the_field() -> None:
    entry = {"node_ranks": "0-1", "accelerators": {"count": MAX_ACCELERATORS_PER_NODE + 1}}
    with pytest.raises(ConfigError) as info:
        load_config(_cluster(inventory=[entry]))
    assert info.value.problems[0].path == "cluster.inventory[0].accelerators.count"


def test_accelerators_per_node_above_the_limit_is_an_inventory_error() -> None:
    config = load_config(_cluster())
    with pytest.raises(InventoryError, match=str(MAX_ACCELERATORS_PER_NODE)):
        inventory_for(config, accelerators_per_node=MAX_ACCELERATORS_PER_NODE + 1)


def test_uniform_inventory_refuses_too_many_nodes() -> None:
    with pytest.raises(InventoryError, match="num_nodes"):
        Inventory.uniform(MAX_NODES + 1, 8)


def test_cli_refuses_a_huge_accelerators_per_node_with_a_usage_error(
    tmp_path: object, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as info:
        main(["plan", "unused.yaml", "--accelerators-per-node", "99999999999999999999"])
    assert info.value.code == 2
    assert "from 0 to 1024" in capsys.readouterr().err
