"""The `placement` command: exit codes, output, and messages instead of tracebacks."""

from __future__ import annotations

import json
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path

import pytest

from placement_core._cli import main

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
HETEROGENEOUS = str(EXAMPLES / "heterogeneous.yaml")

Run = Callable[..., tuple[int, str, str]]


@pytest.fixture
def run(capsys: pytest.CaptureFixture[str]) -> Run:
    """Run the CLI in-process; return (exit status, stdout, stderr)."""

    def invoke(*argv: str) -> tuple[int, str, str]:
        try:
            status = main(list(argv))
        except SystemExit as exit_:  # argparse exits on usage errors
            status = exit_.code if isinstance(exit_.code, int) else 1
        captured = capsys.readouterr()
        assert "Traceback" not in captured.err
        return status, captured.out, captured.err

    return invoke


def test_plan_prints_a_table(run: Run) -> None:
    status, out, _ = run("plan", HETEROGENEOUS)
    assert status == 0
    assert out.startswith("plan: 18 nodes, 128 accelerators, 4 components, 530 processes")
    assert "actor: 64 processes on a800" in out


@pytest.mark.parametrize("fmt", ["table", "map", "json"])
def test_plan_formats(run: Run, fmt: str) -> None:
    status, out, _ = run("plan", HETEROGENEOUS, "--format", fmt)
    assert status == 0
    if fmt == "json":
        assert json.loads(out)["schema"] == 1
    elif fmt == "map":
        assert out.startswith("map: ")


@pytest.mark.parametrize(
    ("fmt", "golden"),
    [
        ("table", "colocated_strided.table.txt"),
        ("map", "colocated_strided.map.txt"),
        ("json", "colocated_strided.json"),
    ],
)
def test_plan_prints_the_golden_output(run: Run, fmt: str, golden: str) -> None:
    status, out, err = run("plan", str(EXAMPLES / "colocated_strided.yaml"), "--format", fmt)
    assert (status, err) == (0, "")
    assert out == (Path(__file__).parent / "golden" / golden).read_text(encoding="utf-8")


def test_plan_prints_an_svg(run: Run) -> None:
    status, out, err = run("plan", HETEROGENEOUS, "--format", "svg")
    assert (status, err) == (0, "")
    root = ET.fromstring(out)
    assert root.tag == "{http://www.w3.org/2000/svg}svg"
    assert root.get("aria-label") == (
        "placement plan: 18 nodes, 128 accelerators, 4 components, 530 processes"
    )


def test_plan_writes_html_to_the_output_file(run: Run, tmp_path: Path) -> None:
    target = tmp_path / "plan.html"
    status, out, _ = run("plan", HETEROGENEOUS, "--format", "html", "--output", str(target))
    assert (status, out) == (0, "")
    page = target.read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>")
    assert "<title>placement plan: 18 nodes" in page


def test_plan_output_says_where_it_wrote_and_how_big(run: Run, tmp_path: Path) -> None:
    target = tmp_path / "plan.html"
    _, _, err = run("plan", HETEROGENEOUS, "--format", "html", "--output", str(target))
    size = target.stat().st_size
    assert err == f"placement: wrote {target} (html, {size / 1000:.1f} kB)\n"


def test_plan_output_of_a_tiny_file_counts_bytes(run: Run, tmp_path: Path) -> None:
    config = tmp_path / "one.yaml"
    config.write_text("cluster: {num_nodes: 1, component_placement: {a: 0}}\n")
    target = tmp_path / "plan.txt"
    _, _, err = run("plan", str(config), "-a", "1", "--format", "table", "-o", str(target))
    assert err == f"placement: wrote {target} (table, {target.stat().st_size} bytes)\n"


def test_a_component_of_one_process_is_not_plural(run: Run, tmp_path: Path) -> None:
    config = tmp_path / "one.yaml"
    config.write_text("cluster: {num_nodes: 1, component_placement: {a: 0}}\n")
    _, out, _ = run("plan", str(config), "-a", "1")
    assert "a: 1 process on cluster (placement '0')" in out.splitlines()


