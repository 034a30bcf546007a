"""Resource spaces: hardware, accelerator and node groups, cluster, node and
multi-group concatenation with its checks.

See docs/concepts/cluster-config.md#node-groups-and-their-resources.
"""

from __future__ import annotations

from typing import Any

import pytest

from placement_core._config import ClusterConfig, load_config
from placement_core._errors import PlacementRuleError
from placement_core._inventory import Accelerator, HardwareDevice, Inventory, Node
from placement_core._rules import parse_rule, resolve_rule
from placement_core._spaces import SpaceKind, build_space, group_labels


def gpus(count: int, kind: str = "nvidia") -> tuple[Accelerator, ...]:
    return tuple(Accelerator(index=i, type=kind) for i in range(count))


def arms(count: int) -> tuple[HardwareDevice, ...]:
    return tuple(HardwareDevice("Franka", i, {"robot_ip": f"10.0.0.{i + 1}"}) for i in range(count))


def config(num_nodes: int, *groups: dict[str, Any]) -> ClusterConfig:
    return load_config(
        {
            "cluster": {
                "num_nodes": num_nodes,
                "component_placement": {"x": "0"},
                "node_groups": list(groups),
            }
        }
    )


def franka(label: str, node_ranks: str, *nodes: int) -> dict[str, Any]:
    configs = [{"robot_ip": f"10.10.10.{i + 1}", "node_rank": n} for i, n in enumerate(nodes)]
    return {
        "label": label,
        "node_ranks": node_ranks,
        "hardware": {"type": "Franka", "configs": configs},
    }


def resources(space: Any) -> list[tuple[int, int, str, str]]:
    return [
        (run.node_rank, local_id, run.group, run.kind.value)
        for run in space.runs
        for local_id in run.local_ids
    ]


MIXED = Inventory(
    (
        Node(0, "node-0", accelerators=gpus(2)),
        Node(1, "node-1"),
        Node(2, "node-2", accelerators=gpus(3)),
        Node(3, "node-3", hardware=arms(2)),
    )
)


def test_accelerator_group_numbers_gpus_node_by_node() -> None:
    cfg = config(4, {"label": "gpu", "node_ranks": "0-2"})
    space = build_space(MIXED, cfg, "gpu")
    assert resources(space) == [
        (0, 0, "gpu", "accelerator"), (0, 1, "gpu", "accelerator"),
        (2, 0, "gpu", "accelerator"), (2, 1, "gpu", "accelerator"), (2, 2, "gpu", "accelerator"),
    ]  # fmt: skip
    assert space.size == 5


def test_group_without_accelerators_numbers_its_nodes() -> None:
    cfg = config(4, {"label": "cpu", "node_ranks": "1,3"})
    space = build_space(MIXED, cfg, "cpu")
    assert space.is_node_space
    assert [run.node_rank for run in space.runs] == [1, 3]
    assert space.locate(1)[0].node_rank == 3


def test_hardware_group_numbers_its_devices() -> None:
    cfg = config(4, franka("franka", "3", 3, 3))
    space = build_space(MIXED, cfg, "franka")
    assert resources(space) == [(3, 0, "franka", "hardware"), (3, 1, "franka", "hardware")]
    assert {run.resource_type for run in space.runs} == {"Franka"}


def test_hardware_group_walks_nodes_in_rank_order() -> None:
    inventory = Inventory(
        (Node(0, "n0"), Node(1, "n1", hardware=arms(2)), Node(2, "n2", hardware=arms(1)))
    )
    cfg = config(3, franka("franka", "1-2", 2, 1, 1))
    space = build_space(inventory, cfg, "franka")
    assert [(r.node_rank, r.local_ids) for r in space.runs] == [(1, (0, 1)), (2, (0,))]


def test_cluster_is_an_accelerator_space_when_any_node_has_gpus() -> None:
    space = build_space(MIXED, None, "cluster")
    assert [(n, i) for n, i, _, _ in resources(space)] == [(0, 0), (0, 1), (2, 0), (2, 1), (2, 2)]
    assert {kind for _, _, _, kind in resources(space)} == {"accelerator"}


def test_cluster_without_gpus_is_the_node_space() -> None:
    space = build_space(Inventory.uniform(3, 0), None, None)
    assert space.is_node_space
    assert space.groups == ("cluster",)
    assert space.size == 3


def test_node_is_always_the_node_space_and_ignores_hardware() -> None:
    space = build_space(MIXED, None, "node")
    assert space.is_node_space
    assert [run.node_rank for run in space.runs] == [0, 1, 2, 3]
    assert {run.kind for run in space.runs} == {SpaceKind.NODE}


def test_user_group_needs_a_config() -> None:
    with pytest.raises(PlacementRuleError, match="needs a cluster config"):
        build_space(MIXED, None, "a800")


def test_unknown_group_is_an_error() -> None:
    cfg = config(4, {"label": "gpu", "node_ranks": "0-2"})
    with pytest.raises(PlacementRuleError, match="'gpux' is not a defined node group"):
        build_space(MIXED, cfg, "gpux")


# --- concatenation ----------------------------------------------------------------------


