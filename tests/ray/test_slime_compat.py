"""slime's ``create_placement_groups(args)`` drop-in, consumed the way slime consumes it.

The consumers below are minimal re-implementations of the shape of slime's own: the
train group starts one actor per rank on ``bundle_indices[rank]`` with a GPU share, the
rollout manager starts one engine actor per ``min(per_engine, gpus_per_node)`` GPUs on
the engine's first bundle and takes ``gpu_ids[first]`` as its base GPU, the engine's
other GPUs being ``base + 1, ...`` of the same node. Every check is read from inside the
bundles: the node's rank from the worker's environment, the GPU from Ray.
"""

from __future__ import annotations

import os
from argparse import Namespace
from typing import Any

import pytest
import ray
from ray.util.placement_group import placement_group_table
from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

from placement_ray._cluster import Cluster
from placement_ray.compat.slime import create_placement_groups
from placement_ray.errors import EngineAlignmentError

from .conftest import GPUS_PER_NODE

TRAIN_GPU_SHARE = 0.4
ENGINE_GPU_SHARE = 0.2
PEEK_GPU_SHARE = 0.01


def slime_args(**overrides: Any) -> Namespace:
    """slime-shaped args; attributes placement does not read ride along, as in slime."""
    values: dict[str, Any] = {
        "actor_num_nodes": 1,
        "actor_num_gpus_per_node": 4,
        "rollout_num_gpus": 4,
        "rollout_num_gpus_per_engine": 2,
        "colocate": False,
        "debug_train_only": False,
        "debug_rollout_only": False,
        "rollout_external": False,
        "use_critic": False,
        "num_gpus_per_node": GPUS_PER_NODE,
        "kl_coef": 0.0,
        "hf_checkpoint": "/models/x",
    }
    values.update(overrides)
    return Namespace(**values)


@pytest.fixture
def actors() -> list[Any]:
    """Actors a test starts (the cluster fixture removes them after the test)."""
    return []


def where_am_i() -> tuple[int, list[int]]:
    """(node rank from the node's environment, GPU ids Ray gave this process)."""
    return int(os.environ["PLACEMENT_NODE_RANK"]), sorted(int(g) for g in ray.get_gpu_ids())


@ray.remote(num_cpus=0)
class Seat:
    """Stands in for a train actor or an engine actor: says where it sits."""

    def where(self) -> tuple[int, list[int]]:
        return where_am_i()


_peek = ray.remote(num_cpus=0, max_retries=0)(where_am_i)


def allocate_train_group(
    pg_tuple: tuple[Any, list[int], list[int]], world_size: int, actors: list[Any]
) -> list[tuple[int, int]]:
    """slime's train-group allocation: rank r on ``bundle_indices[r]``; (node, GPU) each."""
    pg, bundle_indices, _ = pg_tuple
    handles = []
    for rank in range(world_size):
        handle = Seat.options(
            num_cpus=TRAIN_GPU_SHARE,
            num_gpus=TRAIN_GPU_SHARE,
            scheduling_strategy=PlacementGroupSchedulingStrategy(
                placement_group=pg, placement_group_bundle_index=bundle_indices[rank]
            ),
        ).remote()
        actors.append(handle)
        handles.append(handle)
    return [(node, gpus[0]) for node, gpus in ray.get([h.where.remote() for h in handles])]


def create_rollout_engines(
    pg_tuple: tuple[Any, list[int], list[int]], args: Namespace, actors: list[Any]
) -> list[list[tuple[int, int]]]:
    """slime's engine creation by position; per engine actor, (node, GPU) of each GPU it
    uses (``base_gpu_id + j`` on its node), each read inside that GPU's bundle."""
    pg, bundle_indices, gpu_ids = pg_tuple
    per_actor = min(args.rollout_num_gpus_per_engine, args.num_gpus_per_node)
    firsts = range(0, args.rollout_num_gpus, per_actor)
    engines = []
    for first in firsts:
        engine = Seat.options(
            num_cpus=ENGINE_GPU_SHARE,
            num_gpus=ENGINE_GPU_SHARE,
            scheduling_strategy=PlacementGroupSchedulingStrategy(
                placement_group=pg,
                placement_group_capture_child_tasks=True,
                placement_group_bundle_index=bundle_indices[first],
            ),
        ).remote()
        actors.append(engine)
        engines.append(engine)
    homes = ray.get([e.where.remote() for e in engines])
    # One peek at a time, so one warm worker serves them all.
    peeks = [
        ray.get(
            _peek.options(
                num_gpus=PEEK_GPU_SHARE,
                scheduling_strategy=PlacementGroupSchedulingStrategy(
                    placement_group=pg, placement_group_bundle_index=bundle_indices[first + j]
                ),
            ).remote()
        )
        for first in firsts
        for j in range(per_actor)
    ]
    inside = iter((n, g[0]) for n, g in peeks)
    seen = []
    for first, (node, gpus) in zip(firsts, homes, strict=True):
        base_gpu_id = gpu_ids[first]
        assert gpus == [base_gpu_id]
        mine = [next(inside) for _ in range(per_actor)]
        assert mine == [(node, base_gpu_id + j) for j in range(per_actor)]
        seen.append(mine)
    return seen


