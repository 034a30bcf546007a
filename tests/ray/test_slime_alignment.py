"""Which node each bundle of a slime layout is pinned to: engines keep to one node."""

from __future__ import annotations

import pytest

from placement_ray._slime.alignment import align_engines, fitting_engine_sizes
from placement_ray.errors import EngineAlignmentError, InfeasiblePlacementGroupError


def engines(pins: list[int], start: int, rollouts: int, size: int) -> list[set[int]]:
    """The nodes each engine's positions are pinned to, as slime slices them."""
    return [set(pins[p : p + size]) for p in range(start, start + rollouts, size)]


def test_a_trainer_of_half_a_node_pushes_the_first_engine_to_the_next_node() -> None:
    pins = align_engines([8, 8], actors=4, start=4, rollouts=8, total=12, engine_size=8)
    assert pins == [0] * 4 + [1] * 8
    assert engines(pins, 4, 8, 8) == [{1}]


def test_engines_that_fit_the_trainers_leftover_use_it() -> None:
    pins = align_engines([8, 8], actors=4, start=4, rollouts=8, total=12, engine_size=4)
    assert pins == [0] * 8 + [1] * 4
    assert engines(pins, 4, 8, 4) == [{0}, {1}]


def test_an_engine_bigger_than_a_node_takes_whole_nodes() -> None:
    pins = align_engines([4, 4, 4], actors=4, start=4, rollouts=8, total=12, engine_size=8)
    assert pins == [0] * 4 + [1] * 4 + [2] * 4


def test_an_engine_bigger_than_a_node_skips_a_partly_used_node() -> None:
    pins = align_engines([4, 4, 4], actors=2, start=2, rollouts=8, total=10, engine_size=8)
    assert pins == [0, 0] + [1] * 4 + [2] * 4


def test_colocated_engines_start_at_position_zero() -> None:
    pins = align_engines([4, 4], actors=6, start=0, rollouts=6, total=6, engine_size=3)
    assert engines(pins, 0, 6, 3) == [{0}, {1}]
    assert pins == [0, 0, 0, 1, 1, 1]


def test_colocated_trainer_ranks_beyond_the_rollout_fill_what_is_left() -> None:
    pins = align_engines([4, 4], actors=7, start=0, rollouts=6, total=7, engine_size=3)
    assert pins == [0, 0, 0, 1, 1, 1, 1]


def test_nodes_without_gpus_are_skipped() -> None:
    pins = align_engines([0, 4, 4], actors=2, start=2, rollouts=4, total=6, engine_size=4)
    assert pins == [1, 1, 2, 2, 2, 2]


def test_no_alignment_names_the_engine_sizes_that_fit() -> None:
    with pytest.raises(EngineAlignmentError, match=r"engine sizes that fit: 1$") as caught:
        align_engines([4, 4, 4], actors=2, start=2, rollouts=9, total=11, engine_size=3)
    assert caught.value.fitting_sizes == (1,)
    assert isinstance(caught.value, InfeasiblePlacementGroupError)


def test_the_message_names_the_nodes_and_the_trainer() -> None:
    with pytest.raises(EngineAlignmentError, match=r"trainer's 6 GPUs come first.*node 2: 4"):
        align_engines([4, 4, 4], actors=6, start=6, rollouts=6, total=12, engine_size=3)


def test_engines_that_do_not_divide_the_rollout_are_named() -> None:
    with pytest.raises(EngineAlignmentError, match="6 rollout GPUs do not divide into engines"):
        align_engines([8], actors=0, start=0, rollouts=6, total=6, engine_size=4)


def test_a_multi_node_engine_needs_nodes_of_one_size() -> None:
    assert fitting_engine_sizes([4, 2, 4], start=0, rollouts=8, total=8) == [1, 2, 4]
    assert fitting_engine_sizes([4, 4, 4], start=0, rollouts=8, total=8) == [1, 2, 4, 8]


def test_no_size_fits_says_so() -> None:
    with pytest.raises(EngineAlignmentError, match="no engine size fits"):
        align_engines([4, 4], actors=0, start=0, rollouts=10, total=10, engine_size=5)
