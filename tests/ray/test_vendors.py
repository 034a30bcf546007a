"""Every accelerator Ray schedules, on one simulated cluster of every vendor.

Node 0 has NVIDIA GPUs, node 1 Ascend NPUs, node 2 Gaudi HPUs, node 3 AMD GPUs, node 4
Intel GPUs and node 5 none. One mixed job (NVIDIA trainers, Ascend rollouts sharing
their NPUs with a reference model, a Gaudi engine over two HPUs, AMD and Intel workers,
CPU-only agents) serves the read-only tests; each worker reports what it sees from
inside: its environment and Ray's accelerator ids.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from typing import Any

import pytest
import ray
from ray.util.placement_group import placement_group_table

from placement_core import Accelerator, Inventory, Node, plan
from placement_core._accelerators import VISIBILITY_ENV_VARS
from placement_ray import (
    AcceleratorMismatchError,
    ArgumentError,
    Cluster,
    create_placement_groups,
    launch,
)
from placement_ray._accelerators import (
    check_live_types,
    managed_by_ray,
    share_options,
    whole_only,
)
from placement_ray._launch import Launch
from placement_ray.compat.slime import create_placement_groups as slime_create
from placement_ray.testing import ClusterSpec, SimulatedCluster

VENDORS = ("nvidia", "ascend", "gaudi", "amd", "intel", None)
MIXED: dict[str, Any] = {
    "nodes": 6,
    "accelerator": VENDORS,
    "gpus_per_node": (2, 2, 2, 2, 2, 0),
    "cpus_per_node": 2,
    "timeout_s": 180,
}
pytestmark = pytest.mark.placement_cluster(**MIXED)

VISIBILITY = sorted({v.env_var for v in VISIBILITY_ENV_VARS.values()} | {"ZE_AFFINITY_MASK"})
GROUPS = [
    {"label": label, "node_ranks": rank}
    for rank, label in enumerate(("a100", "npu", "gaudi", "mi300", "xe"))
]
COMPONENTS = ("actor", "rollout", "ref", "engine", "amd", "intel", "agent")


def mixed_config() -> dict[str, Any]:
    return {
        "cluster": {
            "num_nodes": 6,
            "node_groups": GROUPS,
            "component_placement": {
                "actor": {"node_group": "a100", "placement": "0-1"},
                "rollout,ref": {"node_group": "npu", "placement": "0-1"},
                "engine": {"node_group": "gaudi", "placement": "0-1:0"},
                "amd": {"node_group": "mi300", "placement": "0-1"},
                "intel": {"node_group": "xe", "placement": "0-1"},
                "agent": {"node_group": "node", "placement": "5:0-1"},
            },
        }
    }


class Seer:
    """Reports, from inside the worker, what it sees."""

    def seen(self) -> dict[str, Any]:
        ids = ray.get_runtime_context().get_accelerator_ids()
        return {
            "ids": {k: sorted(v) for k, v in ids.items() if v},
            "env": {k: v for k, v in os.environ.items() if k in VISIBILITY or "NOSET" in k},
        }


@pytest.fixture(scope="module")
def mixed(placement_cluster_factory: Any) -> SimulatedCluster:
    simulated: SimulatedCluster = placement_cluster_factory.simulated(**MIXED)
    return simulated


@pytest.fixture(scope="class")
def launched(mixed: SimulatedCluster) -> Iterator[Launch]:
    before = mixed.baseline()
    result = launch(mixed_config(), dict.fromkeys(COMPONENTS, Seer), mixed.view(), timeout_s=180)
    try:
        yield result
    finally:
        result.shutdown()
        mixed.cleanup(before)


def seen(launched: Launch, component: str) -> list[dict[str, Any]]:
    return launched[component].execute("seen", timeout_s=60)


def test_every_node_is_typed_by_its_vendor(mixed: SimulatedCluster) -> None:
    nodes = mixed.view().nodes
    assert [n.accelerator_type for n in nodes] == list(VENDORS)
    assert nodes[1].accelerators[0].model == "Ascend910B"


class TestTheMixedJob:
    """One launch of NVIDIA, Ascend, Gaudi, AMD and Intel workers and CPU-only agents;
    its devices are free again for the tests after the class."""

    def test_the_mixed_job_runs_as_planned(self, launched: Launch) -> None:
        assert launched.verify() == []
        assert [len(launched[c]) for c in COMPONENTS] == [2, 2, 2, 1, 2, 2, 2]

    @pytest.mark.parametrize(
        ("component", "variable", "resource", "values"),
        [
            ("actor", "CUDA_VISIBLE_DEVICES", "GPU", ["0", "1"]),
            ("rollout", "ASCEND_RT_VISIBLE_DEVICES", "NPU", ["0", "1"]),
            ("amd", "HIP_VISIBLE_DEVICES", "GPU", ["0", "1"]),
            ("intel", "ONEAPI_DEVICE_SELECTOR", "GPU", ["level_zero:0", "level_zero:1"]),
        ],
    )
    def test_each_worker_sees_its_device_through_its_vendors_variable(
        self, launched: Launch, component: str, variable: str, resource: str, values: list[str]
    ) -> None:
        reports = seen(launched, component)
        assert [r["env"][variable] for r in reports] == values
        assert [r["ids"] for r in reports] == [{resource: [v[-1]]} for v in values]
        noset = VISIBILITY_ENV_VARS[launched.plan.components[component][0].accelerator_type or ""]
        assert all(r["env"][name] == "1" for r in reports for name in noset.noset_env_vars)

    @pytest.mark.parametrize("component", ["actor", "rollout", "ref", "engine", "amd", "intel"])
    def test_no_worker_has_another_vendors_variable(self, launched: Launch, component: str) -> None:
        kind = launched.plan.components[component][0].accelerator_type or ""
        own = VISIBILITY_ENV_VARS[kind].env_var
        for report in seen(launched, component):
            assert sorted(k for k in report["env"] if k in VISIBILITY) == [own]

    def test_a_gaudi_engine_over_two_hpus_sees_both_and_holds_the_first(
        self, launched: Launch
    ) -> None:
        (report,) = seen(launched, "engine")
        assert report["env"]["HABANA_VISIBLE_MODULES"] == "0,1"
        assert report["ids"] == {"HPU": ["0"]}
        assert launched["engine"].workers[0].gpu_ids == (0, 1)

    def test_rollout_and_ref_share_each_npu_half_and_half(self, launched: Launch) -> None:
        rollout, ref = seen(launched, "rollout"), seen(launched, "ref")
        assert (
            [r["ids"] for r in rollout]
            == [r["ids"] for r in ref]
            == [{"NPU": ["0"]}, {"NPU": ["1"]}]
        )
        assert [w.gpu_share for w in launched["rollout"].workers] == [0.5, 0.5]
        assert [w.gpu_share for w in launched["ref"].workers] == [0.5, 0.5]

    def test_cpu_only_agents_see_no_device_and_no_visibility_variable(
        self, launched: Launch
    ) -> None:
        for report in seen(launched, "agent"):
            assert report["ids"] == {}
            assert [k for k in report["env"] if k in VISIBILITY] == []

    def test_each_nodes_devices_are_reserved_with_its_own_resource(self, launched: Launch) -> None:
        asked = {
            rank: {
                k for bundle in placement_group_table(group.pg)["bundles"].values() for k in bundle
            }
            for rank, group in launched.placement_groups.items()
        }
        assert asked == {0: {"GPU"}, 1: {"NPU"}, 2: {"HPU"}, 3: {"GPU"}, 4: {"GPU"}}


def test_a_plan_for_nvidia_on_the_ascend_node_is_refused_before_anything_is_reserved(
    placement_cluster: Cluster,
) -> None:
    offline = plan(
        {"cluster": {"num_nodes": 6, "component_placement": {"actor": "0-3"}}},
        Inventory.uniform(6, 2),
    )
    before = set(placement_group_table())
    with pytest.raises(AcceleratorMismatchError, match="node 1: planned nvidia, live ascend"):
        launch(offline, {"actor": Seer}, placement_cluster)
    assert set(placement_group_table()) == before


def test_a_config_declaring_the_wrong_vendor_names_node_planned_and_live(
    placement_cluster: Cluster,
) -> None:
    config = mixed_config()
    config["cluster"]["component_placement"] = {"x": {"node_group": "gaudi", "placement": 0}}
    config["cluster"]["inventory"] = [
        {"node_ranks": 2, "accelerators": {"type": "ascend", "count": 2}}
    ]
    with pytest.raises(AcceleratorMismatchError) as caught:
        launch(config, {"x": Seer}, placement_cluster)
    assert caught.value.mismatches == ((2, "ascend", "gaudi"),)


def test_gaudi_hpus_cannot_be_shared(placement_cluster: Cluster) -> None:
    config = mixed_config()
    config["cluster"]["component_placement"] = {"a,b": {"node_group": "gaudi", "placement": 0}}
    before = set(placement_group_table())
    with pytest.raises(ArgumentError, match=r"only whole.*a rank 0 on node 2: 0\.5 HPU"):
        launch(config, {"a": Seer, "b": Seer}, placement_cluster)
    assert set(placement_group_table()) == before


@pytest.mark.parametrize(("accelerator", "resource"), [("ascend", "NPU"), ("gaudi", "HPU")])
def test_a_slime_layout_reserves_the_named_accelerator(
    placement_cluster: Cluster, accelerator: str, resource: str
) -> None:
    layout = create_placement_groups(
        1, 1, 1, cluster=placement_cluster, accelerator=accelerator, cpus_per_bundle=0
    )
    bundles = placement_group_table(layout.group.pg)["bundles"].values()
    assert [dict(b) for b in bundles] == [{resource: 1.0}, {resource: 1.0}]
    assert sorted(layout.actor.gpu_ids + layout.rollout.gpu_ids) == [0, 1]


def test_a_slime_layout_needs_the_accelerator_named_on_a_mixed_cluster(
    placement_cluster: Cluster,
) -> None:
    with pytest.raises(ArgumentError, match="accelerator: the cluster's nodes have"):
        create_placement_groups(1, 1, 1, cluster=placement_cluster)


def test_slimes_args_naming_the_npu_device_reserve_npus(placement_cluster: Cluster) -> None:
    class Args:
        actor_num_nodes, actor_num_gpus_per_node, rollout_num_gpus = 1, 2, 2
        rollout_num_gpus_per_engine = 2
        colocate, debug_train_only, debug_rollout_only = True, False, False
        rollout_external = use_critic = False
        device = "npu"

    pgs = slime_create(Args(), cluster=placement_cluster, timeout_s=60)
    pg, _, gpu_ids = pgs["actor"]
    assert [dict(b)["NPU"] for b in placement_group_table(pg)["bundles"].values()] == [1.0, 1.0]
    assert gpu_ids == [0, 1]


def test_simulated_nodes_offer_their_vendors_resource_and_type(mixed: SimulatedCluster) -> None:
    mixed.connect()
    by_rank = {int(n["Labels"]["node-rank"]): n for n in ray.nodes() if n["Alive"]}
    offered = {
        rank: {k for k in ("GPU", "NPU", "HPU") if node["Resources"].get(k)}
        for rank, node in by_rank.items()
    }
    assert offered == {0: {"GPU"}, 1: {"NPU"}, 2: {"HPU"}, 3: {"GPU"}, 4: {"GPU"}, 5: set()}
    assert by_rank[1]["Labels"]["ray.io/accelerator-type"] == "Ascend910B"
    assert by_rank[3]["Resources"]["accelerator_type:AMD-Instinct-MI300X-OAM"] == 1


def test_rays_npu_detection_is_kept_quiet_while_simulated_nodes_start(
    caplog: pytest.LogCaptureFixture,
) -> None:
    from ray._private.accelerators import NPUAcceleratorManager

    from placement_ray.testing import _quiet_ray

    with caplog.at_level(logging.ERROR), _quiet_ray():
        NPUAcceleratorManager.get_current_node_accelerator_type()
    assert [r for r in caplog.records if "NPU" in r.getMessage()] == []
    with caplog.at_level(logging.ERROR):  # what a simulated Ascend node would print
        NPUAcceleratorManager.get_current_node_accelerator_type()
    assert any("Failed to detect NPU type" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"accelerator": "tpu"}, r"accelerator: expected None or one of amd, ascend"),
        ({"accelerator": ("nvidia",)}, r"accelerator: expected one value or a list of 2"),
        ({"gpus_per_node": (4, -1)}, r"gpus_per_node\[1\]: expected an int >= 0, got -1"),
        ({"accelerator_model": ""}, r"accelerator_model: expected None or a non-empty name"),
    ],
)
def test_a_bad_vendor_field_of_a_cluster_spec_names_it(
    fields: dict[str, Any], message: str
) -> None:
    with pytest.raises(ArgumentError, match=message):
        ClusterSpec(nodes=2, **fields)


def test_a_cluster_spec_keeps_per_node_lists_as_tuples() -> None:
    spec = ClusterSpec(nodes=2, accelerator=["ascend", None], gpus_per_node=[8, 0])
    assert (spec.accelerator, spec.gpus_per_node) == (("ascend", None), (8, 0))
    assert spec.per_node("accelerator", 1) is None


@pytest.mark.parametrize(
    ("resource", "options"),
    [
        ("GPU", {"num_gpus": 0.5}),
        ("NPU", {"num_gpus": 0, "resources": {"NPU": 0.5}}),
        ("MUSA", {"num_gpus": 0, "resources": {"MUSA": 0.5}}),
    ],
)
def test_a_share_is_spelled_for_its_resource(resource: str, options: dict[str, Any]) -> None:
    assert share_options(resource, 0.5) == options


def test_ray_keeps_ids_for_its_own_accelerators_only() -> None:
    assert [managed_by_ray(r) for r in ("GPU", "NPU", "HPU", "MUSA")] == [True] * 3 + [False]
    assert [whole_only(r) for r in ("GPU", "NPU", "HPU")] == [False, False, True]


def test_a_live_type_check_names_every_wrong_node() -> None:
    planned = Inventory.uniform(3, 2)
    live = Inventory(
        tuple(
            Node(rank=r, node_id=f"n{r}", accelerators=tuple(Accelerator(i, kind) for i in (0, 1)))
            for r, kind in enumerate(("nvidia", "ascend", "gaudi"))
        )
    )
    with pytest.raises(AcceleratorMismatchError) as caught:
        check_live_types(planned, live)
    assert caught.value.mismatches == ((1, "nvidia", "ascend"), (2, "nvidia", "gaudi"))
    check_live_types(planned, live, used=[0])  # only node 0 is used: it matches


def test_a_fake_nvml_machine_needs_an_nvidia_node() -> None:
    with pytest.raises(ArgumentError, match="topology: node 1 has a fake NVML machine but"):
        ClusterSpec(nodes=2, topology="dgx-h100", accelerator=("nvidia", "ascend"))