def test_plan_output_works_for_text_formats_too(run: Run, tmp_path: Path) -> None:
    target = tmp_path / "map.txt"
    _, printed, _ = run("plan", HETEROGENEOUS, "--format", "map")
    status, out, _ = run("plan", HETEROGENEOUS, "--format", "map", "-o", str(target))
    assert (status, out) == (0, "")
    assert target.read_text(encoding="utf-8") == printed


def test_plan_to_an_unwritable_output_exits_1_naming_it(run: Run, tmp_path: Path) -> None:
    target = tmp_path / "missing" / "plan.svg"
    status, out, err = run("plan", HETEROGENEOUS, "--format", "svg", "--output", str(target))
    assert (status, out) == (1, "")
    assert err == f"placement: error: cannot write {target}: No such file or directory\n"


def test_plan_expand(run: Run) -> None:
    _, folded, _ = run("plan", HETEROGENEOUS)
    _, expanded, _ = run("plan", HETEROGENEOUS, "--expand")
    assert len(expanded.splitlines()) > len(folded.splitlines())


def test_plan_with_accelerators_per_node(run: Run, write_file: Callable[[str, str], Path]) -> None:
    path = write_file("c.yaml", "cluster:\n  num_nodes: 2\n  component_placement: {actor: 0-15}\n")
    status, out, _ = run("plan", str(path), "--accelerators-per-node", "8", "-f", "json")
    assert status == 0
    assert len(json.loads(out)["components"]["actor"]) == 16


def test_plan_with_snapshots(run: Run, write_file: Callable[[str, str], Path]) -> None:
    config = write_file("c.yaml", "cluster:\n  num_nodes: 2\n  component_placement: {a: all}\n")
    snapshots = []
    for rank, count in ((1, 2), (0, 4)):
        accelerators = [{"index": i, "type": "nvidia"} for i in range(count)]
        document = {"schema": 1, "node_rank": rank, "accelerators": accelerators}
        snapshots.append(str(write_file(f"n{rank}.json", json.dumps(document))))
    status, out, _ = run("plan", str(config), "--inventory", *snapshots, "-f", "json")
    assert status == 0
    placements = json.loads(out)["components"]["a"]
    assert [p["node_rank"] for p in placements] == [0, 0, 0, 0, 1, 1]


def test_plan_with_too_few_snapshots_exits_1_naming_the_nodes(
    run: Run, write_file: Callable[[str, str], Path]
) -> None:
    config = write_file("c.yaml", "cluster:\n  num_nodes: 3\n  component_placement: {a: 0}\n")
    document = {"schema": 1, "accelerators": [{"index": 0, "type": "nvidia"}]}
    snapshot = str(write_file("n0.json", json.dumps(document)))
    status, out, err = run("plan", str(config), "--inventory", snapshot)
    assert (status, out) == (1, "")
    assert "no snapshot for node(s) 1-2" in err
    assert "--allow-missing-snapshots" in err


def test_plan_with_too_few_snapshots_when_allowed(
    run: Run, write_file: Callable[[str, str], Path]
) -> None:
    config = write_file("c.yaml", "cluster:\n  num_nodes: 3\n  component_placement: {a: 0}\n")
    document = {"schema": 1, "accelerators": [{"index": 0, "type": "nvidia"}]}
    snapshot = str(write_file("n0.json", json.dumps(document)))
    status, out, _ = run(
        "plan", str(config), "--inventory", snapshot, "--allow-missing-snapshots", "-f", "json"
    )
    assert status == 0
    assert [len(node["accelerators"]) for node in json.loads(out)["nodes"]] == [1, 0, 0]


def test_plan_without_any_inventory_says_what_to_add(
    run: Run, write_file: Callable[[str, str], Path]
) -> None:
    path = write_file("c.yaml", "cluster:\n  num_nodes: 2\n  component_placement: {a: 0-1}\n")
    status, _, err = run("plan", str(path))
    assert status == 1
    assert "--accelerators-per-node" in err


