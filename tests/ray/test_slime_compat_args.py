"""slime's ``args`` read by the drop-in: what is read, what is refused, before Ray."""

from __future__ import annotations

from argparse import Namespace
from typing import Any

import pytest

from placement_ray import ArgumentError
from placement_ray.compat.slime import SLIME_ARGS, create_placement_groups


def args_without(name: str, **overrides: Any) -> Namespace:
    values: dict[str, Any] = {
        "actor_num_nodes": 1,
        "actor_num_gpus_per_node": 4,
        "rollout_num_gpus": 4,
        "rollout_num_gpus_per_engine": 1,
        "colocate": False,
        "debug_train_only": False,
        "debug_rollout_only": False,
        "rollout_external": False,
        "use_critic": False,
        **overrides,
    }
    values.pop(name, None)
    return Namespace(**values)


@pytest.mark.parametrize("name", SLIME_ARGS)
def test_a_missing_attribute_is_named(name: str) -> None:
    with pytest.raises(ArgumentError, match=rf"^args\.{name}: missing"):
        create_placement_groups(args_without(name))


@pytest.mark.parametrize(
    ("name", "value", "match"),
    [
        ("actor_num_nodes", "2", r"args\.actor_num_nodes: expected an int >= 0, got '2'"),
        ("actor_num_gpus_per_node", 1.0, r"args\.actor_num_gpus_per_node: expected an int"),
        ("rollout_num_gpus", None, r"args\.rollout_num_gpus: expected an int >= 0, got None"),
        ("rollout_num_gpus_per_engine", 0, r"args\.rollout_num_gpus_per_engine: .* >= 1, got 0"),
        ("colocate", 1, r"args\.colocate: expected True or False, got 1"),
        ("use_critic", None, r"args\.use_critic: expected True or False, got None"),
    ],
)
def test_an_ill_typed_attribute_is_named(name: str, value: object, match: str) -> None:
    with pytest.raises(ArgumentError, match=match):
        create_placement_groups(args_without("", **{name: value}))


def test_slimes_contradicting_debug_flags_are_refused() -> None:
    args = args_without("", debug_train_only=True, debug_rollout_only=True)
    with pytest.raises(ArgumentError, match="at most one may be set"):
        create_placement_groups(args)
