"""Node order as a pure function of what each node reported.

See docs/concepts/node-order.md.
"""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from placement_ray._node_order import NodeFacts, ip_sort_key, natural_key, order_nodes
from placement_ray.errors import NodeOrderError


def facts(node_id: str, ip: str = "10.0.0.1", hostname: str = "h", **kw: object) -> NodeFacts:
    return NodeFacts(node_id=node_id, ip=ip, hostname=hostname, **kw)  # type: ignore[arg-type]


def ids(nodes: list[NodeFacts]) -> list[str]:
    return [n.node_id for n in nodes]


def test_node_rank_labels_give_the_order() -> None:
    nodes = [facts(f"n{i}", labels={"node-rank": str(r)}) for i, r in enumerate([2, 0, 1])]
    ordered, _ = order_nodes(nodes)
    assert ids(ordered) == ["n1", "n2", "n0"]


@pytest.mark.parametrize("var", ["PLACEMENT_NODE_RANK", "RLINF_NODE_RANK"])
def test_node_rank_env_vars_give_the_order(var: str) -> None:
    nodes = [facts(f"n{i}", env={var: str(r)}) for i, r in enumerate([1, 2, 0])]
    ordered, _ = order_nodes(nodes)
    assert ids(ordered) == ["n2", "n0", "n1"]


def test_explicit_rank_beats_the_driver_and_ip() -> None:
    nodes = [
        facts("a", ip="10.0.0.1", is_driver=True, labels={"node-rank": "1"}),
        facts("b", ip="10.0.0.9", labels={"node-rank": "0"}),
    ]
    assert ids(order_nodes(nodes)[0]) == ["b", "a"]


def test_some_nodes_with_a_rank_and_some_without_is_an_error() -> None:
    nodes = [facts("a", env={"PLACEMENT_NODE_RANK": "0"}), facts("b")]
    with pytest.raises(NodeOrderError, match=r"1 of 2 nodes have a rank .* b \(10\.0\.0\.1\)"):
        order_nodes(nodes)


def test_repeated_ranks_are_an_error() -> None:
    nodes = [facts("a", labels={"node-rank": "0"}), facts("b", labels={"node-rank": "0"})]
    with pytest.raises(NodeOrderError, match="rank 0: a, b"):
        order_nodes(nodes)


def test_ranks_with_a_gap_are_an_error() -> None:
    nodes = [facts("a", labels={"node-rank": "0"}), facts("b", labels={"node-rank": "2"})]
    with pytest.raises(NodeOrderError, match=r"exactly 0\.\.1 for 2 nodes, got \[0, 2\]"):
        order_nodes(nodes)


@pytest.mark.parametrize("value", ["-1", "one", "1.0", "", "\u00b2"])
def test_a_rank_that_is_not_an_int_is_an_error(value: str) -> None:
    with pytest.raises(NodeOrderError, match="PLACEMENT_NODE_RANK must be an int >= 0"):
        order_nodes([facts("a", env={"PLACEMENT_NODE_RANK": value})])


def test_label_and_env_var_that_disagree_are_an_error() -> None:
    node = facts("a", labels={"node-rank": "0"}, env={"RLINF_NODE_RANK": "1"})
    with pytest.raises(NodeOrderError, match="conflicting ranks"):
        order_nodes([node])


def test_driver_node_comes_first_then_ips_as_numbers() -> None:
    nodes = [
        facts("a", ip="10.0.0.10"),
        facts("b", ip="10.0.0.9"),
        facts("c", ip="10.0.0.100", is_driver=True),
        facts("d", ip="9.0.0.1"),
    ]
    assert ids(order_nodes(nodes)[0]) == ["c", "d", "b", "a"]


def test_ipv4_before_ipv6_and_ipv6_by_value() -> None:
    keys = sorted(["fe80::2", "10.0.0.1", "::1", "fe80::10"], key=ip_sort_key)
    assert keys == ["10.0.0.1", "::1", "fe80::2", "fe80::10"]


def test_same_ip_falls_back_to_natural_hostname_then_node_id() -> None:
    nodes = [
        facts("z", hostname="node10"),
        facts("y", hostname="node9"),
        facts("b", hostname="node9"),
    ]
    assert ids(order_nodes(nodes)[0]) == ["b", "y", "z"]


def test_natural_key_orders_numbers_by_value() -> None:
    names = ["node10", "node9", "Node2", "node1-gpu10", "node1-gpu9"]
    assert sorted(names, key=natural_key) == [
        "node1-gpu9",
        "node1-gpu10",
        "Node2",
        "node9",
        "node10",
    ]


def test_nodes_sharing_an_ip_get_a_warning_naming_their_ranks() -> None:
    nodes = [facts(f"n{i}", ip="127.0.0.1", labels={"node-rank": str(i)}) for i in range(3)]
    nodes.append(facts("x", ip="10.0.0.1", labels={"node-rank": "3"}))
    _, warnings = order_nodes(nodes)
    assert len(warnings) == 1
    assert "nodes 0, 1, 2 share IP 127.0.0.1" in warnings[0]


def test_distinct_ips_give_no_warning() -> None:
    _, warnings = order_nodes([facts("a", ip="10.0.0.1"), facts("b", ip="10.0.0.2")])
    assert warnings == []


node_strategy = st.builds(
    lambda i, ip, host, driver: facts(f"id{i:04d}", ip=ip, hostname=host, is_driver=driver),
    st.integers(0, 9999),
    st.sampled_from(["10.0.0.1", "10.0.0.10", "10.0.0.9", "::1", "127.0.0.1"]),
    st.sampled_from(["node1", "node2", "node10", "gpu-a"]),
    st.booleans(),
)


@given(st.lists(node_strategy, min_size=1, max_size=12, unique_by=lambda n: n.node_id))
def test_order_does_not_depend_on_input_order(nodes: list[NodeFacts]) -> None:
    shuffled = list(nodes)
    random.Random(0).shuffle(shuffled)
    assert ids(order_nodes(nodes)[0]) == ids(order_nodes(shuffled)[0])


@given(st.permutations(range(6)))
def test_explicit_ranks_are_followed_whatever_the_ips(ranks: list[int]) -> None:
    nodes = [
        facts(f"n{r}", ip=f"10.0.0.{9 - i}", env={"PLACEMENT_NODE_RANK": str(r)})
        for i, r in enumerate(ranks)
    ]
    assert ids(order_nodes(nodes)[0]) == [f"n{r}" for r in range(6)]
