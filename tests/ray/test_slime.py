"""slime's layouts on the simulated cluster: every mode's slices.

See docs/concepts/slime-layouts.md.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from ray.util.placement_group import placement_group_table

from placement_ray._cluster import Cluster
from placement_ray._slime.layout import RoleBundles, create_placement_groups
from placement_ray.errors import InfeasiblePlacementGroupError

from .conftest import GPUS_PER_NODE


def assert_ordered_whole_nodes(role: RoleBundles) -> None:
    """Ranks run node by node, GPU by GPU: never interleaved across nodes."""
    pairs = list(zip(role.node_ranks, role.gpu_ids, strict=True))
    assert pairs == sorted(pairs)
    assert len(set(pairs)) == len(pairs)
    assert all(0 <= gpu < GPUS_PER_NODE for gpu in role.gpu_ids)


def test_disaggregated_actor_takes_the_first_bundles_rollout_the_rest(
    placement_cluster: Cluster,
) -> None:
    layout = create_placement_groups(2, 4, 4, cluster=placement_cluster)
    actor, rollout = layout["actor"], layout["rollout"]
    assert layout.mode == "disaggregated"
    assert (len(actor), len(rollout)) == (8, 4)
    assert actor.node_ranks == (0, 0, 0, 0, 1, 1, 1, 1)
    assert actor.gpu_ids == (0, 1, 2, 3, 0, 1, 2, 3)
    assert rollout.node_ranks == (2, 2, 2, 2)
    assert rollout.gpu_ids == (0, 1, 2, 3)
    assert actor.pg == rollout.pg == layout.group.pg
    assert set(actor.bundle_indices).isdisjoint(rollout.bundle_indices)
    assert actor.bundle_indices + rollout.bundle_indices == layout.group.bundle_indices


def test_bundles_are_one_gpu_and_one_cpu(placement_cluster: Cluster) -> None:
    layout = create_placement_groups(1, 2, 1, cluster=placement_cluster)
    bundles = placement_group_table(layout.group.pg)["bundles"]
    assert list(bundles.values()) == [{"GPU": 1.0, "CPU": 1.0}] * 3


def test_colocate_gives_both_roles_the_same_bundles(placement_cluster: Cluster) -> None:
    layout = create_placement_groups(2, 4, 8, colocate=True, cluster=placement_cluster)
    assert layout.mode == "colocate"
    assert len(layout.group.slots) == 8
    assert layout["actor"].bundle_indices == layout["rollout"].bundle_indices
    assert_ordered_whole_nodes(layout["actor"])


def test_colocate_with_more_rollout_gpus_reserves_the_larger_count(
    placement_cluster: Cluster,
) -> None:
    layout = create_placement_groups(1, 4, 8, colocate=True, cluster=placement_cluster)
    actor, rollout = layout["actor"], layout["rollout"]
    assert (len(layout.group.slots), len(actor), len(rollout)) == (8, 4, 8)
    assert rollout.bundle_indices[:4] == actor.bundle_indices
    assert_ordered_whole_nodes(rollout)


def test_debug_train_only_has_no_rollout(placement_cluster: Cluster) -> None:
    layout = create_placement_groups(1, 4, 4, debug_train_only=True, cluster=placement_cluster)
    assert (len(layout.group.slots), len(layout["actor"]), len(layout["rollout"])) == (4, 4, 0)
    assert_ordered_whole_nodes(layout["actor"])


def test_debug_rollout_only_has_no_actor(placement_cluster: Cluster) -> None:
    layout = create_placement_groups(1, 4, 6, debug_rollout_only=True, cluster=placement_cluster)
    assert (len(layout.group.slots), len(layout["actor"]), len(layout["rollout"])) == (6, 0, 6)
    assert_ordered_whole_nodes(layout["rollout"])


def test_a_layout_too_big_for_the_cluster_fails_at_once(placement_cluster: Cluster) -> None:
    started = time.monotonic()
    with pytest.raises(InfeasiblePlacementGroupError, match="asks for GPU 16 in total"):
        create_placement_groups(2, 4, 8, cluster=placement_cluster)
    assert time.monotonic() - started < 2


def test_unknown_role_is_a_key_error(placement_cluster: Cluster) -> None:
    layout = create_placement_groups(1, 1, 1, cluster=placement_cluster)
    with pytest.raises(KeyError, match="unknown role 'reward'"):
        layout["reward"]


def test_without_use_critic_the_critic_role_is_a_key_error(placement_cluster: Cluster) -> None:
    layout = create_placement_groups(1, 1, 1, cluster=placement_cluster)
    assert layout.critic is None
    with pytest.raises(KeyError, match="no 'critic'"):
        layout["critic"]


def test_use_critic_puts_the_critic_on_the_trainers_bundles(placement_cluster: Cluster) -> None:
    layout = create_placement_groups(1, 2, 2, use_critic=True, cluster=placement_cluster)
    assert layout["critic"].role == "critic"
    assert layout["critic"].bundle_indices == layout["actor"].bundle_indices


def test_rollout_external_reserves_the_trainers_gpus_only(placement_cluster: Cluster) -> None:
    layout = create_placement_groups(1, 4, 8, rollout_external=True, cluster=placement_cluster)
    assert layout.mode == "rollout_external"
    assert (len(layout.group.slots), len(layout["actor"]), len(layout["rollout"])) == (4, 4, 0)


def test_rollout_engines_are_node_aligned_in_the_keyword_form(placement_cluster: Cluster) -> None:
    layout = create_placement_groups(
        1, 2, 8, rollout_num_gpus_per_engine=4, cluster=placement_cluster
    )
    assert layout["actor"].node_ranks == (0, 0)
    assert layout["rollout"].node_ranks == (1,) * 4 + (2,) * 4
    assert layout["rollout"].gpu_ids == (0, 1, 2, 3) * 2
    assert layout.engine_size == 4


def test_where_ray_packs_an_unpinned_group_across_an_engine_it_is_made_again_pinned(
    placement_cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    from placement_ray import _reservation
    from placement_ray._slime import layout as module

    real_pins, real_create = module._pins, _reservation.create_placement_group
    pinned: list[object] = []

    def claims_dense(*args: Any) -> tuple[list[int], bool]:
        return real_pins(*args)[0], not pinned

    def create(*args: Any, pin_to: Any = None, **kwargs: Any) -> Any:
        pinned.append(pin_to)
        # Unpinned, "Ray" fills the nodes in order, which splits engine 0 over nodes 0-1.
        dense = [0] * 4 + [1] * 4 + [2] * 2
        return real_create(*args, pin_to=dense if pin_to is None else pin_to, **kwargs)

    monkeypatch.setattr(module, "_pins", claims_dense)
    monkeypatch.setattr(_reservation, "create_placement_group", create)  # the one creator
    layout = create_placement_groups(
        1, 2, 8, rollout_num_gpus_per_engine=4, cluster=placement_cluster
    )
    assert pinned == [None, [0, 0] + [1] * 4 + [2] * 4]
    assert layout["rollout"].node_ranks == (1,) * 4 + (2,) * 4
    live = [g for g in placement_group_table().values() if g["state"] != "REMOVED"]
    assert len(live) == 1
