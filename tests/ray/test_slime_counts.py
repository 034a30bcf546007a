"""slime's modes as tabled in docs/concepts/slime-layouts.md, without a cluster."""

from __future__ import annotations

import pytest

from placement_ray._slime.layout import create_placement_groups, slime_bundle_counts
from placement_ray.errors import ArgumentError


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        ({}, ("disaggregated", 12, 8, 8, 4)),
        ({"colocate": True}, ("colocate", 8, 8, 0, 4)),
        ({"debug_train_only": True}, ("debug_train_only", 8, 8, 0, 0)),
        ({"debug_rollout_only": True}, ("debug_rollout_only", 4, 0, 0, 4)),
        ({"rollout_external": True}, ("rollout_external", 8, 8, 8, 0)),
        (
            {"rollout_external": True, "debug_rollout_only": True},
            ("rollout_external_debug_rollout_only", 8, 8, 0, 0),
        ),
        ({"rollout_external": True, "colocate": True}, ("rollout_external", 8, 8, 8, 0)),
        ({"rollout_external": True, "debug_train_only": True}, ("debug_train_only", 8, 8, 0, 0)),
    ],
)
def test_spec_10_table(flags: dict[str, bool], expected: tuple[object, ...]) -> None:
    assert slime_bundle_counts(2, 4, 4, **flags) == expected


def test_colocate_takes_the_larger_of_actor_and_rollout_gpus() -> None:
    assert slime_bundle_counts(1, 4, 6, colocate=True) == ("colocate", 6, 4, 0, 6)


def test_debug_flags_win_over_colocate_as_in_slime() -> None:
    assert slime_bundle_counts(1, 4, 2, colocate=True, debug_train_only=True)[0] == (
        "debug_train_only"
    )


def test_both_debug_flags_are_an_error() -> None:
    with pytest.raises(ArgumentError, match="at most one may be set"):
        slime_bundle_counts(1, 4, 4, debug_train_only=True, debug_rollout_only=True)


@pytest.mark.parametrize(
    ("args", "match"),
    [
        ((1.5, 4, 4), "actor_num_nodes: expected an int >= 0, got 1.5"),
        ((1, True, 4), "actor_num_gpus_per_node: expected an int >= 0, got True"),
        ((1, 4, -1), "rollout_num_gpus: expected an int >= 0, got -1"),
        ((0, 4, 0), "disaggregated .* reserves no GPU"),
    ],
)
def test_bad_counts_name_the_argument(args: tuple[object, ...], match: str) -> None:
    with pytest.raises(ArgumentError, match=match):
        slime_bundle_counts(*args)  # type: ignore[arg-type]


def test_zero_rollout_gpus_leave_an_empty_rollout_slice_at_the_end_as_in_slime() -> None:
    assert slime_bundle_counts(2, 4, 0) == ("disaggregated", 8, 8, 8, 0)


@pytest.mark.parametrize("flag", ["colocate", "rollout_external", "use_critic"])
def test_a_flag_that_is_not_a_bool_is_named(flag: str) -> None:
    with pytest.raises(ArgumentError, match=f"{flag}: expected True or False, got 1"):
        create_placement_groups(2, 4, 4, **{flag: 1})  # type: ignore[arg-type]


def test_engine_size_below_one_is_named() -> None:
    with pytest.raises(ArgumentError, match="rollout_num_gpus_per_engine: expected an int >= 1"):
        create_placement_groups(2, 4, 4, rollout_num_gpus_per_engine=0)


@pytest.mark.parametrize("cpus", [-1, float("inf"), float("nan"), "1", True])
def test_bad_cpus_per_bundle_is_an_error_before_ray_is_touched(cpus: object) -> None:
    with pytest.raises(ArgumentError, match="cpus_per_bundle: expected a finite number >= 0"):
        create_placement_groups(2, 4, 4, cpus_per_bundle=cpus)  # type: ignore[arg-type]