def test_the_dict_has_slimes_keys_and_plain_int_lists(placement_cluster: Cluster) -> None:
    pgs = create_placement_groups(slime_args(), cluster=placement_cluster)
    assert set(pgs) == {"actor", "critic", "rollout"}
    assert pgs["critic"] is None
    pg, bundles, gpus = pgs["actor"]
    assert len(bundles) == len(gpus) == 8
    assert all(type(x) is int for x in bundles + gpus)
    assert pgs["rollout"] == (pg, bundles[4:], gpus[4:])


def test_use_critic_gives_the_critic_the_actors_tuple(placement_cluster: Cluster) -> None:
    pgs = create_placement_groups(slime_args(use_critic=True), cluster=placement_cluster)
    assert pgs["critic"] is pgs["actor"]


def test_slimes_train_group_lands_rank_by_rank_in_node_gpu_order(
    placement_cluster: Cluster, actors: list[Any]
) -> None:
    args = slime_args(actor_num_nodes=2, rollout_num_gpus=4)
    pgs = create_placement_groups(args, cluster=placement_cluster)
    seats = allocate_train_group(pgs["actor"], 8, actors)
    first, second = seats[0][0], seats[GPUS_PER_NODE][0]
    assert first < second
    assert seats == [(n, g) for n in (first, second) for g in range(GPUS_PER_NODE)]
    assert [g for _, g in seats] == pgs["actor"][2][:8]


def nodes_and_gpus(seen: list[list[tuple[int, int]]]) -> list[tuple[int, list[int]]]:
    """Per engine actor, its one node and its GPUs (asserting that it has one node)."""
    shape = []
    for engine in seen:
        nodes = {n for n, _ in engine}
        assert len(nodes) == 1, f"engine actor on nodes {sorted(nodes)}"
        shape.append((nodes.pop(), [g for _, g in engine]))
    return shape


def test_slimes_rollout_manager_runs_a_multi_node_engine_on_whole_nodes(
    placement_cluster: Cluster, actors: list[Any]
) -> None:
    args = slime_args(rollout_num_gpus=8, rollout_num_gpus_per_engine=8)
    pgs = create_placement_groups(args, cluster=placement_cluster)
    trainer = {n for n, _ in allocate_train_group(pgs["actor"], 4, actors)}
    shape = nodes_and_gpus(create_rollout_engines(pgs["rollout"], args, actors))
    assert [gpus for _, gpus in shape] == [list(range(GPUS_PER_NODE))] * 2
    assert len({node for node, _ in shape} | trainer) == 3


def test_slimes_rollout_manager_colocates_an_engine_on_the_trainers_node(
    placement_cluster: Cluster, actors: list[Any]
) -> None:
    args = slime_args(colocate=True, rollout_num_gpus=4, rollout_num_gpus_per_engine=4)
    pgs = create_placement_groups(args, cluster=placement_cluster)
    trainer = allocate_train_group(pgs["actor"], 4, actors)
    shape = nodes_and_gpus(create_rollout_engines(pgs["rollout"], args, actors))
    assert shape == [(trainer[0][0], list(range(GPUS_PER_NODE)))]
    assert trainer == [(trainer[0][0], g) for g in range(GPUS_PER_NODE)]


def test_an_engine_that_slime_would_split_across_nodes_stays_in_one(
    placement_cluster: Cluster, actors: list[Any]
) -> None:
    # By position, a 2-GPU trainer leaves GPUs 2-3 of node 0 to the first 4-GPU engine,
    # which slime would then stretch onto node 1.
    args = slime_args(actor_num_gpus_per_node=2, rollout_num_gpus=8, rollout_num_gpus_per_engine=4)
    pgs = create_placement_groups(args, cluster=placement_cluster)
    assert allocate_train_group(pgs["actor"], 2, actors) == [(0, 0), (0, 1)]
    engines = create_rollout_engines(pgs["rollout"], args, actors)
    assert [{n for n, _ in engine} for engine in engines] == [{1}, {2}]
    assert len(pgs["actor"][1]) == 10


def test_a_layout_that_cannot_keep_engines_in_a_node_fails_before_reserving(
    placement_cluster: Cluster,
) -> None:
    before = len(placement_group_table())
    args = slime_args(actor_num_gpus_per_node=2, rollout_num_gpus=9, rollout_num_gpus_per_engine=3)
    with pytest.raises(EngineAlignmentError, match="engine sizes that fit: 1"):
        create_placement_groups(args, cluster=placement_cluster)
    assert len(placement_group_table()) == before


def test_rollout_external_reserves_only_the_trainer(placement_cluster: Cluster) -> None:
    args = slime_args(rollout_external=True, rollout_num_gpus=None)
    pgs = create_placement_groups(args, cluster=placement_cluster)
    pg, bundles, _ = pgs["actor"]
    assert len(bundles) == 4
    assert pgs["rollout"] == (pg, [], [])


def test_rollout_external_with_debug_rollout_only_gives_rollout_the_whole_group(
    placement_cluster: Cluster,
) -> None:
    args = slime_args(rollout_external=True, debug_rollout_only=True)
    pgs = create_placement_groups(args, cluster=placement_cluster)
    assert pgs["rollout"] == pgs["actor"]
    assert len(pgs["actor"][1]) == 4


def test_debug_train_only_rollout_slice_is_the_whole_group_as_in_slime(
    placement_cluster: Cluster,
) -> None:
    args = slime_args(debug_train_only=True, rollout_num_gpus=None)
    pgs = create_placement_groups(args, cluster=placement_cluster)
    assert pgs["rollout"] == pgs["actor"]
