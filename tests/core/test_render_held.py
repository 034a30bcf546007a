"""Accelerators held by other jobs (``held_by``): greyed out and named in every view."""

from __future__ import annotations

import dataclasses
import xml.etree.ElementTree as ET
from typing import Any

import pytest

from placement_core import Inventory, PlacementRuleError, Plan, plan
from placement_core.render import render_html, render_map, render_svg

SVG = "{http://www.w3.org/2000/svg}"


def six_on_two() -> Plan:
    """actor 0-5 on 2 x 4 GPUs: node 0 full, node 1 uses GPUs 0 and 1."""
    config = {"cluster": {"num_nodes": 2, "component_placement": {"actor": "0-5"}}}
    return plan(config, Inventory.uniform(2, 4))


def on_free_gpus() -> Plan:
    """A plan made on a free view: node 0 offers only GPUs 2 and 3."""
    whole = Inventory.uniform(1, 4)
    node = dataclasses.replace(whole.nodes[0], accelerators=whole.nodes[0].accelerators[2:])
    config = {"cluster": {"num_nodes": 1, "component_placement": {"actor": "0-1"}}}
    return plan(config, Inventory((node,)))


HELD = {(1, 2): "jobB", (1, 3): "jobB"}


def map_row(text: str, node: int) -> list[str]:
    return next(line.split() for line in text.splitlines() if line.startswith(f"{node} "))


def held_cells(svg: str) -> list[Any]:
    root = ET.fromstring(svg)
    return [g for g in root.iter(f"{SVG}g") if {"acc", "held"} <= set(g.get("class", "").split())]


def test_the_map_marks_held_gpus_with_the_job_name_and_says_so_in_the_legend() -> None:
    text = render_map(six_on_two(), held_by=HELD)
    assert map_row(text, 1)[3:7] == ["a4", "a5", "#jobB", "#jobB"]
    assert "'#<job>' is held by another job" in text


def test_the_map_puts_held_gpus_a_free_view_left_out_in_their_index_order() -> None:
    text = render_map(on_free_gpus(), held_by={(0, 0): "jobA", (0, 1): "jobA"})
    assert map_row(text, 0)[3:7] == ["#jobA", "#jobA", "a0", "a1"]


def test_without_held_gpus_the_map_is_unchanged() -> None:
    assert render_map(six_on_two(), held_by={}) == render_map(six_on_two())
    assert "held by another job" not in render_map(six_on_two())


def test_nodes_held_differently_are_never_folded_together() -> None:
    config = {"cluster": {"num_nodes": 4, "component_placement": {"actor": "0-3"}}}
    the_plan = plan(config, Inventory.uniform(4, 1))
    text = render_map(the_plan, held_by={})
    assert "⋮" in text
    assert "⋮" not in render_map(the_plan, held_by={(1, 1): "jobB"})


def test_the_svg_draws_each_held_gpu_grey_with_the_job_in_its_cell_and_tooltip() -> None:
    svg = render_svg(six_on_two(), held_by=HELD)
    cells = held_cells(svg)
    assert [c.get("data-index") for c in cells] == ["2", "3"]
    assert all(c.get("data-job") == "jobB" for c in cells)
    assert cells[0].find(f"{SVG}text").text == "jobB"
    assert "held by job jobB" in cells[0].find(f"{SVG}title").text
    assert ".held rect{fill:#d9d9d9" in svg
    assert "held by another job (jobB)" in svg


def test_the_svg_escapes_a_hostile_job_name() -> None:
    svg = render_svg(six_on_two(), held_by={(1, 2): "<script>x</script>"})
    assert "<script>" not in svg
    ET.fromstring(svg)


def test_the_html_page_greys_out_held_gpus_and_lists_their_jobs() -> None:
    page = render_html(six_on_two(), held_by={(1, 2): "jobB", (1, 3): "jobC"})
    assert page.count('class="acc held tip"') == 2
    assert "held by another job (jobB, jobC)</li>" in page


@pytest.mark.parametrize(
    ("held_by", "says"),
    [
        ({(2, 0): "jobB"}, "node rank 0-1"),
        ({(1, -1): "jobB"}, "accelerator index >= 0"),
        ({"1,2": "jobB"}, "expected keys"),
        ({(1, 2): ""}, "expected a job name"),
        ({(1, 0): "jobB"}, "runs this plan's processes"),
        ([(1, 2)], "expected (node rank, accelerator index) -> job name"),
    ],
)
@pytest.mark.parametrize("render", [render_map, render_svg, render_html])
def test_bad_held_by_is_refused_naming_the_field(render: Any, held_by: Any, says: str) -> None:
    with pytest.raises(PlacementRuleError, match="held_by") as caught:
        render(six_on_two(), held_by=held_by)
    assert says in str(caught.value)
