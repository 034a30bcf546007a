"""Pre-flight feasibility against per-node totals: 'never' is known before creating."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from placement_ray._feasibility import check_feasible
from placement_ray.errors import ArgumentError, InfeasiblePlacementGroupError

GPU = {"GPU": 1.0, "CPU": 1.0}
NODES = [{"GPU": 4.0, "CPU": 8.0}] * 3


def problems(bundles: list[dict[str, float]], **kw: object) -> list[str]:
    with pytest.raises(InfeasiblePlacementGroupError) as info:
        check_feasible(bundles, NODES, **kw)  # type: ignore[arg-type]
    return list(info.value.problems)


def test_a_group_that_fits_passes() -> None:
    check_feasible([GPU] * 12, NODES)
    check_feasible([GPU] * 4, NODES, strategy="STRICT_PACK")
    check_feasible([GPU] * 3, NODES, strategy="STRICT_SPREAD")


def test_a_bundle_no_node_can_hold() -> None:
    found = problems([GPU, {"GPU": 5.0}])
    assert found == ["bundle 1 {GPU: 5} fits on no node"]


def test_not_enough_gpus_in_total() -> None:
    assert problems([GPU] * 13) == ["the group asks for GPU 13 in total, the cluster has 12"]


def test_strict_pack_beyond_one_node() -> None:
    found = problems([GPU] * 5, strategy="STRICT_PACK")
    assert found == [
        "STRICT_PACK needs one node with {GPU: 5, CPU: 5}; no node has that much in total"
    ]


def test_more_strict_spread_bundles_than_nodes() -> None:
    found = problems([GPU] * 4, strategy="STRICT_SPREAD")
    assert found == [
        "STRICT_SPREAD puts each of the 4 bundles on its own node, the cluster has 3 nodes"
    ]


def test_bundles_pinned_beyond_their_node() -> None:
    found = problems([GPU] * 5, pins=[1] * 5)
    assert found == [
        "5 bundles pinned to node 1 need {GPU: 5, CPU: 5}, it has {GPU: 4, CPU: 8} in total"
    ]


def test_a_single_bundle_too_big_for_its_pinned_node() -> None:
    nodes = [{"GPU": 8.0}, {"GPU": 2.0}]
    with pytest.raises(
        InfeasiblePlacementGroupError, match=r"bundle 0 \{GPU: 4\} is pinned to node 1"
    ):
        check_feasible([{"GPU": 4.0}], nodes, pins=[1])


def test_a_resource_no_node_has() -> None:
    found = problems([{"GPU": 1.0, "TPU": 1.0}])
    assert "bundle 0 {GPU: 1, TPU: 1} fits on no node" in found
    assert "the group asks for TPU 1 in total, the cluster has 0" in found


def test_the_message_shows_what_was_asked_and_what_exists() -> None:
    with pytest.raises(InfeasiblePlacementGroupError) as info:
        check_feasible([GPU] * 13, NODES)
    text = str(info.value)
    assert "asked: 13 bundles, strategy PACK, {GPU: 13, CPU: 13} in total" in text
    assert "node 2: {GPU: 4, CPU: 8}" in text


def test_all_problems_are_reported_together() -> None:
    assert len(problems([{"GPU": 9.0}] * 2, strategy="STRICT_SPREAD")) == 3


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"bundles": []}, "bundles: expected a non-empty list"),
        ({"bundles": [{}]}, r"bundles\[0\]: expected a non-empty mapping"),
        ({"bundles": [{"GPU": -1}]}, r"bundles\[0\]\['GPU'\]: expected .* number >= 0"),
        ({"bundles": [{"GPU": True}]}, r"bundles\[0\]\['GPU'\]"),
        ({"bundles": [{"GPU": 0}]}, r"bundles\[0\]: asks for nothing"),
        ({"bundles": [GPU], "strategy": "TIGHT"}, "strategy: expected one of PACK"),
        ({"bundles": [GPU], "pins": [0, 1]}, "pin_to: expected one node rank"),
        ({"bundles": [GPU], "pins": 0}, "pin_to: expected a list of node ranks"),
        ({"bundles": [GPU], "pins": [3]}, r"pin_to\[0\]: expected a node rank in 0\.\.2"),
    ],
)
def test_malformed_requests_name_the_argument(kwargs: dict[str, object], match: str) -> None:
    bundles = kwargs.pop("bundles")
    with pytest.raises(ArgumentError, match=match):
        check_feasible(bundles, NODES, **kwargs)  # type: ignore[arg-type]


@given(st.integers(1, 12), st.sampled_from(["PACK", "SPREAD"]))
def test_any_gpu_count_up_to_the_total_is_feasible(count: int, strategy: str) -> None:
    check_feasible([GPU] * count, NODES, strategy=strategy)
