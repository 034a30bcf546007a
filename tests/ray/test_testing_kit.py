"""placement_ray.testing and its pytest plugin: shape by marker, fake NVML per node,
cleanup between tests."""

from __future__ import annotations

import dataclasses
import os
from importlib import metadata

import pytest
import ray
from _placement_ray_pytest import PlacementClusterFactory
from ray.util.placement_group import placement_group

import placement_ray.testing as kit
from placement_ray import ArgumentError, Cluster, ClusterError
from placement_ray.testing import ClusterSpec

from .conftest import DGX_PAIR as SHAPE

pytestmark = pytest.mark.placement_cluster(**SHAPE)


@ray.remote(num_cpus=1)
class Holder:
    def ping(self) -> str:
        return "pong"


def test_the_marker_shapes_the_cluster(placement_cluster: Cluster) -> None:
    assert placement_cluster.num_nodes == 2
    cpus = {n["NodeID"]: n["Resources"].get("CPU") for n in ray.nodes() if n["Alive"]}
    assert [cpus[node.node_id] for node in placement_cluster.nodes] == [8, 8]


def test_a_node_with_a_fake_machine_reports_it(placement_cluster: Cluster) -> None:
    models = [gpu.model for gpu in placement_cluster.node(0).accelerators]
    assert models == ["NVIDIA H100 80GB HBM3"] * 8


def test_a_node_without_one_has_the_default_logical_gpus(placement_cluster: Cluster) -> None:
    gpus = placement_cluster.node(1).accelerators
    assert [(gpu.index, gpu.model) for gpu in gpus] == [(i, None) for i in range(4)]


def test_nodes_carry_their_rank_label(placement_cluster: Cluster) -> None:
    labels = {n["NodeID"]: n["Labels"].get("node-rank") for n in ray.nodes() if n["Alive"]}
    assert [labels[node.node_id] for node in placement_cluster.nodes] == ["0", "1"]


def test_cleanup_removes_what_the_test_created(
    placement_cluster_factory: PlacementClusterFactory,
) -> None:
    simulated = placement_cluster_factory.simulated(**SHAPE)
    before = simulated.baseline()
    group = placement_group([{"GPU": 1}])
    ray.get(group.ready(), timeout=60)
    holder = Holder.remote()  # type: ignore[attr-defined]
    assert ray.get(holder.ping.remote(), timeout=60) == "pong"
    simulated.cleanup(before)
    assert simulated.baseline() == before


def test_resources_still_held_after_the_timeout_are_named(
    placement_cluster_factory: PlacementClusterFactory,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    simulated = placement_cluster_factory.simulated(**SHAPE)
    before = simulated.baseline()
    holder = Holder.remote()  # type: ignore[attr-defined]
    ray.get(holder.ping.remote(), timeout=60)
    monkeypatch.setattr(kit, "_kill", lambda actors: None)
    monkeypatch.setattr(simulated, "spec", dataclasses.replace(simulated.spec, timeout_s=0.5))
    with pytest.raises(ClusterError, match=r"not idle 0.5s after the test: .*'CPU': \(7.0, 8.0\)"):
        simulated.cleanup(before)
    monkeypatch.undo()
    simulated.cleanup(before)


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"nodes": 0}, "nodes: expected an int >= 1, got 0"),
        ({"gpus_per_node": -1}, r"gpus_per_node: expected an int >= 0 \(or one per node\), got -1"),
        ({"nodes": 3, "topology": ["mig"]}, "expected one machine or a list of 3"),
        ({"job": "a/b"}, "job: expected a non-empty name without '/'"),
        ({"timeout_s": 0}, "timeout_s: expected seconds > 0, got 0"),
        ({"node_ip": "10.0.0.1"}, r"node_ip: expected a loopback address such as '127.0.0.9'"),
        ({"nodes": 2, "node_ip": ("127.0.0.1",)}, "node_ip: expected one value or a list of 2"),
        ({"separate_head": "yes"}, "separate_head: expected True or False, got 'yes'"),
    ],
)
def test_a_bad_shape_names_the_field(fields: dict[str, object], message: str) -> None:
    with pytest.raises(ArgumentError, match=message):
        ClusterSpec(**fields)  # type: ignore[arg-type]


def test_the_plugin_is_registered_and_keeps_ray_on_loopback() -> None:
    plugins = {e.name: e.value for e in metadata.entry_points(group="pytest11")}
    assert plugins.get("placement_ray") == "_placement_ray_pytest"
    assert os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] == "0"


def test_kill_node_keeps_the_head_and_restore_node_only_a_killed_one(
    placement_cluster_factory: PlacementClusterFactory,
) -> None:
    simulated = placement_cluster_factory.simulated(**SHAPE)
    with pytest.raises(ArgumentError, match=r"node 0 is Ray's head here.*separate_head=True"):
        simulated.kill_node(0)
    with pytest.raises(ArgumentError, match=r"rank: expected a live node .* got 7"):
        simulated.kill_node(7)
    with pytest.raises(ArgumentError, match=r"rank: expected a killed node of 1\.\.1, got 1"):
        simulated.restore_node(1)