def test_groups_concatenate_in_the_listed_order() -> None:
    cfg = config(4, {"label": "a", "node_ranks": "0"}, {"label": "b", "node_ranks": "2"})
    space = build_space(MIXED, cfg, "b,a")
    assert [(n, i, g) for n, i, g, _ in resources(space)] == [
        (2, 0, "b"), (2, 1, "b"), (2, 2, "b"), (0, 0, "a"), (0, 1, "a")
    ]  # fmt: skip
    assert [run.start for run in space.runs] == [0, 3]
    assert build_space(MIXED, cfg, ["a", "b"]).groups == ("a", "b")


def test_concatenated_placements_carry_their_own_group() -> None:
    cfg = config(4, {"label": "a", "node_ranks": "0"}, {"label": "b", "node_ranks": "2"})
    space = build_space(MIXED, cfg, "a,b")
    entries = resolve_rule(parse_rule("1-2"), space)
    assert [(run.group, run.node_rank, ids) for _, run, ids in entries] == [
        ("a", 0, [(1,)]), ("b", 2, [(0,)])
    ]  # fmt: skip


def test_a_resource_counted_twice_is_an_error() -> None:
    cfg = config(4, {"label": "a", "node_ranks": "0,2"}, {"label": "b", "node_ranks": "2"})
    with pytest.raises(PlacementRuleError, match="'a' and 'b' both number the nvidia") as info:
        build_space(MIXED, cfg, "a,b", path="cluster.component_placement.x.node_group")
    assert info.value.path == "cluster.component_placement.x.node_group"


def test_two_node_spaces_sharing_a_node_count_it_twice() -> None:
    cfg = config(4, {"label": "c1", "node_ranks": "1,3"}, {"label": "c2", "node_ranks": "3"})
    with pytest.raises(PlacementRuleError, match="one resource would get two ranks"):
        build_space(MIXED, cfg, "c1,c2")


def test_node_spaces_do_not_mix_with_accelerator_spaces() -> None:
    cfg = config(4, {"label": "gpu", "node_ranks": "0"}, {"label": "cpu", "node_ranks": "1"})
    with pytest.raises(PlacementRuleError, match="cannot concatenate node spaces"):
        build_space(MIXED, cfg, "gpu,cpu")
    with pytest.raises(PlacementRuleError, match="cannot concatenate node spaces"):
        build_space(MIXED, cfg, "gpu,node")


def test_a_group_listed_twice_is_an_error() -> None:
    cfg = config(4, {"label": "gpu", "node_ranks": "0"})
    with pytest.raises(PlacementRuleError, match="listed twice"):
        build_space(MIXED, cfg, "gpu,gpu")


def test_gpu_and_arm_of_one_node_concatenate() -> None:
    inventory = Inventory((Node(0, "n0", accelerators=gpus(1), hardware=arms(1)),))
    cfg = config(1, {"label": "gpu", "node_ranks": "0"}, franka("franka", "0", 0))
    space = build_space(inventory, cfg, "gpu,franka")
    assert resources(space) == [(0, 0, "gpu", "accelerator"), (0, 0, "franka", "hardware")]
    entries = resolve_rule(parse_rule("0-1"), space)
    assert [(run.kind, ids) for _, run, ids in entries] == [
        (SpaceKind.ACCELERATOR, [(0,)]), (SpaceKind.HARDWARE, [(0,)])
    ]  # fmt: skip
    with pytest.raises(PlacementRuleError, match="span resources of different types"):
        resolve_rule(parse_rule("0-1:0"), space)


@pytest.mark.parametrize(
    ("value", "expected"),
    [(None, ("cluster",)), ("a800", ("a800",)), (" a800 , 4090", ("a800", "4090")),
     (["a800", "4090"], ("a800", "4090"))],
)  # fmt: skip
def test_group_labels_accept_text_and_lists(value: object, expected: tuple[str, ...]) -> None:
    assert group_labels(value) == expected  # type: ignore[arg-type]


@pytest.mark.parametrize("value", ["a800,", ["a800", ""], [3]])
def test_group_labels_reject_empty_or_non_text(value: object) -> None:
    with pytest.raises(PlacementRuleError, match="expected node group labels"):
        group_labels(value)  # type: ignore[arg-type]


def test_locate_rejects_out_of_range_ranks() -> None:
    space = build_space(Inventory.uniform(1, 4), None, "cluster")
    with pytest.raises(PlacementRuleError, match=r"valid ranks are 0\.\.3"):
        space.locate(4)


def test_packed_runs_with_the_same_ids_share_one_list() -> None:
    space = build_space(Inventory.uniform(3, 8), None, "cluster")
    entries = space.packed(0, 23, per_process=4, stride=2)
    assert [(count, run.node_rank) for count, run, _ in entries] == [(2, 0), (2, 1), (2, 2)]
    assert entries[0][2] == [(0, 2, 4, 6), (1, 3, 5, 7)]
    assert entries[0][2] is entries[1][2] is entries[2][2]


def test_packed_runs_with_other_ids_keep_their_own_lists() -> None:
    space = build_space(Inventory.uniform(2, 8), None, "cluster")
    entries = space.packed(4, 15, per_process=4)
    assert [ids for _, _, ids in entries] == [[(4, 5, 6, 7)], [(0, 1, 2, 3), (4, 5, 6, 7)]]