def test_validate_ok(run: Run) -> None:
    status, out, _ = run("validate", HETEROGENEOUS)
    assert status == 0
    assert out.splitlines() == [
        f"{HETEROGENEOUS}: valid (18 nodes, 3 node groups, 4 components; 530 processes planned)"
    ]


def test_validate_without_inventory_checks_the_config_only(
    run: Run, write_file: Callable[[str, str], Path]
) -> None:
    path = write_file("c.yaml", "cluster:\n  num_nodes: 2\n  component_placement: {a: 0-1}\n")
    status, out, _ = run("validate", str(path))
    assert status == 0
    assert "valid (2 nodes, 0 node groups, 1 component); not planned: no inventory" in out


def test_validate_lists_every_problem_with_its_path(
    run: Run, write_file: Callable[[str, str], Path]
) -> None:
    path = write_file(
        "bad.yaml",
        "cluster:\n"
        "  num_nodes: 2\n"
        "  component_placement: {a: '0-3:x', b: {placement: 1, strid: 2}}\n"
        "  node_groups: [{label: g, node_ranks: 0-5}]\n",
    )
    status, _, err = run("validate", str(path))
    assert status == 1
    assert err.startswith(f"placement: {path}: 3 problems:")
    assert f"  - {path}:3: cluster.component_placement.a.placement: " in err
    assert f"  - {path}:3: cluster.component_placement.b.strid: unknown key" in err
    assert f"  - {path}:4: cluster.node_groups[0].node_ranks: " in err


def test_validate_reports_field_and_cross_part_problems_together(
    run: Run, write_file: Callable[[str, str], Path]
) -> None:
    path = write_file(
        "bad.yaml",
        "cluster:\n"
        "  num_nodes: 2\n"
        "  component_placement: {a: {node_group: gpu, placement: 0-1}}\n"
        "  node_groups: [{label: node, node_ranks: 0-5}]\n",
    )
    status, _, err = run("validate", str(path))
    assert status == 1
    assert err.startswith(f"placement: {path}: 3 problems:")
    assert f"  - {path}:4: cluster.node_groups[0].node_ranks: nodes 2-5 are out of range" in err
    assert f"  - {path}:4: cluster.node_groups[0].label: 'node' is reserved" in err
    assert f"  - {path}:3: cluster.component_placement.a.node_group: 'gpu' is not a defined" in err


def test_validate_lists_problems_in_file_order(
    run: Run, write_file: Callable[[str, str], Path]
) -> None:
    path = write_file(
        "bad.yaml",
        "cluster:\n"
        "  num_nodes: 2\n"
        "  component_placement: {a: {node_group: gpu, placement: 0-1}}\n"
        "  node_groups: [{label: node, node_ranks: 0-5}]\n",
    )
    _, _, err = run("validate", str(path))
    assert [int(row.split(":")[1]) for row in err.splitlines()[1:]] == [3, 4, 4]


def test_validate_reports_a_rule_that_cannot_be_placed(
    run: Run, write_file: Callable[[str, str], Path]
) -> None:
    path = write_file("c.yaml", "cluster:\n  num_nodes: 1\n  component_placement: {a: 0-5:0-3}\n")
    status, _, err = run("validate", str(path), "-a", "8")
    assert status == 1
    assert err.startswith(f"placement: error: {path}:3: cluster.component_placement.a.placement")


def test_single_problem_names_file_and_line(
    run: Run, write_file: Callable[[str, str], Path]
) -> None:
    path = write_file(
        "bad.yaml",
        "cluster:\n  num_nodes: 2\n  component_placement: {a: 0-1}\n"
        "  node_groups:\n    - label: node\n      node_ranks: 0\n",
    )
    status, _, err = run("validate", str(path))
    assert status == 1
    assert err.startswith(f"placement: error: {path}:5: cluster.node_groups[0].label: ")


