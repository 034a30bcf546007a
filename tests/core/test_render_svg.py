"""What the svg and html views draw: a cell per accelerator, folds, shares, tooltips."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

from placement_core import Plan, plan
from placement_core._config import ClusterConfig
from placement_core._inventory import Accelerator, Inventory, Node
from placement_core.render import render_html, render_svg
from placement_core.render._grid import Fold, fold_nodes, node_shape
from placement_core.render._html import NOTEBOOK_MAX_NODES
from placement_core.render._svg_base import PALETTE

SVG = "{http://www.w3.org/2000/svg}"
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
HOSTILE = "<script>alert(1)</script>"


def config(num_nodes: int, placement: dict[str, Any], **rest: Any) -> dict[str, Any]:
    return {"cluster": {"num_nodes": num_nodes, "component_placement": placement, **rest}}


def example(name: str) -> Plan:
    return plan(EXAMPLES / f"{name}.yaml")


def parse(plan_: Plan) -> ET.Element:
    return ET.fromstring(render_svg(plan_))


def classes(element: ET.Element) -> list[str]:
    return element.get("class", "").split()


def groups(root: ET.Element, kind: str) -> list[ET.Element]:
    return [g for g in root.iter(f"{SVG}g") if kind in classes(g)]


def rows(root: ET.Element) -> dict[int, ET.Element]:
    return {int(g.get("data-node", "-1")): g for g in groups(root, "node")}


def title(element: ET.Element) -> str:
    found = element.find(f"{SVG}title")
    assert found is not None
    assert found.text
    return found.text


def fill_of(root: ET.Element, rect_class: str) -> str:
    style = root.find(f"{SVG}style")
    assert style is not None
    assert style.text
    match = re.search(rf"\.placement-plan \.{rect_class}\{{fill:(#[0-9A-Fa-f]{{6}})\}}", style.text)
    assert match, f"no fill rule for .{rect_class}"
    return match.group(1)


def test_one_cell_per_accelerator_of_every_drawn_node() -> None:
    result = example("heterogeneous")
    drawn = rows(parse(result))
    assert sorted(drawn) == [0, 3, 4, 7, 8, 15, 16, 17]
    for rank, row in drawn.items():
        cells = groups(row, "acc")
        node = result.inventory.nodes[rank]
        assert [int(c.get("data-index", "-1")) for c in cells] == list(node.accelerator_ids)


def test_cells_carry_their_component_class_and_colour() -> None:
    root = parse(example("heterogeneous"))
    drawn = rows(root)
    actor_cells = groups(drawn[0], "acc")
    rollout_cells = groups(drawn[8], "acc")
    assert {c.get("data-components") for c in actor_cells} == {"actor"}
    assert {c.get("data-components") for c in rollout_cells} == {"rollout"}
    assert all("k0" in classes(c) for c in actor_cells)
    assert all("k1" in classes(c) for c in rollout_cells)
    rect = actor_cells[0].find(f"{SVG}rect")
    assert rect is not None
    assert rect.get("class") == "f0"
    assert fill_of(root, "f0") == PALETTE[0]
    assert fill_of(root, "f1") == PALETTE[1]


def test_identical_nodes_are_folded_like_the_map() -> None:
    folds = groups(parse(example("heterogeneous")), "fold")
    assert [(f.get("data-first"), f.get("data-last")) for f in folds] == [
        ("1", "2"),
        ("5", "6"),
        ("9", "14"),
    ]
    text = folds[0].find(f"{SVG}text")
    assert text is not None
    assert text.text == "⋮ nodes 1-2: same layout, ranks continue"


def test_shared_accelerators_are_striped_and_outlined() -> None:
    cell = groups(rows(parse(example("colocated_strided")))[0], "acc")[0]
    assert "shared" in classes(cell)
    assert cell.get("data-components") == "actor,rollout"
    rects = [r.get("class") for r in cell.findall(f"{SVG}rect")]
    assert rects == ["f0", "f1", "o"]


def test_strided_process_is_linked_across_the_devices_it_skips() -> None:
    row = rows(parse(example("colocated_strided")))[0]
    first = groups(row, "link")[0]
    assert first.get("data-components") == "rollout"
    assert title(first) == "node 0: rollout rank 0 on accelerators 0,2 (stride 2)"
    assert len(first.findall(f"{SVG}circle")) == 2


def test_free_accelerators_are_marked_free() -> None:
    result = plan(config(1, {"actor": "1"}), Inventory.uniform(1, 3))
    cells = groups(rows(parse(result))[0], "acc")
    assert ["free" in classes(c) for c in cells] == [True, False, True]
    assert title(cells[0]).endswith("\nfree")


def test_hardware_and_node_level_placements_are_chips() -> None:
    drawn = rows(parse(example("heterogeneous")))
    (robot,) = groups(drawn[16], "chip")
    assert (robot.get("data-kind"), robot.get("data-hardware")) == ("hardware", "Franka")
    assert robot.get("data-components") == "env"
    assert "PLACEMENT_HARDWARE_TYPE=Franka" in title(robot)
    assert '"robot_ip": "10.10.10.1"' in title(robot)
    (agents,) = groups(drawn[0], "chip")
    assert agents.get("data-kind") == "node"
    assert "agent: 100 processes, ranks 0-99" in title(agents)


def test_accelerator_tooltip_names_rank_and_visibility_env() -> None:
    cell = groups(rows(parse(example("heterogeneous")))[3], "acc")[2]
    assert title(cell) == (
        "node 3 · accelerator 2 · A800-SXM4-80GB\n"
        "actor rank 26: RANK=26 LOCAL_RANK=0 CUDA_VISIBLE_DEVICES=2"
    )


def test_tooltip_uses_the_vendors_variable_and_known_topology() -> None:
    node = Node(
        rank=0,
        node_id="node-0",
        accelerators=(
            Accelerator(0, type="amd", model="MI300X", numa_node=1, cpu_affinity="0-15"),
        ),
    )
    cell = groups(rows(parse(plan(config(1, {"actor": "0"}), Inventory((node,)))))[0], "acc")[0]
    assert title(cell).splitlines()[1:] == [
        "NUMA node 1 · CPUs 0-15",
        "actor rank 0: RANK=0 LOCAL_RANK=0 HIP_VISIBLE_DEVICES=0 PLACEMENT_CPU_AFFINITY=0-15",
    ]


def test_tooltip_lists_a_few_processes_and_counts_the_rest() -> None:
    result = plan(config(1, {"actor": "0:0-9"}), Inventory.uniform(1, 1))
    lines = title(groups(rows(parse(result))[0], "acc")[0]).splitlines()
    assert lines[-1] == "… and 4 more processes"
    assert len(lines) == 1 + 6 + 1


def test_hostile_names_are_escaped() -> None:
    node = Node(rank=0, node_id="n<0>", accelerators=(Accelerator(0, model='<b>"A&B"</b>'),))
    result = plan(config(1, {HOSTILE: "0"}), Inventory((node,)))
    root = parse(result)  # parses: nothing unescaped broke the XML
    assert not list(root.iter(f"{SVG}script"))
    (cell,) = groups(rows(root)[0], "acc")
    assert cell.get("data-components") == HOSTILE
    assert title(cell).startswith('node 0 · accelerator 0 · <b>"A&B"</b>')
    assert HOSTILE not in render_html(result)


def test_control_characters_are_replaced_so_the_xml_stays_valid() -> None:
    # load_config refuses such a name; a ClusterConfig built directly still draws safely.
    built = ClusterConfig.model_validate(config(1, {"bell\x07": "0"})["cluster"])
    result = plan(built, Inventory.uniform(1, 1))
    (cell,) = groups(rows(parse(result))[0], "acc")
    assert cell.get("data-components") == "bell\ufffd"


def test_components_past_the_palette_are_hatched() -> None:
    names = {f"c{i}": str(i) for i in range(len(PALETTE) + 1)}
    result = plan(config(1, names), Inventory.uniform(1, len(names)))
    cells = groups(rows(parse(result))[0], "acc")
    hatched = ["url(" in ET.tostring(c, encoding="unicode") for c in cells]
    assert hatched == [False] * len(PALETTE) + [True]


def test_title_line_and_legend() -> None:
    root = parse(example("heterogeneous"))
    texts = ["".join(t.itertext()) for t in root.iter(f"{SVG}text")]
    assert texts[0] == "placement plan: 18 nodes, 128 accelerators, 4 components, 530 processes"
    assert {"ac = actor", "r = rollout", "e = env", "ag = agent"} <= set(texts)


def test_max_nodes_cuts_rows_and_says_how_many() -> None:
    nodes = tuple(
        Node(
            rank=r,
            node_id=f"node-{r}",
            accelerators=tuple(Accelerator(i) for i in range(r % 3 + 1)),
        )
        for r in range(10)
    )
    result = plan(
        config(10, {"agent": {"node_group": "node", "placement": "all"}}), Inventory(nodes)
    )
    root = ET.fromstring(render_svg(result, max_nodes=4))
    assert sorted(rows(root)) == [0, 1, 2, 3]
    texts = ["".join(t.itertext()) for t in root.iter(f"{SVG}text")]
    assert "... 6 more nodes not shown (--format table or json lists all)" in texts


def test_a_cut_run_is_not_also_reported_as_folded() -> None:
    result = plan(config(10, {"actor": "all"}), Inventory.uniform(10, 2))
    assert fold_nodes(result, max_nodes=1).items == (0,)
    assert fold_nodes(result, max_nodes=1).not_shown == 9
    assert fold_nodes(result).items == (0, Fold(1, 8), 9)


def test_a_process_on_two_accelerators_does_not_look_like_two_processes() -> None:
    pairs = plan(config(1, {"actor": "0-1:0"}), Inventory.uniform(1, 2))
    singles = plan(config(1, {"actor": "0-1"}), Inventory.uniform(1, 2))

    def shape(p: Plan) -> tuple[object, ...]:
        return node_shape(p, p.inventory.nodes[0], p.occupancy()[0])

    assert shape(pairs) != shape(singles)


class _Elements(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.found: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.found.append((tag, dict(attrs)))


def html_elements(text: str) -> list[tuple[str, dict[str, str | None]]]:
    parser = _Elements()
    parser.feed(text)
    return parser.found


def test_html_is_self_contained() -> None:
    elements = html_elements(render_html(example("heterogeneous")))
    assert not [a for _, a in elements if a.get("src") or a.get("href")]
    scripts = [a for tag, a in elements if tag == "script"]
    assert scripts == [{}]  # one inline script, nothing loaded
    assert not [tag for tag, _ in elements if tag in ("link", "iframe", "img", "object")]


def test_html_has_one_cell_per_drawn_accelerator_and_a_filter_per_component() -> None:
    elements = html_elements(render_html(example("heterogeneous")))
    cells = [a for tag, a in elements if tag == "g" and "acc" in (a.get("class") or "").split()]
    assert len(cells) == 8 * 6  # six drawn accelerator nodes of eight
    options = [a.get("value") for tag, a in elements if tag == "option"]
    assert options == ["", "k0", "k1", "k2", "k3"]


def test_notebook_repr_is_the_svg_capped() -> None:
    result = plan(config(2, {"actor": "all"}), Inventory.uniform(2, 8))
    shown = result._repr_html_()
    assert shown.startswith('<div style="max-height:640px;overflow:auto"><svg ')
    assert 'class="acc' in shown
    assert NOTEBOOK_MAX_NODES == 200
