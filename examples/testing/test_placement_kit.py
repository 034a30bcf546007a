"""Test placement code without GPUs or a cluster: a test file to copy into your suite.

Installing placement-native and placement-ray is all it takes (no conftest): their pytest
plugins provide the ``fake_nvml`` and ``placement_cluster`` fixtures.
"""

from __future__ import annotations

import os

import pytest

import placement_native
from placement_core import Inventory, plan
from placement_ray import Cluster, launch

CONFIG = {"cluster": {"num_nodes": 2, "component_placement": {"actor": "0-7"}}}


def test_the_snapshot_sees_a_fake_dgx(fake_nvml):
    fake_nvml("dgx-h100")  # 8 x H100 on NVSwitches, GPUs 0-3 on NUMA node 0
    snap = placement_native.snapshot()
    assert [gpu.numa_node for gpu in snap.accelerators] == [0, 0, 0, 0, 1, 1, 1, 1]
    assert snap.link(0, 7).label == "NV18"


@pytest.mark.parametrize("fake_nvml", ["pcie-4x-nvlink-bridges"], indirect=True)
def test_nvlink_peers_are_not_index_neighbours(fake_nvml):
    gpus = placement_native.snapshot().accelerators
    assert [gpu.nvlink_peers for gpu in gpus] == [((2, 4),), ((3, 4),), ((0, 4),), ((1, 4),)]


def test_a_plan_offline_against_a_made_up_inventory():
    result = plan(CONFIG, Inventory.uniform(2, 4))
    assert len(result.placements("actor")) == 8


class Worker:
    def where(self) -> tuple[int, str]:
        return int(os.environ["RANK"]), os.environ["CUDA_VISIBLE_DEVICES"]


@pytest.mark.placement_cluster(nodes=2, topology="pcie-4x-nvlink-bridges")
def test_every_rank_runs_on_its_planned_gpu(placement_cluster: Cluster):
    # Each simulated node reports the fake machine through its own snapshot.
    models = {gpu.model for node in placement_cluster.nodes for gpu in node.accelerators}
    assert models == {"NVIDIA RTX A6000"}
    with launch(CONFIG, {"actor": Worker}, placement_cluster) as job:
        assert job["actor"].execute("where") == [(rank, str(rank % 4)) for rank in range(8)]
