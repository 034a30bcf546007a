"""The HTML plan viewer in a real headless Chromium: loads clean, right cells, hover card."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from placement_core import Plan, plan
from placement_core._inventory import Inventory
from placement_core.render._grid import Fold, fold_nodes

if TYPE_CHECKING:
    from playwright.sync_api import Page

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
Show = Callable[..., "Page"]
PNG = b"\x89PNG\r\n\x1a\n"

CELLS_JS = """() => Array.from(document.querySelectorAll(".grid g.node")).map(row => [
    Number(row.dataset.node),
    Array.from(row.querySelectorAll("g.acc")).map(c => c.dataset.components)])"""


def example(name: str) -> Plan:
    return plan(EXAMPLES / f"{name}.yaml")


def alternating(num_nodes: int) -> Plan:
    """Even nodes train, odd nodes roll out: no two neighbours look alike, nothing folds."""
    groups = [
        {"label": "even", "node_ranks": ",".join(map(str, range(0, num_nodes, 2)))},
        {"label": "odd", "node_ranks": ",".join(map(str, range(1, num_nodes, 2)))},
    ]
    config: dict[str, Any] = {
        "cluster": {
            "num_nodes": num_nodes,
            "node_groups": groups,
            "component_placement": {
                "actor": {"node_group": "even", "placement": "all"},
                "rollout": {"node_group": "odd", "placement": "all"},
            },
        }
    }
    return plan(config, Inventory.uniform(num_nodes, 8, model="H100-SXM5-80GB"))


def expected_cells(result: Plan) -> list[list[Any]]:
    occupancy = result.occupancy()
    return [
        [
            rank,
            [
                ",".join(dict.fromkeys(c for c, _ in occupancy[rank].accelerators[a.index]))
                for a in result.inventory.nodes[rank].accelerators
            ],
        ]
        for rank in fold_nodes(result).items
        if not isinstance(rank, Fold)
    ]


@pytest.mark.parametrize("name", ["heterogeneous", "colocated_strided", "disaggregated"])
def test_example_page_loads_without_console_errors(
    show: Show, errors: list[str], name: str
) -> None:
    page = show(example(name))
    assert page.title().startswith("placement plan: ")
    assert errors == []


@pytest.mark.parametrize("name", ["heterogeneous", "colocated_strided", "disaggregated"])
def test_one_cell_per_accelerator_with_its_component(show: Show, name: str) -> None:
    result = example(name)
    assert show(result).evaluate(CELLS_JS) == expected_cells(result)


def test_hovering_a_cell_shows_its_card(show: Show) -> None:
    page = show(example("heterogeneous"))
    card = page.locator("#card")
    assert card.is_hidden()
    page.hover('.grid g.node[data-node="3"] g.acc[data-index="2"]')
    assert card.is_visible()
    assert card.inner_text() == (
        "node 3 · accelerator 2 · A800-SXM4-80GB\n"
        "actor rank 26: RANK=26 LOCAL_RANK=0 CUDA_VISIBLE_DEVICES=2"
    )


def test_card_hides_when_the_pointer_leaves(show: Show) -> None:
    page = show(example("heterogeneous"))
    page.hover('.grid g.node[data-node="0"] g.acc[data-index="0"]')
    page.mouse.move(5, 5)
    assert page.locator("#card").is_hidden()


def test_filter_dims_the_other_components(show: Show) -> None:
    page = show(example("heterogeneous"))
    page.select_option("#filter", label="rollout")
    opacity = """s => getComputedStyle(document.querySelector(s)).opacity"""
    assert page.evaluate(opacity, '.grid g.node[data-node="8"] g.acc') == "1"
    assert page.evaluate(opacity, '.grid g.node[data-node="0"] g.acc') == "0.18"


def test_column_header_stays_in_view_while_the_grid_scrolls(show: Show) -> None:
    page = show(alternating(200))
    top = page.evaluate("() => document.querySelector('.colhead').getBoundingClientRect().top")
    page.evaluate("() => document.querySelector('main.scroll').scrollTo(0, 3000)")
    after = page.evaluate("() => document.querySelector('.colhead').getBoundingClientRect().top")
    assert after == top


def test_two_thousand_unfoldable_nodes_load_with_every_cell(show: Show, errors: list[str]) -> None:
    page = show(alternating(2000))
    rows = page.evaluate(CELLS_JS)
    assert len(rows) == 2000
    assert rows[1999] == [1999, ["rollout"] * 8]
    assert errors == []


@pytest.mark.parametrize(
    ("name", "make"),
    [
        ("heterogeneous", lambda: example("heterogeneous")),
        ("colocated_strided", lambda: example("colocated_strided")),
        ("alternating-2000-nodes", lambda: alternating(2000)),
    ],
)
def test_screenshot_is_written(
    show: Show, screenshots: Path, name: str, make: Callable[[], Plan]
) -> None:
    page = show(make())
    page.hover('.grid g.node[data-node="0"] g.acc >> nth=1')
    target = screenshots / f"{name}.png"
    target.unlink(missing_ok=True)
    page.screenshot(path=str(target))
    assert target.read_bytes()[:8] == PNG
