"""What a fuzzer met on the model-parallel paths, references, names and files (issue 16,
items 7-13, and the YAML error at a file's end of item 5): each case as it was found, with
the limit it now meets. Cases that used to hang or eat memory run bounded (a subprocess
under a memory cap and a timeout), as in test_hostile.py.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from placement_core import (
    ConfigError,
    Inventory,
    InventoryError,
    load_config,
    plan,
    plan_model_parallel,
)
from placement_core._limits import MAX_REFERENCE_DEPTH, MAX_RESOLVED_SIZE
from placement_core._sources import inventory_for
from placement_core.render import plan_to_dict, render_json, write_json

from .test_hostile import assert_clean_failure, bounded, cli

# --- helpers ------------------------------------------------------------------------------


def job(
    placement: dict[str, Any] | None = None,
    *,
    nodes: int = 2,
    actor: dict[str, Any] | None = None,
    rollout: dict[str, Any] | None = None,
    **sections: Any,
) -> dict[str, Any]:
    """A reasoning job on ``nodes`` x 8 GPUs, actor TP 2 and rollout TP 2 by default."""
    return {
        "cluster": {
            "num_nodes": nodes,
            "component_placement": placement or {"actor,rollout,reward": "all"},
            "inventory": [{"node_ranks": "all", "accelerators": {"count": 8}}],
        },
        "runner": {"task_type": "reasoning"},
        "actor": {"model": {"tensor_model_parallel_size": 2, **(actor or {})}},
        "rollout": {"tensor_parallel_size": 2, **(rollout or {})},
        **sections,
    }


def refused(document: dict[str, Any]) -> str:
    with pytest.raises(ConfigError) as caught:
        plan_model_parallel(document)
    return str(caught.value.problems[0])


def write(tmp_path: Path, document: dict[str, Any] | str, name: str = "job.yaml") -> str:
    path = tmp_path / name
    text = document if isinstance(document, str) else yaml.safe_dump(document)
    path.write_text(text, encoding="utf-8")
    return str(path)


# --- 7. every parallel size RLinf reads is checked ----------------------------------------


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("pipeline_model_parallel_size", -5),
        ("context_parallel_size", "banana"),
        ("pipeline_model_parallel_size", 0),
        ("context_parallel_size", True),
    ],
)
def test_an_actor_size_of_the_wrong_type_or_bound_is_refused(key: str, value: Any) -> None:
    assert refused(job(actor={key: value})) == (
        f"actor.model.{key}: expected an integer >= 1 (got {value!r})"
    )


def test_actor_sizes_whose_product_exceeds_its_gpus_are_refused() -> None:
    sizes = {"tensor_model_parallel_size": 8, "pipeline_model_parallel_size": 8}
    sizes["context_parallel_size"] = 8
    assert refused(job(actor=sizes, rollout={"tensor_parallel_size": 8})) == (
        "actor.model: actor's 16 accelerator(s) are not a multiple of its tensor x pipeline x "
        "context parallel sizes (8 x 8 x 8 = 512), so its data-parallel size would not be a "
        "whole number"
    )


def test_actor_tp_3_on_8_gpus_in_disaggregated_mode_is_refused() -> None:
    document = job(
        {"actor": "0-7", "rollout": "8-15", "reward": "0-7"},
        actor={"tensor_model_parallel_size": 3},
    )
    assert "(3 x 1 x 1 = 3)" in refused(document)


def test_actor_pipeline_and_context_sizes_that_divide_plan() -> None:
    document = job(actor={"pipeline_model_parallel_size": 2, "context_parallel_size": 2})
    assert len(plan_model_parallel(document).placements("actor")) == 16


@pytest.mark.parametrize("value", [0, "x", -1, 1.5])
def test_a_collocated_rollout_pipeline_size_is_checked_though_unused(value: Any) -> None:
    assert refused(job(rollout={"pipeline_parallel_size": value})) == (
        f"rollout.pipeline_parallel_size: expected an integer >= 1 (got {value!r})"
    )


def test_a_critic_model_with_sizes_that_do_not_divide_its_gpus_is_refused() -> None:
    document = job(
        {"actor,rollout,reward,critic": "all"},
        critic={"model": {"tensor_model_parallel_size": 3}},
    )
    assert refused(document).startswith("critic.model: critic's 16 accelerator(s)")


# --- 8. references are bounded in depth and in size ---------------------------------------


def doubling(levels: int) -> str:
    lines = ["cluster:", "  num_nodes: 1", f"  component_placement: {{actor: '${{e{levels}}}'}}"]
    lines.append("e0: x")
    lines += [f"e{i}: ${{e{i - 1}}}${{e{i - 1}}}" for i in range(1, levels + 1)]
    return "\n".join(lines) + "\n"


def chain(length: int) -> str:
    lines = ["cluster:", "  num_nodes: ${c0}", "  component_placement: {actor: 0}"]
    lines += [f"c{i}: ${{c{i + 1}}}" for i in range(length)]
    return "\n".join([*lines, f"c{length}: 1"]) + "\n"


@pytest.mark.parametrize("model_parallel", [False, True])
def test_references_that_double_at_each_step_stop_at_the_size_limit(
    tmp_path: Path, model_parallel: bool
) -> None:
    text = doubling(40) + "runner: {task_type: reasoning}\n"
    path = write(tmp_path, text)
    result = cli("plan", path, "-a", "8", *(["--model-parallel"] if model_parallel else []))
    assert_clean_failure(result)
    steps = (MAX_RESOLVED_SIZE).bit_length()  # e_k is 2**k characters long
    assert f"e{steps}: its references resolve to more than {MAX_RESOLVED_SIZE:,}" in result.stderr


def test_a_chain_of_references_is_refused_at_the_depth_limit(tmp_path: Path) -> None:
    result = cli("validate", write(tmp_path, chain(330)), "-a", "1")
    assert_clean_failure(result)
    assert f"references lead through more than {MAX_REFERENCE_DEPTH} others" in result.stderr
    assert "RecursionError" not in result.stderr


def test_a_chain_within_the_depth_limit_resolves() -> None:
    config = load_config(chain(MAX_REFERENCE_DEPTH - 1))
    assert config.num_nodes == 1


def test_references_repeated_in_lists_count_their_entries() -> None:
    lines = ["cluster:", "  num_nodes: 1", "  component_placement: {actor: 0}"]
    lines += ["  inventory: ${l40}", "l0: [1]"]
    lines += [f"l{i}: ['${{l{i - 1}}}', '${{l{i - 1}}}']" for i in range(1, 41)]
    message = bounded_error("\n".join(lines) + "\n")
    assert "resolve to more than" in message


def test_references_through_deeply_nested_mappings_are_refused_by_name() -> None:
    lines = ["cluster:", "  num_nodes: 1", "  component_placement: {actor: '${a0}'}"]
    for i in range(MAX_REFERENCE_DEPTH):
        nested: Any = f"${{a{i + 1}}}"
        for _ in range(90):
            nested = {"k": nested}
        lines.append(f"a{i}: {json.dumps(nested)}")
    lines.append(f"a{MAX_REFERENCE_DEPTH}: 0")
    assert bounded_error("\n".join(lines) + "\n") == (
        "cluster.component_placement: its references lead through mappings nested too deeply\n"
    )


def bounded_error(text: str) -> str:
    result = bounded(
        """
        import sys
        from placement_core import ConfigError, load_config
        try:
            load_config(sys.argv[1])
        except ConfigError as error:
            print(error.problems[0])
        """,
        text,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout


# --- 9. every path counts before it builds ------------------------------------------------


def test_a_model_parallel_job_of_100000_huge_nodes_is_refused_before_building(
    tmp_path: Path,
) -> None:
    document = job(nodes=100_000)
    del document["cluster"]["inventory"]
    path = write(tmp_path, document)
    result = cli("plan", path, "-a", "1024", "--model-parallel", "--max-processes", "1000")
    assert_clean_failure(result)
    assert "the plan would make 256,000,000 processes" in result.stderr
    assert "MemoryError" not in result.stderr


# --- 10. JSON is written as a stream -------------------------------------------------------


def test_streamed_json_is_json_dumps_of_the_plan() -> None:
    result = plan(
        {"cluster": {"num_nodes": 2, "component_placement": {"a": "0-15", "b": "0-1"}}},
        Inventory.uniform(2, 8),
    )
    for indent in (2, None, 4):
        out = io.StringIO()
        write_json(result, out, indent=indent)
        assert out.getvalue() == json.dumps(plan_to_dict(result), indent=indent) + "\n"
        assert render_json(result, indent=indent) == out.getvalue()


class _Recorder(io.StringIO):
    def __init__(self) -> None:
        super().__init__()
        self.largest = 0

    def write(self, text: str) -> int:
        self.largest = max(self.largest, len(text))
        return super().write(text)


def test_json_is_written_one_record_at_a_time() -> None:
    # The figure for 100,000 nodes x 8 GPUs is measured, not tested: see
    # docs/reference/limits.md. Here: no write holds more than one placement or node.
    result = plan(
        {"cluster": {"num_nodes": 64, "component_placement": {"a": "all"}}},
        Inventory.uniform(64, 8),
    )
    out = _Recorder()
    write_json(result, out)
    assert len(out.getvalue()) > 500_000
    assert out.largest < 3_000


# --- 11. control characters in names ------------------------------------------------------


def test_a_component_name_with_terminal_escapes_is_refused_naming_it() -> None:
    config = {"cluster": {"num_nodes": 1, "component_placement": {"x\n\x1b[31mEVIL": "0"}}}
    with pytest.raises(ConfigError) as caught:
        load_config(config)
    assert str(caught.value.problems[0]) == (
        "cluster.component_placement: the key 'x\\n\\x1b[31mEVIL' holds the control "
        "character U+000A; names and values are printed in tables and terminals, so "
        "control characters are refused"
    )


@pytest.mark.parametrize("char", ["\x1b", "\t", "\x7f", "\x9b", "\x00"])
def test_a_group_label_with_a_control_character_is_refused(char: str) -> None:
    config = {
        "cluster": {
            "num_nodes": 1,
            "component_placement": {"a": {"node_group": f"g{char}", "placement": "0"}},
            "node_groups": [{"label": f"g{char}", "node_ranks": "0"}],
        }
    }
    with pytest.raises(ConfigError) as caught:
        load_config(config)
    assert [problem.path for problem in caught.value.problems] == [
        "cluster.component_placement.a.node_group",
        "cluster.node_groups[0].label",
    ]


def test_an_environment_value_may_hold_a_newline() -> None:
    env = {"env_configs": [{"node_ranks": "0", "env_vars": [{"MULTI": "a\nb"}]}]}
    config = {
        "cluster": {
            "num_nodes": 1,
            "component_placement": {"a": {"node_group": "g", "placement": "0"}},
            "node_groups": [{"label": "g", "node_ranks": "0", **env}],
        }
    }
    assert plan(config, Inventory.uniform(1, 1)).env("a", 0)["MULTI"] == "a\nb"


def test_the_cli_never_prints_a_raw_escape(tmp_path: Path) -> None:
    text = 'cluster:\n  num_nodes: 1\n  component_placement:\n    "x\\e[31mEVIL": 0\n'
    result = cli("plan", write(tmp_path, text), "-a", "1")
    assert_clean_failure(result)
    assert "\x1b" not in result.stderr
    assert "'x\\x1b[31mEVIL'" in result.stderr


def test_a_snapshot_hostname_with_an_escape_is_shown_escaped(tmp_path: Path) -> None:
    snapshot = {"schema": 1, "hostname": "evil\x1b[2J", "ip": "10.0.0.1", "accelerators": []}
    (tmp_path / "node0.json").write_text(json.dumps(snapshot), encoding="utf-8")
    config = write(
        tmp_path,
        "cluster: {num_nodes: 1, component_placement: {a: {node_group: node, placement: 0}}}\n",
        "c.yaml",
    )
    result = cli("plan", config, "-i", str(tmp_path / "node0.json"), "--format", "map")
    assert "\x1b" not in result.stdout + result.stderr


# --- 12. values placement does not read are left as they are ------------------------------


@pytest.mark.parametrize(
    ("section", "key", "value"),
    [
        ("rollout", "model_dir", "${oc.env:MODEL_DIR}"),
        ("actor", "model_path", "${..x}"),
        ("rollout", "model_dir", "${oc.env:HOME}/${.name}"),
    ],
)
def test_a_resolver_in_a_key_placement_ignores_is_left_alone(
    section: str, key: str, value: str
) -> None:
    document = job()
    target = document["actor"]["model"] if key == "model_path" else document[section]
    target[key] = value
    assert len(plan_model_parallel(document).placements("rollout")) == 8


def test_a_resolver_in_a_size_placement_reads_is_still_an_error() -> None:
    assert "cannot resolve '${oc.env:TP}'" in refused(
        job(rollout={"tensor_parallel_size": "${oc.env:TP}"})
    )


# --- 13. paths are paths; JSON duplicates are refused -------------------------------------


def test_an_existing_file_whose_name_holds_a_newline_is_read_as_a_file(tmp_path: Path) -> None:
    path = write(tmp_path, "cluster: {num_nodes: 3, component_placement: {a: 0}}\n", "we\nird.yaml")
    assert load_config(path).num_nodes == 3


def test_text_with_a_newline_that_names_no_file_is_yaml() -> None:
    assert load_config("cluster:\n  num_nodes: 4\n  component_placement: {a: 0}\n").num_nodes == 4


def test_a_snapshot_with_a_duplicate_key_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "node0.json"
    path.write_text('{"schema": 1, "hostname": "a", "hostname": "b", "accelerators": []}')
    config = load_config("cluster: {num_nodes: 1, component_placement: {a: 0}}")
    with pytest.raises(InventoryError) as caught:
        inventory_for(config, snapshots=[path])
    assert str(caught.value) == (
        f"{path}: invalid snapshot: the key 'hostname' appears twice in one JSON object"
    )


# --- 5. a YAML syntax error at the end of a file ------------------------------------------


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ("cluster:\n  num_nodes: 1\n  component_placement:\n    actor: [0-1\n", "4:16"),
        ("cluster:\n  num_nodes: 1\n  component_placement: {actor: 0-1\n", "3:35"),
        ('cluster:\n  num_nodes: 1\n  component_placement:\n    actor: "0-1\n', "4:16"),
        ("cluster:\n  num_nodes: 1\n  component_placement:\n    actor: [0-1", "4:16"),
    ],
)
def test_a_syntax_error_at_the_end_points_at_the_last_line(text: str, where: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(text)
    assert caught.value.problems[0].path == f"<string>:{where}"
    assert int(where.split(":")[0]) <= len(text.splitlines())
