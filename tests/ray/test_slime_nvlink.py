"""slime's layouts and NVLink domains: an engine of several nodes takes nodes of one domain.

A node's domain is its name here, or its rank where it has none (a domain of its own), as
placement-core's ``nvlink_domain`` says (docs/concepts/nvlink-domains.md).
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from placement_ray._slime.alignment import align_engines, fitting_engine_sizes
from placement_ray._slime.layout import RoleBundles, _check_engines
from placement_ray.errors import EngineAlignmentError


def engines(pins: list[int], start: int, rollouts: int, size: int) -> list[list[int]]:
    """The nodes each engine's positions are pinned to, as slime slices them."""
    return [sorted(set(pins[p : p + size])) for p in range(start, start + rollouts, size)]


def test_an_engine_that_would_span_two_domains_starts_on_the_next_domain() -> None:
    pins = align_engines(
        [4, 4, 4, 4],
        actors=4,
        start=4,
        rollouts=8,
        total=12,
        engine_size=8,
        domains=["rack-a", "rack-a", "rack-b", "rack-b"],
    )
    assert engines(pins, 4, 8, 8) == [[2, 3]]
    assert pins == [0] * 4 + [2] * 4 + [3] * 4


def test_without_domains_the_same_engine_takes_the_next_whole_nodes() -> None:
    pins = align_engines([4, 4, 4, 4], actors=4, start=4, rollouts=8, total=12, engine_size=8)
    assert engines(pins, 4, 8, 8) == [[1, 2]]


def test_engines_within_one_node_ignore_domains() -> None:
    pins = align_engines(
        [4, 4], actors=0, start=0, rollouts=8, total=8, engine_size=4, domains=["a", "b"]
    )
    assert engines(pins, 0, 8, 4) == [[0], [1]]


def test_nodes_without_a_domain_never_hold_a_multi_node_engine() -> None:
    pins = align_engines(
        [4, 4, 4, 4],
        actors=0,
        start=0,
        rollouts=8,
        total=8,
        engine_size=8,
        domains=[0, 1, "rack-a", "rack-a"],
    )
    assert engines(pins, 0, 8, 8) == [[2, 3]]


def test_engines_no_domain_holds_are_an_error_naming_the_engine_and_domain_sizes() -> None:
    with pytest.raises(EngineAlignmentError) as caught:
        align_engines(
            [4, 4, 4, 4],
            actors=4,
            start=4,
            rollouts=8,
            total=12,
            engine_size=8,
            domains=["rack-a", "rack-a", "rack-b", 3],
        )
    message = str(caught.value)
    assert "1 engines of 8 GPUs span several nodes and must each stay within one NVLink" in message
    assert (
        "NVLink domains: rack-a: 8 GPUs on nodes 0-1, rack-b: 4 GPUs on node 2, "
        "node 3 (no domain): 4 GPUs" in message
    )
    assert "engine sizes that fit: 1, 2, 4" in message
    assert caught.value.fitting_sizes == (1, 2, 4)


def test_scattered_domains_are_an_error_that_says_how_to_number_the_nodes() -> None:
    with pytest.raises(EngineAlignmentError) as caught:
        align_engines(
            [4, 4, 4, 4],
            actors=0,
            start=0,
            rollouts=16,
            total=16,
            engine_size=8,
            domains=["rack-a", "rack-b", "rack-a", "rack-b"],
        )
    assert "rack-a: 8 GPUs on nodes 0,2" in str(caught.value)
    assert "give the nodes node-rank labels domain by domain" in str(caught.value)


def test_fitting_sizes_count_domains() -> None:
    sizes = fitting_engine_sizes(
        [4, 4, 4, 4], start=0, rollouts=16, total=16, domains=["a", "a", "b", "b"]
    )
    assert sizes == [1, 2, 4, 8]


def two_node_engine() -> RoleBundles:
    """One engine of 8 GPUs as Ray placed it: the whole of nodes 0 and 1."""
    return RoleBundles(
        role="rollout",
        pg=None,  # type: ignore[arg-type]  # never used by the check
        bundle_indices=tuple(range(8)),
        node_ranks=(0,) * 4 + (1,) * 4,
        node_ids=("n0",) * 4 + ("n1",) * 4,
        gpu_ids=(0, 1, 2, 3) * 2,
    )


def test_an_engine_ray_placed_on_whole_nodes_of_two_domains_is_refused() -> None:
    with pytest.raises(
        EngineAlignmentError, match="landed on nodes \\[0, 1\\] of different NVLink"
    ):
        _check_engines(two_node_engine(), 8, ["rack-a", "rack-b"])


def test_an_engine_on_whole_nodes_of_one_domain_is_kept() -> None:
    _check_engines(two_node_engine(), 8, ["rack-a", "rack-a"])


@given(
    nodes=st.lists(
        st.tuples(st.sampled_from([2, 4]), st.sampled_from(["a", "b", None])), max_size=8
    ),
    actors=st.integers(0, 8),
    engine_size=st.sampled_from([1, 2, 4, 8, 16]),
    engine_count=st.integers(1, 3),
)
def test_every_multi_node_engine_lies_in_one_domain(
    nodes: list[tuple[int, str | None]], actors: int, engine_size: int, engine_count: int
) -> None:
    capacity = [c for c, _ in nodes]
    domains: list[str | int] = [d if d is not None else i for i, (_, d) in enumerate(nodes)]
    rollouts = engine_size * engine_count
    try:
        pins = align_engines(
            capacity,
            actors=actors,
            start=actors,
            rollouts=rollouts,
            total=actors + rollouts,
            engine_size=engine_size,
            domains=domains,
        )
    except EngineAlignmentError:
        return
    assert pins == sorted(pins)
    for engine in engines(pins, actors, rollouts, engine_size):
        assert len({domains[n] for n in engine}) == 1
