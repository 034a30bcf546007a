"""NVLink domains on a live cluster: nodes whose fake NVML reports fabric info.

Four simulated nodes, each a GB200 NVL72 tray of 4 GPUs whose fake NVML registers them
with clique 1 (rack A) or clique 2 (rack B): ranks 0-3 lie in racks A, B, B, A. Discovery
gives each node its domain; a plan with ``cluster.node_order: nvlink_domain`` numbers
them A, A, B, B, and a launch starts every worker on the Ray node the plan names.
"""

from __future__ import annotations

from typing import Any

import pytest

from placement_core import plan
from placement_ray import Cluster, EngineAlignmentError, create_placement_groups, launch
from placement_ray.demo.workers import DemoWorker

from .conftest import RACKS, restore_nodes
from .probes import Probe

pytestmark = pytest.mark.placement_cluster(**RACKS)


def config(rules: dict[str, Any]) -> dict[str, Any]:
    return {
        "cluster": {"num_nodes": 4, "node_order": "nvlink_domain", "component_placement": rules}
    }


def test_discovery_gives_each_live_node_its_nvlink_domain(placement_cluster: Cluster) -> None:
    domains = [str(n.nvlink_domain) for n in placement_cluster.nodes]
    assert domains[0].endswith("/1")
    assert domains[1].endswith("/2")
    assert domains == [domains[0], domains[1], domains[1], domains[0]]
    assert {a.fabric.clique_id for a in placement_cluster.node(1).accelerators if a.fabric} == {2}


def test_node_order_nvlink_domain_numbers_the_live_nodes_rack_by_rack(
    placement_cluster: Cluster,
) -> None:
    ids = [n.node_id for n in placement_cluster.nodes]
    the_plan = plan(config({"actor": "all"}), placement_cluster.inventory)
    assert [n.node_id for n in the_plan.inventory.nodes] == [ids[0], ids[3], ids[1], ids[2]]


def test_launch_starts_each_worker_on_the_node_the_renumbered_plan_names(
    placement_cluster: Cluster,
) -> None:
    ids = [n.node_id for n in placement_cluster.nodes]
    rules = {"actor": {"placement": "0-7", "nvlink_group": 8}, "rollout": "8-11"}
    with launch(
        config(rules), {"actor": DemoWorker, "rollout": DemoWorker}, placement_cluster
    ) as launched:
        assert launched.verify() == []
        actor = launched["actor"]
        assert [r["node_id"] for r in actor.reports] == [ids[0]] * 4 + [ids[3]] * 4
        assert [r["env"]["NODE_RANK"] for r in actor.reports] == ["0"] * 4 + ["1"] * 4
        assert {r["node_id"] for r in launched["rollout"].reports} == {ids[1]}
        assert {s.node_id for s in launched.placement_group(1).slots} == {ids[3]}
        assert launched.cluster.node(1).node_id == ids[3]
        assert placement_cluster.node(1).node_id == ids[1]  # the job's view keeps its order


def test_a_renumbered_plan_launches_as_it_is(placement_cluster: Cluster) -> None:
    ids = [n.node_id for n in placement_cluster.nodes]
    the_plan = plan(config({"actor": "4-7"}), placement_cluster.inventory)
    with launch(the_plan, {"actor": DemoWorker}, placement_cluster) as launched:
        assert launched.plan is the_plan
        assert {r["node_id"] for r in launched["actor"].reports} == {ids[3]}


def test_slime_multi_node_engines_take_nodes_of_one_domain(placement_cluster: Cluster) -> None:
    layout = create_placement_groups(
        0,
        0,
        8,
        rollout_num_gpus_per_engine=8,
        debug_rollout_only=True,
        cluster=placement_cluster,
        cpus_per_bundle=0,
    )
    try:
        assert set(layout.rollout.node_ranks) == {1, 2}
    finally:
        layout.remove()


def test_slime_engines_no_domain_holds_are_an_error_naming_the_sizes(
    placement_cluster: Cluster,
) -> None:
    with pytest.raises(EngineAlignmentError) as caught:
        create_placement_groups(
            0,
            0,
            16,
            rollout_num_gpus_per_engine=16,
            debug_rollout_only=True,
            cluster=placement_cluster,
            cpus_per_bundle=0,
        )
    message = str(caught.value)
    assert "1 engines of 16 GPUs span several nodes" in message
    assert "8 GPUs on nodes 0,3" in message
    assert "8 GPUs on nodes 1-2" in message


def test_recover_takes_the_spare_of_the_lost_nodes_rack_not_the_lowest(
    placement_cluster_factory: Any,
) -> None:
    # Racks A, B, B, A: the actor on nodes 1 (B) and 3 (A), spares 0 (A) and 2 (B). Node 1
    # is lost: rank order alone would take spare 0, in the other rack; core's choice, which
    # recover() makes, takes spare 2 of rack B.
    simulated = placement_cluster_factory.simulated(**RACKS)
    view = simulated.view()
    rules = {"actor": {"placement": "4-7,12-15", "nvlink_group": 4}}
    document = {"cluster": {"num_nodes": 4, "spare_nodes": "0,2", "component_placement": rules}}
    try:
        with launch(document, {"actor": Probe}, view, timeout_s=300) as launched:
            simulated.kill_node(1)
            report = launched.recover(timeout_s=300)
            (move,) = report.moves
            assert (move.lost, move.spare, move.domain) == (1, 2, "same domain")
            assert report.lines()[0] == (
                "actor 0-3: node 1 -> node 2 (rank 0: the master node is now node 2) "
                "(spare in the same NVLink domain)"
            )
            seen = launched["actor"].execute("seen", timeout_s=300)
            assert [s["node_id"] for s in seen] == [view.node(2).node_id] * 4 + [
                view.node(3).node_id
            ] * 4
    finally:
        restore_nodes(simulated, (1,))