def test_validate_prints_warnings_to_stderr(
    run: Run, write_file: Callable[[str, str], Path]
) -> None:
    path = write_file(
        "c.yaml", "cluster:\n  num_nodes: 1\n  component_placement: {a: '0-3:0-1', b: '1-2:0'}\n"
    )
    status, out, err = run("validate", str(path), "-a", "4")
    assert status == 0
    assert out == (
        f"{path}: valid (1 node, 0 node groups, 2 components; 3 processes planned, 1 warning)\n"
    )
    assert err.startswith("placement: warning: ")


def test_missing_file(run: Run, tmp_path: Path) -> None:
    status, _, err = run("plan", str(tmp_path / "nope.yaml"))
    assert status == 1
    assert err == f"placement: error: {tmp_path / 'nope.yaml'}: no such file\n"


def test_a_directory_instead_of_a_file_is_named_as_one(run: Run, tmp_path: Path) -> None:
    status, _, err = run("plan", str(tmp_path))
    assert status == 1
    assert err == f"placement: error: {tmp_path}: is a directory, expected a YAML file\n"


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (b"", "got an empty document"),
        (b"- a\n- b\n", "top-level 'cluster:' key, got list"),
        (b"cluster:\n  num_nodes: \xff\n", "cannot read the file: 'utf-8' codec"),
        (b"cluster:\n  num_nodes: 2\n  bogus: 1\n", "cluster.bogus: unknown key"),
        (
            b"cluster:\n  num_nodes: 2\n  component_placement:\n    actor: 0-a\n",
            "expected resource ranks as INT, INT-INT or 'all', got '0-a'",
        ),
    ],
    ids=["empty", "yaml-list", "not-utf8", "unknown-key", "bad-range"],
)
def test_bad_config_files_exit_1_with_a_message(
    run: Run, tmp_path: Path, content: bytes, expected: str
) -> None:
    path = tmp_path / "cluster.yaml"
    path.write_bytes(content)
    for command in ("plan", "validate"):
        status, out, err = run(command, str(path), "--accelerators-per-node", "8")
        assert (status, out) == (1, ""), command
        assert str(path) in err
        assert expected in err


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (b"{bad", "invalid JSON"),
        (b"", "invalid JSON"),
        (b"[1, 2]", "expected a JSON object (a node snapshot), got list"),
        (b"\xff", "cannot read the snapshot: 'utf-8' codec"),
    ],
    ids=["syntax", "empty", "list", "not-utf8"],
)
def test_bad_snapshot_json_exits_1_naming_the_snapshot(
    run: Run, tmp_path: Path, content: bytes, expected: str
) -> None:
    snapshot = tmp_path / "n0.json"
    snapshot.write_bytes(content)
    status, out, err = run("plan", HETEROGENEOUS, "--inventory", str(snapshot))
    assert (status, out) == (1, "")
    assert str(snapshot) in err
    assert expected in err


def test_a_directory_as_snapshot_exits_1(run: Run, tmp_path: Path) -> None:
    status, _, err = run("plan", HETEROGENEOUS, "--inventory", str(tmp_path))
    assert status == 1
    assert f"{tmp_path}: cannot read the snapshot" in err


def test_yaml_syntax_error_names_line_and_column(
    run: Run, write_file: Callable[[str, str], Path]
) -> None:
    path = write_file("bad.yaml", "cluster:\n  num_nodes: 2\n  component_placement: {a: [}\n")
    status, _, err = run("validate", str(path))
    assert status == 1
    assert f"{path}:3:" in err
    assert "YAML syntax error" in err


def test_malformed_snapshot_names_the_file(
    run: Run, write_file: Callable[[str, str], Path]
) -> None:
    snapshot = write_file("n0.json", json.dumps({"schema": 1, "accelerators": "none"}))
    status, _, err = run("plan", HETEROGENEOUS, "--inventory", str(snapshot))
    assert status == 1
    assert f"{snapshot}: accelerators" in err


