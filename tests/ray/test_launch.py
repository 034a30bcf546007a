"""launch: a core plan made real; what every worker reports matches its placement.

One launch (12 workers on the 3 x 4 session cluster) serves the module's read-only tests.
"""

from __future__ import annotations

import json
import socket
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from ray.util.placement_group import placement_group_table

from placement_core import Inventory, plan, plan_from_assignments
from placement_ray._cluster import Cluster
from placement_ray._launch import HARDWARE_CONFIG_ENV, Launch, launch
from placement_ray.demo.workers import DemoWorker
from placement_ray.errors import ArgumentError, InterpreterError, WorkerCallError
from placement_ray.testing import SimulatedCluster

COMPONENTS = ("actor", "rollout", "infer", "arm", "agent")


def config(interpreter: str) -> dict[str, Any]:
    return {
        "cluster": {
            "num_nodes": 3,
            "component_placement": {
                "actor": "0-3",  # node 0, one GPU each
                "rollout": {"node_group": "cluster", "placement": "0-3:0-1", "stride": 2},
                "infer": {"node_group": "g1", "placement": "0-3:0"},  # node 1, TP 4
                "arm": {"node_group": "franka", "placement": 0},  # node 2, a robot
                "agent": {"node_group": "node", "placement": "2:0-1"},  # node 2, CPU
            },
            "node_groups": [
                {
                    "label": "g1",
                    "node_ranks": 1,
                    "env_configs": [
                        {
                            "node_ranks": 1,
                            "python_interpreter_path": interpreter,
                            "env_vars": [{"GROUP_VAR": "g1"}],
                        }
                    ],
                },
                {
                    "label": "franka",
                    "node_ranks": 2,
                    "env_configs": [{"node_ranks": 2, "env_vars": [{"GROUP_VAR": "franka"}]}],
                    "hardware": {
                        "type": "Franka",
                        "configs": [{"robot_ip": "10.0.0.7", "node_rank": 2}],
                    },
                },
            ],
        }
    }


# Its own launch, cleaned up by `placement_cluster` (what the test created, nothing more).
def test_partial_node_maps_plan_ids_onto_the_gpus_ray_reserved(placement_cluster: Cluster) -> None:
    config = {"cluster": {"num_nodes": 3, "component_placement": {"actor": "2-3"}}}
    with launch(config, {"actor": DemoWorker}, placement_cluster, timeout_s=120) as launched:
        assert launched.verify() == []
        group = launched["actor"]
        held = sorted(launched.gpu_map.values())
        assert sorted(launched.gpu_map) == [(0, 2), (0, 3)]
        assert len(set(held)) == 2
        for worker, report in zip(group.workers, group.reports, strict=True):
            (ray_gpu,) = report["ray_gpu_ids"]
            assert worker.gpu_ids == (ray_gpu,)
            assert report["env"]["CUDA_VISIBLE_DEVICES"] == str(ray_gpu)
        assert [w.gpu_ids[0] for w in group.workers] == held  # order kept


def test_a_plan_from_assignments_launches_as_it_is(placement_cluster: Cluster) -> None:
    given = plan_from_assignments({"actor": [(1, (1,)), (2, (0, 3))]}, placement_cluster.inventory)
    with launch(given, {"actor": DemoWorker}, placement_cluster, timeout_s=120) as launched:
        assert launched.plan is given
        assert launched.verify() == []
        assert [w.node_rank for w in launched["actor"].workers] == [1, 2]
        assert [r["env"]["WORLD_SIZE"] for r in launched["actor"].reports] == ["2", "2"]


@pytest.fixture(scope="module")
def wrapper(tmp_path_factory: pytest.TempPathFactory) -> str:
    """An interpreter that is this Python behind a script marking the workers it starts."""
    path = Path(tmp_path_factory.mktemp("venv")) / "python"
    path.write_text(f'#!/bin/sh\nexport VIA_WRAPPER=1\nexec {sys.executable} "$@"\n')
    path.chmod(0o755)
    return str(path)


@pytest.fixture(scope="module")
def launched(simulated: SimulatedCluster, cluster: Cluster, wrapper: str) -> Iterator[Launch]:
    before = simulated.baseline()
    result = launch(
        config(wrapper),
        dict.fromkeys(COMPONENTS, DemoWorker),
        cluster,
        port_blocks={"rollout": {"server": 1, "nccl": 2}},
        timeout_s=120,
    )
    try:
        yield result
    finally:
        result.shutdown()
        simulated.cleanup(before)


def envs(launched: Launch, component: str, name: str) -> list[str | None]:
    return launched[component].execute("getenv", name, timeout_s=60)


def test_every_worker_reports_what_was_planned(launched: Launch) -> None:
    assert launched.verify() == []
    assert [len(launched[c]) for c in COMPONENTS] == [4, 2, 1, 1, 2]


def test_strided_rollout_sees_its_gpus_inside_the_actor(launched: Launch) -> None:
    assert envs(launched, "rollout", "CUDA_VISIBLE_DEVICES") == ["0,2", "1,3"]
    assert envs(launched, "rollout", "LOCAL_RANK") == ["0", "0"]
    assert launched.shared_with("rollout", "actor") == ((0, 2), (1, 3))


def test_tensor_parallel_worker_sits_in_its_first_gpus_bundle(launched: Launch) -> None:
    (worker,) = launched["infer"].workers
    (report,) = launched["infer"].reports
    assert worker.node_rank == 1
    assert worker.gpu_ids == (0, 1, 2, 3)
    assert report["env"]["CUDA_VISIBLE_DEVICES"] == "0,1,2,3"
    assert tuple(report["ray_gpu_ids"]) == (0,)


