"""Spares and lost nodes in the command and the views: validate, plan --lose, every format."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path

import pytest

from placement_core._cli import main

Run = Callable[..., tuple[int, str, str]]

CONFIG = """\
cluster:
  num_nodes: 4
  spare_nodes: 3
  node_groups:
    - label: a800
      node_ranks: 0-3
  inventory:
    - {node_ranks: 0-3, accelerators: {type: nvidia, model: A800, count: 8}}
  component_placement:
    actor: {node_group: a800, placement: 0-15}
    rollout: {node_group: a800, placement: "16-23:0-3"}
"""


@pytest.fixture
def run(capsys: pytest.CaptureFixture[str]) -> Run:
    def invoke(*argv: str) -> tuple[int, str, str]:
        try:
            status = main(list(argv))
        except SystemExit as exit_:
            status = exit_.code if isinstance(exit_.code, int) else 1
        captured = capsys.readouterr()
        assert "Traceback" not in captured.err
        return status, captured.out, captured.err

    return invoke


@pytest.fixture
def config(write_file: Callable[[str, str], Path]) -> str:
    return str(write_file("spares.yaml", CONFIG))


def test_validate_lists_each_spare_and_the_nodes_it_can_replace(run: Run, config: str) -> None:
    status, out, _ = run("validate", config)
    assert status == 0
    assert out.splitlines()[1] == f"{config}: spare node 3: can replace nodes 0-2"


def test_validate_notes_a_used_node_no_spare_can_replace(
    run: Run, write_file: Callable[[str, str], Path]
) -> None:
    text = CONFIG.replace(
        "- {node_ranks: 0-3, accelerators: {type: nvidia, model: A800, count: 8}}",
        "- {node_ranks: '0-1,3', accelerators: {model: A800, count: 8}}\n"
        "    - {node_ranks: 2, accelerators: {count: 4}}",
    ).replace("16-23:0-3", "16-19:0-1")
    status, out, _ = run("validate", str(write_file("uncovered.yaml", text)))
    assert status == 0
    assert (
        "note: no spare can replace node 2 (a spare would need 4x nvidia; node groups a800)" in out
    )


def test_validate_without_inventory_names_the_spares(
    run: Run, write_file: Callable[[str, str], Path]
) -> None:
    text = "cluster:\n  num_nodes: 3\n  spare_nodes: 2\n  component_placement: {a: 0-1}\n"
    status, out, _ = run("validate", str(write_file("bare.yaml", text)))
    assert status == 0
    assert "spare nodes 2 (which nodes each can replace is known once planned)" in out


def test_the_table_lists_the_spares(run: Run, config: str) -> None:
    _, out, _ = run("plan", config)
    assert "spares: 3\n  spare node 3: can replace nodes 0-2\n" in out


def test_plan_lose_lists_the_moves_and_places_them(run: Run, config: str) -> None:
    status, out, _ = run("plan", config, "--lose", "1")
    assert status == 0
    assert "lost nodes: 1\n  actor 8-15: node 1 -> node 3\n" in out
    assert "  8-15  3     0-7 (1 each)" in out


def test_plan_lose_map_marks_lost_and_takeover_nodes(run: Run, config: str) -> None:
    _, out, _ = run("plan", config, "--lose", "0", "--format", "map")
    rows = {line.split()[0]: line for line in out.splitlines() if line[:1].isdigit()}
    assert "8x A800 (lost: now node 3)" in rows["0"]
    assert "8x A800 (spare: took over node 0)" in rows["3"]
    assert "actor 0-7: node 0 -> node 3 (rank 0: the master node is now node 3)" in out


def test_plan_lose_json_carries_the_moves(run: Run, config: str) -> None:
    _, out, _ = run("plan", config, "--lose", "1", "--format", "json")
    document = json.loads(out)
    assert document["lost"] == {
        "nodes": [1],
        "moves": [
            {
                "lost": 1,
                "spare": 3,
                "lost_node_id": "node-1",
                "spare_node_id": "node-3",
                "ranks": {"actor": list(range(8, 16))},
            }
        ],
    }
    assert "spares" not in document  # the only spare is in use
    assert document["components"]["actor"][8]["node_rank"] == 3


def test_plan_json_lists_spares(run: Run, config: str) -> None:
    _, out, _ = run("plan", config, "--format", "json")
    assert json.loads(out)["spares"] == {
        "groups": [{"spares": [3], "replaces": [0, 1, 2]}],
        "uncovered": [],
    }


def test_plan_lose_svg_draws_the_takeover(run: Run, config: str) -> None:
    _, out, _ = run("plan", config, "--lose", "1", "--format", "svg")
    root = ET.fromstring(out)
    ns = "{http://www.w3.org/2000/svg}"
    roles = {g.get("data-node"): g.get("class") for g in root.iter(f"{ns}g") if g.get("data-node")}
    assert roles["1"] == "node lost"
    assert roles["3"] == "node spare"
    assert "actor 8-15: node 1 -&gt; node 3" in out


def test_plan_svg_tooltip_says_what_a_spare_can_replace(run: Run, config: str) -> None:
    _, out, _ = run("plan", config, "--format", "svg")
    assert "spare: can replace nodes 0-2" in out


def test_plan_lose_html_notes_the_moves(run: Run, config: str) -> None:
    _, out, _ = run("plan", config, "--lose", "1", "--format", "html")
    assert "actor 8-15: node 1 -&gt; node 3" in out


def test_plan_lose_without_a_spare_left_fails_naming_the_node(run: Run, config: str) -> None:
    status, _, err = run("plan", config, "--lose", "1-2")
    assert status == 1
    assert "no compatible spare for lost node 2: node 2 needs a spare with 8x nvidia A800" in err


@pytest.mark.parametrize("lose", ["9", "1-x", ""])
def test_plan_lose_with_a_bad_rank_list_fails_at_the_option(
    run: Run, config: str, lose: str
) -> None:
    status, _, err = run("plan", config, "--lose", lose)
    assert status == 1
    assert "--lose: " in err


def test_a_rule_on_a_spare_fails_at_its_line(
    run: Run, write_file: Callable[[str, str], Path]
) -> None:
    path = str(write_file("used.yaml", CONFIG.replace("16-23:0-3", "24-31:0-3")))
    status, _, err = run("plan", path)
    assert status == 1
    assert f"{path}:11: cluster.component_placement.rollout.placement: the rule places" in err


def test_thousands_of_lost_nodes_without_spares_make_a_short_message(
    run: Run, tmp_path: Path
) -> None:
    config = tmp_path / "c.yaml"
    config.write_text(
        'cluster:\n  num_nodes: 3000\n  spare_nodes: "2999"\n  component_placement: {a: 0-2998}\n'
    )
    status, _, err = run("plan", str(config), "--accelerators-per-node", "1", "--lose", "0-2998")
    assert status == 1
    assert "no compatible spare for lost nodes 1-2998" in err
    assert "nodes 1-2998 need a spare with 1x nvidia" in err  # one reason per kind of node
    assert len(err) < 2000


def test_plan_lose_html_bands_the_whole_lost_and_spare_rows_and_says_so(
    run: Run, config: str
) -> None:
    _, out, _ = run("plan", config, "--lose", "1", "--format", "html")
    for role, rank in (("lost", 1), ("spare", 3)):
        row = out.split(f'<g class="node {role}" data-node="{rank}"', 1)[1]
        assert row.index('class="rowband"') < row.index('class="nodelabel'), role
    plain = out.split('<g class="node" data-node="0"', 1)[1].split('<g class="node', 1)[0]
    assert "rowband" not in plain
    assert ".lost .rowband{fill:#b00020" in out
    assert ">lost node</li>" in out
    assert ">spare node</li>" in out


def test_plan_lose_svg_legend_names_lost_and_spare_nodes(run: Run, config: str) -> None:
    _, out, _ = run("plan", config, "--lose", "1", "--format", "svg")
    root = ET.fromstring(out)
    texts = [t.text for t in root.iter("{http://www.w3.org/2000/svg}text")]
    assert "lost node" in texts
    assert "spare node" in texts
