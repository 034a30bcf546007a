"""slime's train group on the colocated layout, with strided rollout engines beside it.

One colocated layout (actor 1 node x 4 GPUs, rollout 4 GPUs) with a train group serves the
module; engines are created on top of it and stopped in each test.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import ray

from placement_ray._cluster import Cluster
from placement_ray._slime.layout import SlimeLayout, create_placement_groups
from placement_ray._slime.rollout import create_rollout_engines
from placement_ray._slime.train_group import TrainGroup, create_train_group
from placement_ray.demo.workers import DemoEngine, DemoTrainer
from placement_ray.errors import OversubscribedGPUError
from placement_ray.testing import SimulatedCluster


@pytest.fixture(scope="module")
def layout(simulated: SimulatedCluster, cluster: Cluster) -> Iterator[SlimeLayout]:
    before = simulated.baseline()
    result = create_placement_groups(1, 4, 4, colocate=True, cluster=cluster, cpus_per_bundle=0)
    try:
        yield result
    finally:
        result.remove()
        simulated.cleanup(before)


@pytest.fixture(scope="module")
def train(layout: SlimeLayout, cluster: Cluster) -> Iterator[TrainGroup]:
    group = create_train_group(layout, DemoTrainer, cluster=cluster)
    try:
        yield group
    finally:
        group.kill()


def test_rank_r_sits_in_ordered_bundle_r_and_sees_its_gpu(
    train: TrainGroup, layout: SlimeLayout
) -> None:
    for rank, (worker, report) in enumerate(zip(train.workers, train.reports, strict=True)):
        assert worker.bundle_index == layout.actor.bundle_indices[rank]
        assert report["node_rank_label"] == str(layout.actor.node_ranks[rank])
        assert report["env"]["CUDA_VISIBLE_DEVICES"] == str(layout.actor.gpu_ids[rank])
        assert tuple(report["ray_gpu_ids"]) == (layout.actor.gpu_ids[rank],)
        assert report["env"]["RANK"] == str(rank)
        assert report["env"]["LOCAL_RANK"] == "0"
        assert report["env"]["WORLD_SIZE"] == "4"


def test_colocated_share_defaults_to_0_4(train: TrainGroup) -> None:
    assert {w.gpu_share for w in train.workers} == {0.4}


def test_every_rank_gets_rank_0s_held_master_port(train: TrainGroup) -> None:
    assert train.master_port is not None
    assert tuple(train.reports[0]["ports"]["master"]) == (train.master_port,)
    assert {r["env"]["MASTER_PORT"] for r in train.reports} == {str(train.master_port)}


def test_calls_run_on_every_rank_concurrently_in_rank_order(train: TrainGroup) -> None:
    assert train.init(5, timeout_s=60) == [(r, 5) for r in range(4)]
    refs = train.async_train(1)
    assert ray.get(refs, timeout=60) == [(r, 6) for r in range(4)]
    assert train.eval(timeout_s=60) == [(r, 6) for r in range(4)]
    assert train.offload(timeout_s=60) == [(r, "offloaded") for r in range(4)]


def test_strided_engines_see_their_gpus_and_report_trainer_ranks(
    train: TrainGroup, layout: SlimeLayout, cluster: Cluster
) -> None:
    engines = create_rollout_engines(
        layout, DemoEngine, num_gpus_per_engine=2, trainer_tp=4, cluster=cluster
    )
    try:
        gpus = layout.actor.gpu_ids
        assert [e.gpus for e in engines] == [((gpus[0], gpus[2]),), ((gpus[1], gpus[3]),)]
        assert [e.shared_with for e in engines] == [(0, 2), (1, 3)]
        seen = engines.group.execute("getenv", "CUDA_VISIBLE_DEVICES", timeout_s=60)
        assert seen == [f"{gpus[0]},{gpus[2]}", f"{gpus[1]},{gpus[3]}"]
        assert {w.gpu_share for w in engines.group.workers} == {0.2}
    finally:
        engines.kill()


def test_engine_share_that_overflows_the_trainers_gpu_fails_before_starting(
    train: TrainGroup, layout: SlimeLayout, cluster: Cluster
) -> None:
    with pytest.raises(OversubscribedGPUError, match=r"1\.1 = in use earlier 0\.4"):
        create_rollout_engines(
            layout, DemoEngine, num_gpus_per_engine=2, cluster=cluster, gpu_share=0.7
        )
