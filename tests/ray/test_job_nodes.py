"""Which live nodes are the job's: a node that offers nothing and has no rank is left out.

Offline, on fake node facts: the rule, the line that names each node left out, and what
discovery and the wait for nodes make of a Ray head started with ``--num-cpus 0``.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from placement_core import RAY_RESOURCES
from placement_ray import ClusterError, NodesNotReadyError, _cluster, _discovery
from placement_ray._job_nodes import counts_while_waiting, job_nodes, left_out_line, offers_nothing
from placement_ray._node_order import NodeFacts

HEAD = NodeFacts("head", "10.0.0.1", "ray-head", resources={"CPU": 0.0, "memory": 1e9})
WORKERS = [
    NodeFacts(f"w{r}", f"10.0.0.{r + 2}", labels={"node-rank": str(r)}, resources={"CPU": 8.0})
    for r in range(2)
]


def _kinds() -> list[str]:
    return sorted({"CPU", *RAY_RESOURCES.values()})


def test_a_head_with_no_cpu_no_accelerator_and_no_rank_is_left_out() -> None:
    kept, left_out = job_nodes([HEAD, *WORKERS])
    assert (kept, left_out) == (WORKERS, [HEAD])


@pytest.mark.parametrize("kind", _kinds())
def test_a_node_offering_cpus_or_any_accelerator_is_the_jobs(kind: str) -> None:
    node = NodeFacts("n", "10.0.0.9", resources={"CPU": 0.0, kind: 1.0})
    assert job_nodes([node]) == ([node], [])


@pytest.mark.parametrize(
    "rank",
    [
        {"labels": {"node-rank": "0"}},
        {"env": {"PLACEMENT_NODE_RANK": "0"}},
        {"env": {"RLINF_NODE_RANK": "0"}},
    ],
)
def test_a_node_with_a_rank_is_the_jobs_even_when_it_offers_nothing(rank: dict[str, Any]) -> None:
    node = NodeFacts("head", "10.0.0.1", resources={"CPU": 0.0}, **rank)
    assert job_nodes([node]) == ([node], [])


@given(
    st.dictionaries(
        st.sampled_from([*_kinds(), "memory", "node:10.0.0.1", "custom"]),
        st.floats(min_value=0, max_value=64, allow_nan=False),
    )
)
def test_offering_nothing_means_no_cpu_and_no_accelerator_resource(
    resources: dict[str, float],
) -> None:
    expected = all(resources.get(kind, 0.0) <= 0 for kind in _kinds())
    assert offers_nothing(resources) is expected


def test_the_line_names_the_node_left_out_and_why() -> None:
    line = left_out_line(HEAD)
    assert line.startswith("node head (10.0.0.1) is not a node of the job")
    assert "0 CPUs, no accelerators" in line
    assert "'node-rank' or PLACEMENT_NODE_RANK" in line


def test_discovery_leaves_the_head_out_and_logs_it(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(_discovery, "discover_nodes", lambda ids, timeout_s: [HEAD, *WORKERS])
    with caplog.at_level(logging.INFO, logger=_discovery.__name__):
        inventory, ordered, warnings = _discovery.discover_inventory(timeout_s=1)
    assert [n.node_id for n in inventory.nodes] == ["w0", "w1"]
    assert (ordered, warnings) == (WORKERS, [])
    assert [r.getMessage() for r in caplog.records] == [left_out_line(HEAD)]


def test_discovery_with_no_node_of_the_job_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_discovery, "discover_nodes", lambda ids, timeout_s: [HEAD])
    with pytest.raises(
        ClusterError, match=r"none of the 1 live nodes is a node of the job: node head"
    ):
        _discovery.discover_inventory(timeout_s=1)


def _entry(node: NodeFacts) -> dict[str, Any]:
    return {
        "NodeID": node.node_id,
        "Alive": True,
        "Labels": node.labels,
        "Resources": node.resources,
    }


def test_the_wait_for_nodes_does_not_count_the_head(monkeypatch: pytest.MonkeyPatch) -> None:
    table = [_entry(HEAD), _entry(WORKERS[0])]
    monkeypatch.setattr(_cluster, "alive_nodes", lambda: table)
    lines: list[str] = []
    with pytest.raises(NodesNotReadyError) as caught:
        _cluster.wait_for_nodes(2, timeout_s=0.01, poll_s=0.01, progress=lines.append)
    assert caught.value.alive == 1
    assert caught.value.missing_ranks == (1,)
    assert lines[0].startswith(
        "1/2 nodes up, waiting for ranks 1 (not counting 1 node(s) with 0 CPUs"
    )
    table.append(_entry(WORKERS[1]))
    assert _cluster.wait_for_nodes(2, timeout_s=1, progress=lines.append) == table


def test_while_waiting_a_node_counts_if_it_offers_something_or_has_a_rank_label() -> None:
    assert not counts_while_waiting(_entry(HEAD))
    assert counts_while_waiting(_entry(WORKERS[0]))
    assert counts_while_waiting({"Labels": {"node-rank": "0"}, "Resources": {}})
    assert counts_while_waiting({"Labels": {}, "Resources": {"NPU": 8.0}})
