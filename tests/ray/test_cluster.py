"""Cluster: the job's view (namespace, node order, inventory) on a simulated cluster."""

from __future__ import annotations

import json

import pytest
import ray

from placement_ray._cluster import STATE_ACTOR_NAME, Cluster, wait_for_nodes
from placement_ray._discovery import discover_nodes
from placement_ray.errors import (
    ArgumentError,
    ClusterError,
    ForeignClusterError,
    NodesNotReadyError,
)

from .conftest import GPUS_PER_NODE, NUM_NODES, run_python


def label_of(node_id: str) -> str:
    return next(n["Labels"]["node-rank"] for n in ray.nodes() if n["NodeID"] == node_id)


def test_node_ranks_follow_the_node_rank_labels(placement_cluster: Cluster) -> None:
    assert placement_cluster.num_nodes == NUM_NODES
    assert [label_of(n.node_id) for n in placement_cluster.nodes] == ["0", "1", "2"]


def test_each_node_reports_on_itself_from_its_own_environment(placement_cluster: Cluster) -> None:
    facts = discover_nodes([n.node_id for n in placement_cluster.nodes], timeout_s=60)
    assert [f.env for f in facts] == [{"PLACEMENT_NODE_RANK": str(r)} for r in range(NUM_NODES)]
    assert [f.is_driver for f in facts] == [True, False, False]
    for fact in facts:
        assert fact.snapshot is None or fact.snapshot["schema"] == 1


def test_nodes_without_nvml_get_ray_logical_gpus(placement_cluster: Cluster) -> None:
    for node in placement_cluster.nodes:
        assert node.accelerator_ids == tuple(range(GPUS_PER_NODE))
        assert {a.type for a in node.accelerators} == {"nvidia"}
        assert node.ip == "127.0.0.1"


def test_shared_ip_is_warned_about(placement_cluster: Cluster) -> None:
    assert any("nodes 0, 1, 2 share IP 127.0.0.1" in w for w in placement_cluster.warnings)


def test_master_addr_is_node_0s_ip(placement_cluster: Cluster) -> None:
    assert placement_cluster.master_addr == "127.0.0.1"


def test_node_address_is_that_nodes_ip(placement_cluster: Cluster) -> None:
    assert [placement_cluster.node_address(r) for r in range(3)] == ["127.0.0.1"] * 3


def test_rank_of_an_unknown_node_is_an_error(placement_cluster: Cluster) -> None:
    with pytest.raises(ClusterError, match="Ray node ffff is not one of job 'pytest'"):
        placement_cluster.rank_of("ffff")


def test_a_worker_process_of_the_job_sees_the_same_view(placement_cluster: Cluster) -> None:
    @ray.remote(num_cpus=0)
    def view() -> tuple[str, list[str]]:
        attached = Cluster(export_env=False)
        return attached.job, [n.node_id for n in attached.nodes]

    job, node_ids = ray.get(view.remote(), timeout=60)
    assert job == "pytest"
    assert node_ids == [n.node_id for n in placement_cluster.nodes]


def test_a_subprocess_given_attach_env_joins_the_same_view(placement_cluster: Cluster) -> None:
    code = (
        "from placement_ray._cluster import Cluster\n"
        "import json\n"
        "c = Cluster(export_env=False)\n"
        "print(json.dumps([c.job, c.namespace, [n.node_id for n in c.nodes]]))\n"
    )
    out = run_python(code, placement_cluster.attach_env())
    job, namespace, node_ids = json.loads(out.strip().splitlines()[-1])
    assert (job, namespace) == ("pytest", "placement-pytest")
    assert node_ids == [n.node_id for n in placement_cluster.nodes]


def test_another_job_gets_its_own_namespace_and_cannot_see_our_actors(
    placement_cluster: Cluster,
) -> None:
    env = {"RAY_ADDRESS": placement_cluster.address, "PLACEMENT_JOB": "other"}
    code = (
        "import ray, json\n"
        "from placement_ray._cluster import Cluster, STATE_ACTOR_NAME\n"
        "c = Cluster(export_env=False)\n"
        "try:\n"
        "    ray.get_actor(STATE_ACTOR_NAME, namespace='placement-pytest')\n"
        "    cross = True\n"
        "except ValueError:\n"
        "    cross = False\n"
        "names = [a['name'] for a in ray.util.list_named_actors(all_namespaces=True)\n"
        "         if a['namespace'] == c.namespace]\n"
        "print(json.dumps([c.namespace, cross, names, c.num_nodes]))\n"
    )
    namespace, _, names, num_nodes = json.loads(run_python(code, env).strip().splitlines()[-1])
    assert namespace == "placement-other"
    assert names == [STATE_ACTOR_NAME]
    assert num_nodes == NUM_NODES
    with pytest.raises(ValueError, match="Failed to look up actor"):
        ray.get_actor(STATE_ACTOR_NAME, namespace="placement-other")