def test_node_group_env_and_interpreter_reach_only_their_workers(launched: Launch) -> None:
    assert envs(launched, "infer", "GROUP_VAR") == ["g1"]
    assert envs(launched, "infer", "VIA_WRAPPER") == ["1"]
    assert envs(launched, "arm", "GROUP_VAR") == ["franka"]
    for component in ("actor", "rollout", "arm", "agent"):
        assert set(envs(launched, component, "VIA_WRAPPER")) == {None}
    for component in ("actor", "rollout", "agent"):
        assert set(envs(launched, component, "GROUP_VAR")) == {None}


def test_robot_worker_gets_its_hardware_config(launched: Launch) -> None:
    (value,) = envs(launched, "arm", HARDWARE_CONFIG_ENV)
    assert value is not None
    assert json.loads(value)["robot_ip"] == "10.0.0.7"
    assert envs(launched, "arm", "PLACEMENT_HARDWARE_TYPE") == ["Franka"]


def test_agents_run_on_their_node_without_a_gpu_request(launched: Launch) -> None:
    for worker, report in zip(launched["agent"].workers, launched["agent"].reports, strict=True):
        assert report["node_rank_label"] == "2"
        assert worker.bundle_index is None
        assert tuple(report["ray_gpu_ids"]) == ()
        assert report["env"]["CUDA_VISIBLE_DEVICES"] == "0,1,2,3"


def test_component_ports_are_held_and_distinct(launched: Launch) -> None:
    held = [r["ports"] for r in launched["rollout"].reports]
    ports = [p for blocks in held for name in ("server", "nccl") for p in blocks[name]]
    assert len(ports) == len(set(ports)) == 6
    for blocks in held:
        first, second = blocks["nccl"]
        assert second == first + 1
        with socket.socket() as probe, pytest.raises(OSError):
            probe.bind(("127.0.0.1", blocks["server"][0]))


def test_execute_returns_results_in_rank_order_or_the_given_order(launched: Launch) -> None:
    group = launched["actor"]
    assert group.execute("ping", "x", timeout_s=60) == [(r, "x") for r in range(4)]
    assert group.execute("ping", ranks=[3, 0], timeout_s=60) == [(3, None), (0, None)]
    assert group.execute("ping", ranks=[]) == []


def test_execute_names_the_rank_that_failed(launched: Launch) -> None:
    with pytest.raises(WorkerCallError) as caught:
        launched["actor"].execute("fail", 2, timeout_s=60)
    assert [r for r, _, _ in caught.value.failed] == [2]
    assert "rank 2: actor rank 2 on node 0 (GPUs [2]" in str(caught.value)
    assert "rank 2 was asked to fail" in str(caught.value)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [({"ranks": [4]}, "ranks"), ({"ranks": [0, 0]}, "ranks"), ({"ranks": 1}, "ranks")],
)
def test_execute_rejects_bad_ranks(launched: Launch, kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(ArgumentError, match=match):
        launched["actor"].execute("ping", **kwargs)


def test_execute_rejects_an_unknown_method(launched: Launch) -> None:
    with pytest.raises(ArgumentError, match="no method 'nope'"):
        launched["actor"].execute("nope")


def test_master_port_is_held_by_rank_0_until_hand_over(launched: Launch) -> None:
    group = launched["agent"]
    port = group.master_port
    assert port is not None
    assert envs(launched, "agent", "MASTER_PORT") == [str(port)] * 2
    assert group.reports[0]["ports"]["master"] == (port,) or list(
        group.reports[0]["ports"]["master"]
    ) == [port]
    with socket.socket() as probe, pytest.raises(OSError):
        probe.bind(("127.0.0.1", port))  # rank 0 still holds it
    assert group.hand_over_master_port() == port
    with socket.socket() as consumer:
        consumer.bind(("127.0.0.1", port))  # the consumer gets it


def test_missing_class_or_unknown_component_is_an_error(cluster: Cluster, wrapper: str) -> None:
    with pytest.raises(ArgumentError, match=r"missing \['agent'\]; unknown \['critic'\]"):
        launch(
            config(wrapper),
            {**dict.fromkeys(COMPONENTS[:-1], DemoWorker), "critic": DemoWorker},
            cluster,
        )


def test_nonexistent_interpreter_fails_before_anything_is_created(cluster: Cluster) -> None:
    before = set(placement_group_table())
    with pytest.raises(InterpreterError, match="node 1: /opt/missing/bin/python does not exist"):
        launch(config("/opt/missing/bin/python"), dict.fromkeys(COMPONENTS, DemoWorker), cluster)
    assert set(placement_group_table()) == before


def test_plan_made_offline_is_replanned_on_the_live_nodes(cluster: Cluster) -> None:
    from placement_core._inventory import Inventory
    from placement_ray._launch import _live_plan

    offline = plan(
        {"cluster": {"num_nodes": 3, "component_placement": {"actor": "4-7"}}},
        Inventory.uniform(3, 4),
    )
    live = _live_plan(offline, cluster, ())
    assert live.components["actor"][0].node_id == cluster.node(1).node_id
    other = plan(
        {"cluster": {"num_nodes": 3, "component_placement": {"actor": "4-7"}}},
        Inventory.uniform(3, 8),
    )
    with pytest.raises(ArgumentError, match="made for another inventory"):
        _live_plan(other, cluster, ())


def test_a_plan_from_assignments_for_other_nodes_is_refused(cluster: Cluster) -> None:
    from placement_ray._launch import _live_plan

    elsewhere = plan_from_assignments({"actor": [(0, (0,))]}, Inventory.uniform(3, 4))
    with pytest.raises(ArgumentError, match="built from assignments for another inventory"):
        _live_plan(elsewhere, cluster, ())
