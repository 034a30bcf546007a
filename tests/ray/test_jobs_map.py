"""``python -m placement_ray jobs --map``'s node x GPU map, drawn without Ray."""

from __future__ import annotations

from placement_ray._jobs_cli import render_node_map

NODES = [(0, "aaaaaaaaaaaaaaaa", (0, 1, 2, 3)), (1, "bbbbbbbbbbbbbbbb", (0, 1))]


def lease(job: str, node_id: str, accelerator: int) -> dict[str, object]:
    return {"job": job, "node_id": node_id, "accelerator": accelerator}


def test_each_gpu_names_the_job_holding_it_and_free_ones_are_dots() -> None:
    text = render_node_map(NODES, [lease("job-a", "aaaaaaaaaaaaaaaa", 1)])
    lines = text.splitlines()
    assert lines[1].split() == ["NODE", "NODE", "ID", "0", "1", "2", "3"]
    assert lines[2].split() == ["0", "aaaaaaaaaaaa", ".", "job-a", ".", "."]
    assert lines[3].split() == ["1", "bbbbbbbbbbbb", ".", "."]


def test_jobs_sharing_a_gpu_are_joined_with_a_plus() -> None:
    shared = [lease("a", "bbbbbbbbbbbbbbbb", 0), lease("b", "bbbbbbbbbbbbbbbb", 0)]
    assert render_node_map(NODES, shared).splitlines()[3].split()[2] == "a+b"


def test_without_a_ledger_the_map_says_so() -> None:
    assert render_node_map([], []) == "map: no node (no job started a lease ledger)"
