"""Rollout engines: GPU sets, multi-node engines sharing node 0's dist_init_addr, and
named port blocks reserved and held on each engine's own node."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import Any

import pytest

from placement_ray._cluster import Cluster
from placement_ray._slime.layout import RoleBundles, SlimeLayout, create_placement_groups
from placement_ray._slime.rollout import (
    DIST_INIT_ADDR_ENV,
    RolloutEngines,
    create_rollout_engines,
    default_port_blocks,
    engine_gpu_sets,
)
from placement_ray.demo.workers import DemoEngine
from placement_ray.errors import ArgumentError
from placement_ray.testing import SimulatedCluster


def bundles(*gpus: tuple[int, int]) -> RoleBundles:
    """A rollout slice given as ``(node rank, GPU)`` per ordered bundle."""
    return RoleBundles(
        role="rollout",
        pg=None,  # type: ignore[arg-type]  # engine_gpu_sets reads only the order
        bundle_indices=tuple(range(len(gpus))),
        node_ranks=tuple(n for n, _ in gpus),
        node_ids=tuple(f"n{n}" for n, _ in gpus),
        gpu_ids=tuple(g for _, g in gpus),
    )


def test_default_port_blocks_follow_slime() -> None:
    assert default_port_blocks() == {"server": 1, "nccl": 1, "dist_init": 31}
    assert default_port_blocks(4)["dist_init"] == 34
    with pytest.raises(ArgumentError, match="dp_size"):
        default_port_blocks(0)


def test_engines_take_consecutive_bundles_on_one_node(cluster: Cluster) -> None:
    sets = engine_gpu_sets(cluster, bundles(*[(1, g) for g in range(4)]), 2)
    assert sets == [[(1, (0, 1))], [(1, (2, 3))]]


def test_multi_node_engine_spans_whole_nodes(cluster: Cluster) -> None:
    sets = engine_gpu_sets(cluster, bundles(*[(n, g) for n in (1, 2) for g in range(4)]), 8)
    assert sets == [[(1, (0, 1, 2, 3)), (2, (0, 1, 2, 3))]]


def test_engine_straddling_part_of_a_node_is_an_error(cluster: Cluster) -> None:
    slice_ = bundles((0, 2), (0, 3), (1, 0), (1, 1))
    with pytest.raises(ArgumentError, match=r"engine 0 \(4 GPUs\) spans nodes \[0, 1\]"):
        engine_gpu_sets(cluster, slice_, 4)


def test_engines_that_do_not_divide_the_gpus_are_an_error(cluster: Cluster) -> None:
    with pytest.raises(ArgumentError, match="do not divide"):
        engine_gpu_sets(cluster, bundles((0, 0), (0, 1), (0, 2)), 2)


@pytest.mark.parametrize(
    ("trainer_tp", "rollout_tp", "expected"),
    [(4, 2, [(0, 2), (1, 3)]), (4, 1, [(0,), (1,), (2,), (3,)]), (2, 2, [(0, 1), (2, 3)])],
)
def test_strided_engines_use_core_packed_with_stride(
    cluster: Cluster, trainer_tp: int, rollout_tp: int, expected: list[tuple[int, ...]]
) -> None:
    sets = engine_gpu_sets(
        cluster, bundles(*[(0, g) for g in range(4)]), rollout_tp, trainer_tp=trainer_tp
    )
    assert sets == [[(0, ids)] for ids in expected]


def test_strided_with_a_trainer_tp_that_is_not_a_multiple_is_an_error(cluster: Cluster) -> None:
    with pytest.raises(ArgumentError, match="trainer_tp"):
        engine_gpu_sets(cluster, bundles(*[(0, g) for g in range(4)]), 4, trainer_tp=2)


@pytest.fixture(scope="module")
def layout(simulated: SimulatedCluster, cluster: Cluster) -> Iterator[SlimeLayout]:
    before = simulated.baseline()
    result = create_placement_groups(1, 4, 8, cluster=cluster, cpus_per_bundle=0)
    try:
        yield result
    finally:
        result.remove()
        simulated.cleanup(before)


@pytest.fixture(scope="module")
def spanning(layout: SlimeLayout, cluster: Cluster) -> Iterator[RolloutEngines]:
    engines = create_rollout_engines(layout, DemoEngine, num_gpus_per_engine=8, cluster=cluster)
    try:
        yield engines
    finally:
        engines.kill()


def test_multi_node_engine_has_one_actor_per_node_sharing_dist_init_addr(
    spanning: RolloutEngines, layout: SlimeLayout
) -> None:
    (engine,) = spanning.engines
    assert engine.node_ranks == (1, 2) == tuple(sorted(set(layout.rollout.node_ranks)))
    head_port = engine.ports[0]["dist_init"][0]
    assert engine.dist_init_addr == f"127.0.0.1:{head_port}"
    seen = spanning.group.execute("getenv", DIST_INIT_ADDR_ENV, timeout_s=60)
    assert seen == [engine.dist_init_addr] * 2
    assert "dist_init" not in engine.ports[1]  # only node 0 of the engine serves it
    assert len(engine.ports[0]["dist_init"]) == 31


@pytest.mark.parametrize(
    ("port_blocks", "match"),
    [
        ({"server": 0}, r"port_blocks\['server'\]: expected a port count >= 1, got 0"),
        ({"nccl": True}, r"port_blocks\['nccl'\]: expected a port count >= 1, got True"),
        ({"": 1}, "port_blocks: expected non-empty block names, got ''"),
        ([("server", 1)], "port_blocks: expected a mapping of block name to port count"),
    ],
)
def test_bad_port_blocks_are_an_error_naming_the_block(
    layout: SlimeLayout, cluster: Cluster, port_blocks: object, match: str
) -> None:
    with pytest.raises(ArgumentError, match=match):
        create_rollout_engines(
            layout,
            DemoEngine,
            num_gpus_per_engine=2,
            cluster=cluster,
            port_blocks=port_blocks,  # type: ignore[arg-type]
        )


def test_engine_sees_its_gpus_as_local_indices(spanning: RolloutEngines) -> None:
    for report in spanning.group.reports:
        assert report["env"]["CUDA_VISIBLE_DEVICES"] == "0,1,2,3"
        assert report["env"]["PLACEMENT_COMPONENT"] == "rollout"
        assert tuple(report["ray_gpu_ids"]) == (0,)


def test_engines_on_one_node_hold_distinct_ports(
    spanning: RolloutEngines, layout: SlimeLayout, cluster: Cluster
) -> None:
    small = create_rollout_engines(layout, DemoEngine, num_gpus_per_engine=2, cluster=cluster)
    try:
        assert [e.node_ranks for e in small] == [(1,), (1,), (2,), (2,)]
        by_node: dict[int, list[int]] = {}
        for engines in (spanning, small):
            for engine in engines:
                for worker, blocks in zip(engine.workers, engine.ports, strict=True):
                    ports: Any = [p for block in blocks.values() for p in block]
                    by_node.setdefault(worker.node_rank, []).extend(ports)
        for ports in by_node.values():
            assert len(ports) == len(set(ports))
        server = small[0].ports[0]["server"][0]
        with socket.socket() as probe, pytest.raises(OSError):
            probe.bind(("127.0.0.1", server))  # held by the engine until hand-over
    finally:
        small.kill()