@pytest.mark.parametrize(
    "argv",
    [
        (),
        ("plan",),
        ("frobnicate",),
        ("plan", HETEROGENEOUS, "--format", "png"),
        ("plan", HETEROGENEOUS, "--accelerators-per-node", "-1"),
        ("plan", HETEROGENEOUS, "--accelerators-per-node", "eight"),
    ],
)
def test_usage_errors_exit_2(run: Run, argv: tuple[str, ...]) -> None:
    status, _, err = run(*argv)
    assert status == 2
    assert "usage: placement" in err


def test_schema(run: Run) -> None:
    status, out, _ = run("schema")
    assert status == 0
    schema = json.loads(out)
    assert schema["properties"]["cluster"] == {"$ref": "#/$defs/ClusterConfig"}


def test_module_entry_point() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "placement_core", "validate", HETEROGENEOUS],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert "valid" in result.stdout


# --- RLinf jobs ---------------------------------------------------------------------------------

REASONING_JOB = """\
cluster:
  num_nodes: 1
  auto_scheduler: false
  tracer: {enable: false}
  component_placement:
    actor,rollout,reward: all
actor:
  model: {tensor_model_parallel_size: 4}
rollout:
  tensor_parallel_size: 2
"""


def test_validate_names_rlinfs_own_keys_once(
    run: Run, write_file: Callable[[str, str], Path]
) -> None:
    path = write_file("job.yaml", REASONING_JOB)
    status, out, _ = run("validate", str(path), "-a", "8", "--model-parallel")
    assert status == 0
    assert out.splitlines()[0] == (
        f"{path}: note: cluster.auto_scheduler, cluster.tracer: used by RLinf, ignored by placement"
    )
    assert out.count("used by RLinf") == 1


def test_plan_model_parallel_plans_what_rlinf_launches(
    run: Run, write_file: Callable[[str, str], Path]
) -> None:
    path = write_file("job.yaml", REASONING_JOB)
    status, out, err = run("plan", str(path), "-a", "8", "--model-parallel", "-f", "json")
    assert status == 0
    assert err.splitlines()[0] == (
        "placement: model-parallel job in collocated mode: actor, rollout, reward derived "
        "from the parallel sizes as RLinf does"
    )
    # -a 8 says nothing of the GPUs' memory: the check of RLinf's memory keys is skipped.
    assert err.splitlines()[1:] == [
        "placement: note: memory not checked: the GPUs' sizes are unknown (node snapshots, "
        "or an inventory: model or memory_bytes, give them)"
    ]
    rollout = json.loads(out)["components"]["rollout"]
    assert [p["hardware_ranks"] for p in rollout] == [[0, 2], [1, 3], [4, 6], [5, 7]]


def test_plan_without_the_flag_notes_a_model_parallel_job(
    run: Run, write_file: Callable[[str, str], Path]
) -> None:
    path = write_file("job.yaml", REASONING_JOB)
    status, out, err = run("plan", str(path), "-a", "8")
    assert status == 0
    assert err == (
        f"placement: note: {path} has actor.model and rollout sections; RLinf's reasoning and "
        "agent jobs derive actor, rollout, inference, critic and reward from their parallel "
        "sizes instead of these rules: add --model-parallel to plan what RLinf launches\n"
    )
    assert "rollout: 8 processes" in out


def test_a_plain_cluster_config_gets_no_note(run: Run) -> None:
    _, _, err = run("plan", str(EXAMPLES / "colocated_strided.yaml"))
    assert err == ""


def test_model_parallel_errors_name_the_key(
    run: Run, write_file: Callable[[str, str], Path]
) -> None:
    path = write_file(
        "job.yaml", REASONING_JOB.replace("tensor_parallel_size: 2", "tensor_parallel_size: 3")
    )
    status, _, err = run("validate", str(path), "-a", "8", "--model-parallel")
    assert status == 1
    assert err.startswith(f"placement: error: {path}:10: rollout.tensor_parallel_size: must divide")
