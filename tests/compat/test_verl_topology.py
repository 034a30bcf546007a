"""verl's ``topology:`` section: pools, mapping, spares, and its errors before reserving."""

from __future__ import annotations

from typing import Any

import pytest

from placement_ray._verl.topology import read_topology, spare_ranks
from placement_ray.errors import ArgumentError


def section(**changes: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "clusters": [{"name": "default", "nnodes": 3, "n_gpus_per_node": 2}],
        "device_pools": [
            {"name": "train_pool", "cluster": "default", "nnodes": 2, "n_gpus_per_node": 2},
            {
                "name": "spare_pool",
                "cluster": "default",
                "nnodes": 1,
                "n_gpus_per_node": 2,
                "attributes": {"standby": True, "protects": ["train_pool"]},
            },
        ],
        "models": [{"name": "actor", "worker": "actor_rollout", "resource_pool": "train_pool"}],
    }
    base.update(changes)
    return base


def test_pools_become_resource_pool_spec() -> None:
    assert read_topology(section()).resource_pool_spec == {"train_pool": [2, 2]}


def test_models_map_worker_and_name_to_their_pool() -> None:
    assert read_topology(section()).mapping == {
        "actor": "train_pool",
        "actor_rollout": "train_pool",
    }


def test_standby_pool_becomes_the_last_fitting_nodes() -> None:
    read = read_topology(section())
    assert spare_ranks(read.spares, [2, 2, 2], 3) == (2,)


def test_standby_pool_may_name_its_nodes() -> None:
    pools = section()["device_pools"]
    pools[1]["nodes"] = [0]
    read = read_topology(section(device_pools=pools))
    assert spare_ranks(read.spares, [2, 2, 2], 3) == (0,)


def test_standby_naming_unknown_nodes_is_refused() -> None:
    pools = section()["device_pools"]
    pools[1]["nodes"] = [7]
    read = read_topology(section(device_pools=pools))
    with pytest.raises(
        ArgumentError, match=r"spare_pool\]\.nodes: unknown nodes \[7\]; the cluster has nodes 0-2"
    ):
        spare_ranks(read.spares, [2, 2, 2], 3)


def test_pool_naming_unknown_cluster_is_refused() -> None:
    pools = section()["device_pools"]
    pools[0]["cluster"] = "east"
    with pytest.raises(ArgumentError, match=r"train_pool\]\.cluster: unknown cluster 'east'"):
        read_topology(section(device_pools=pools))


def test_model_naming_unknown_pool_is_refused() -> None:
    models = [{"name": "actor", "resource_pool": "infer_pool"}]
    with pytest.raises(
        ArgumentError, match=r"models\[0\]\.resource_pool: unknown pool 'infer_pool'"
    ):
        read_topology(section(models=models))


def test_model_on_the_standby_pool_is_refused() -> None:
    models = [{"name": "actor", "resource_pool": "spare_pool"}]
    with pytest.raises(ArgumentError, match=r"'spare_pool' is a standby pool"):
        read_topology(section(models=models))


def test_protecting_an_unknown_pool_is_refused() -> None:
    pools = section()["device_pools"]
    pools[1]["attributes"]["protects"] = ["nowhere"]
    with pytest.raises(ArgumentError, match=r"protects: unknown pool 'nowhere'"):
        read_topology(section(device_pools=pools))


def test_pools_taking_more_nodes_than_their_cluster_are_refused() -> None:
    clusters = [{"name": "default", "nnodes": 2, "n_gpus_per_node": 2}]
    with pytest.raises(
        ArgumentError,
        match=r"clusters\[default\]\.nnodes: its pools take 3 nodes, the cluster declares 2",
    ):
        read_topology(section(clusters=clusters))


def test_unknown_keys_are_refused() -> None:
    with pytest.raises(ArgumentError, match=r"topology: unknown keys \['zones'\]"):
        read_topology(section(zones=[]))


def test_too_few_nodes_for_the_standby_pool_are_refused() -> None:
    read = read_topology(section())
    with pytest.raises(
        ArgumentError, match=r"1 spare nodes of 2 accelerators asked, the cluster has 0"
    ):
        spare_ranks(read.spares, [1, 1, 1], 3)
