"""``placement slurm-topology --segment`` / ``--check-segment``: the segment size to give
``sbatch --segment`` (Slurm's topology/block plugin: segments of N nodes, each inside one
block; a node count above N must be a multiple of it), and the check that a job's
allocation is made of whole segments, each in one NVLink domain."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from placement_core._cli import main
from placement_core._errors import InventoryError
from placement_core._slurm_segments import check_segments, segment_size

from .test_slurm_topology import node
from .test_snapshot_fabric import CLUSTER, OTHER
from .test_sources import snapshot


def rack(name: str, size: int, cluster: str = CLUSTER, clique: int = 1) -> list[dict[str, Any]]:
    return [node(f"{name}-{i:02}", cluster, clique) for i in range(size)]


def hgx(host: str) -> dict[str, Any]:
    data = snapshot(8)
    data["hostname"] = host
    return data


def test_the_segment_is_the_nodes_of_a_domain() -> None:
    assert segment_size(rack("a", 4) + rack("b", 4, OTHER, 2)) == (4, None)


def test_domains_of_different_sizes_give_the_smallest_with_a_note() -> None:
    size, note = segment_size(rack("a", 4) + rack("b", 3, OTHER, 2))
    assert size == 3
    assert note is not None
    assert "1 of 3 nodes, 1 of 4 nodes" in note


def test_no_domain_has_no_segment_size() -> None:
    with pytest.raises(InventoryError, match="no domain size"):
        segment_size([hgx("hgx-01")])


def test_a_job_of_whole_domains_passes() -> None:
    line = check_segments(rack("a", 4) + rack("b", 4, OTHER, 2), 4)
    assert line.startswith("the job's 8 node(s) are 2 whole segment(s) of 4")


def test_two_segments_in_one_domain_pass() -> None:
    assert "2 whole segment(s) of 2" in check_segments(rack("a", 4), 2)


def test_a_job_smaller_than_a_segment_must_lie_in_one_domain() -> None:
    assert "1 whole segment(s) of 3" in check_segments(rack("a", 3), 18)
    with pytest.raises(InventoryError, match="not whole segments of 3"):
        check_segments(rack("a", 2) + rack("b", 1, OTHER, 2), 18)


def test_a_job_split_across_domains_names_each_domain_and_its_nodes() -> None:
    nodes = rack("a", 3) + rack("b", 1, OTHER, 2) + [hgx("hgx-01")]
    with pytest.raises(InventoryError) as caught:
        check_segments(nodes, 2)
    message = str(caught.value)
    assert f"domain {CLUSTER}/1: 3 node(s) (a-00,a-01,a-02)" in message
    assert f"domain {OTHER}/2: 1 node(s) (b-00)" in message
    assert "no NVLink domain: hgx-01" in message
    assert "sbatch --segment=2" in message
    assert caught.value.path == "segment"


def test_segments_of_one_node_accept_nodes_without_a_domain() -> None:
    assert "2 whole segment(s) of 1" in check_segments([hgx("h1"), hgx("h2")], 1)


def test_a_segment_below_one_is_an_error() -> None:
    with pytest.raises(InventoryError, match="segment 0 is not a node count"):
        check_segments(rack("a", 2), 0)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(1, 6), min_size=1, max_size=5), st.integers(1, 8))
def test_the_check_passes_exactly_when_every_domain_holds_whole_segments(
    counts: list[int], segment: int
) -> None:
    nodes = [n for d, count in enumerate(counts) for n in rack(f"r{d}", count, CLUSTER, d)]
    whole = min(segment, len(nodes))
    if all(count % whole == 0 for count in counts):
        check_segments(nodes, segment)
    else:
        with pytest.raises(InventoryError, match="Slurm split the job across domains"):
            check_segments(nodes, segment)


def _files(tmp_path: Path, snapshots: list[dict[str, Any]]) -> list[str]:
    paths = []
    for i, data in enumerate(snapshots):
        path = tmp_path / f"node{i}.json"
        path.write_text(json.dumps(data))
        paths.append(str(path))
    return paths


def test_the_cli_prints_the_segment_size(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    paths = _files(tmp_path, rack("a", 3) + rack("b", 2, OTHER, 2))
    assert main(["slurm-topology", "--segment", *paths]) == 0
    captured = capsys.readouterr()
    assert captured.out == "2\n"
    assert "the domains differ in size" in captured.err


def test_the_cli_check_exits_1_naming_the_split(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    paths = _files(tmp_path, rack("a", 1) + rack("b", 1, OTHER, 2))
    assert main(["slurm-topology", "--check-segment", "2", *paths]) == 1
    assert "Slurm split the job across domains" in capsys.readouterr().err


def test_the_cli_check_says_when_the_job_is_whole(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    paths = _files(tmp_path, rack("a", 2))
    assert main(["slurm-topology", "--check-segment", "2", *paths]) == 0
    assert "1 whole segment(s) of 2" in capsys.readouterr().out