def test_a_process_of_another_cluster_is_refused(
    placement_cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PLACEMENT_CLUSTER_ID", "0" * 56)
    with pytest.raises(ForeignClusterError, match="set RAY_ADDRESS to the job's cluster") as info:
        Cluster(export_env=False)
    assert info.value.found == placement_cluster.cluster_id


def test_by_default_the_process_environment_is_left_alone(
    placement_cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PLACEMENT_CLUSTER_ID", raising=False)
    import os

    attached = Cluster()
    try:
        assert "PLACEMENT_CLUSTER_ID" not in os.environ
    finally:
        attached.shutdown()


def test_export_env_sets_and_shutdown_restores_the_attach_variables(
    placement_cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PLACEMENT_JOB", raising=False)
    import os

    attached = Cluster(export_env=True)
    assert os.environ["PLACEMENT_JOB"] == "pytest"
    assert os.environ["PLACEMENT_CLUSTER_ID"] == placement_cluster.cluster_id
    attached.shutdown()
    assert "PLACEMENT_JOB" not in os.environ
    assert ray.is_initialized()


def test_waiting_for_more_nodes_times_out_naming_the_missing_ranks(
    placement_cluster: Cluster,
) -> None:
    lines: list[str] = []
    with pytest.raises(NodesNotReadyError, match="3/5 nodes up, waiting for ranks 3, 4") as info:
        wait_for_nodes(5, timeout_s=0.3, poll_s=0.1, progress=lines.append)
    assert lines == ["3/5 nodes up, waiting for ranks 3, 4"]
    assert (info.value.expected, info.value.alive, info.value.missing_ranks) == (5, 3, (3, 4))


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"timeout_s": 0}, "timeout_s: expected seconds > 0 or None, got 0"),
        ({"timeout_s": "5"}, "timeout_s: expected seconds > 0 or None, got '5'"),
        ({"poll_s": 0}, "poll_s: expected seconds > 0, got 0"),
        ({"poll_s": None}, "poll_s: expected seconds > 0, got None"),
    ],
)
def test_waiting_with_a_bad_timeout_or_poll_names_the_argument(
    kwargs: dict[str, object], match: str
) -> None:
    with pytest.raises(ArgumentError, match=match):
        wait_for_nodes(1, **kwargs)  # type: ignore[arg-type]


def test_enough_nodes_return_at_once(placement_cluster: Cluster) -> None:
    assert len(wait_for_nodes(NUM_NODES, timeout_s=5)) == NUM_NODES


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"num_nodes": 0}, "num_nodes: expected an int >= 1 or None, got 0"),
        ({"num_nodes": True}, "num_nodes: expected an int >= 1 or None, got True"),
        ({"job": ""}, "job: expected a non-empty name"),
        ({"num_gpus": 2}, "num_gpus only apply when starting a local cluster"),
        ({"num_gpus": -1}, "num_gpus: expected an int >= 0 or None, got -1"),
        ({"num_gpus": "8"}, "num_gpus: expected an int >= 0 or None, got '8'"),
        ({"num_cpus": 1.5}, "num_cpus: expected an int >= 0 or None, got 1.5"),
        ({"node_ip_address": ""}, "node_ip_address: expected a non-empty IP string"),
        ({"timeout_s": 0}, "timeout_s: expected seconds > 0 or None, got 0"),
        ({"timeout_s": "60"}, "timeout_s: expected seconds > 0 or None, got '60'"),
    ],
)
def test_bad_arguments_name_the_argument(
    placement_cluster: Cluster, kwargs: dict[str, object], match: str
) -> None:
    with pytest.raises(ArgumentError, match=match):
        Cluster(export_env=False, **kwargs)  # type: ignore[arg-type]


def test_a_job_name_that_contradicts_the_connection_is_an_error(placement_cluster: Cluster) -> None:
    with pytest.raises(ClusterError, match="namespace 'placement-pytest', but job 'x'"):
        Cluster(job="x", export_env=False)


def test_without_an_address_a_local_cluster_is_started_never_a_stray_one() -> None:
    code = (
        "import json, ray\n"
        "from placement_ray._cluster import Cluster\n"
        "c = Cluster(num_gpus=2, num_cpus=1, node_ip_address='127.0.0.1', export_env=False)\n"
        "out = [c.started_local, c.num_nodes, list(c.node(0).accelerator_ids), c.job]\n"
        "c.shutdown()\n"
        "out.append(ray.is_initialized())\n"
        "print(json.dumps(out))\n"
    )
    started, nodes, gpus, job, still = json.loads(run_python(code, {}).strip().splitlines()[-1])
    assert (started, nodes, gpus, still) == (True, 1, [0, 1], False)
    assert len(job) == 12


def test_a_child_of_a_job_without_an_address_refuses_to_start_a_cluster() -> None:
    code = (
        "from placement_ray._cluster import Cluster\n"
        "from placement_ray.errors import ClusterError\n"
        "try:\n"
        "    Cluster(export_env=False)\n"
        "except ClusterError as e:\n"
        "    print('refused:', e)\n"
    )
    out = run_python(code, {"PLACEMENT_CLUSTER_ID": "abc", "PLACEMENT_JOB": "j"})
    assert "refused: this process belongs to job 'j' on cluster abc" in out


def test_attaching_with_another_node_count_is_an_error(placement_cluster: Cluster) -> None:
    with pytest.raises(
        ClusterError, match="already has a view of 3 nodes, this process asks for 2"
    ):
        Cluster(2, export_env=False)
