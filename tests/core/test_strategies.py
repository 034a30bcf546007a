"""Placement strategies: packed with stride, flexible, node, strided rollout.

See docs/concepts/strategies.md.
"""

from __future__ import annotations

import pytest

from placement_core._errors import PlacementRuleError
from placement_core._inventory import Accelerator, Inventory, Node
from placement_core._records import Placement
from placement_core._spaces import build_space
from placement_core._strategies import flexible, node, packed, strided_rollout

TWO_NODES = Inventory.uniform(2, 8)


def layout(placements: tuple[Placement, ...]) -> list[tuple[int, int, tuple[int, ...]]]:
    return [(p.rank, p.node_rank, p.hardware_ranks) for p in placements]


def accelerators(count: int) -> tuple[Accelerator, ...]:
    return tuple(Accelerator(index=i) for i in range(count))


# --- 6.1 packed --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("strategy", "expected"),
    [
        (
            packed(0, 15, per_process=4, stride=2),
            [(0, 0, (0, 2, 4, 6)), (1, 0, (1, 3, 5, 7)), (2, 1, (0, 2, 4, 6)),
             (3, 1, (1, 3, 5, 7))],
        ),
        (
            packed(0, 15, per_process=2, stride=4),
            [(0, 0, (0, 4)), (1, 0, (1, 5)), (2, 0, (2, 6)), (3, 0, (3, 7)),
             (4, 1, (0, 4)), (5, 1, (1, 5)), (6, 1, (2, 6)), (7, 1, (3, 7))],
        ),
        (
            packed(4, 11, per_process=2, stride=2),
            [(0, 0, (4, 6)), (1, 0, (5, 7)), (2, 1, (0, 2)), (3, 1, (1, 3))],
        ),
        (
            packed(2, 13, per_process=2),
            [(0, 0, (2, 3)), (1, 0, (4, 5)), (2, 0, (6, 7)), (3, 1, (0, 1)), (4, 1, (2, 3)),
             (5, 1, (4, 5))],
        ),
    ],
)  # fmt: skip
def test_spec6_packed_table(strategy: object, expected: list[object]) -> None:
    placements = strategy.place(TWO_NODES)  # type: ignore[attr-defined]
    assert layout(placements) == expected
    for p in placements:
        assert p.visible_accelerators == p.hardware_ranks
        assert p.local_accelerator_rank == p.hardware_ranks[0]
        assert p.isolate_accelerator is True
        assert p.accelerator_type == "nvidia"
        assert p.node_group == "cluster"
        assert p.placement_node_rank == p.node_rank
        assert p.node_id == f"node-{p.node_rank}"
    per_node = [sum(1 for p in placements if p.node_rank == n) for n in (0, 1)]
    assert [p.local_world_size for p in placements] == [per_node[p.node_rank] for p in placements]
    assert [p.local_rank for p in placements] == [
        p.rank - (0 if p.node_rank == 0 else per_node[0]) for p in placements
    ]


def test_spec6_packed_with_stride_on_one_node() -> None:
    placements = packed(0, 7, per_process=2, stride=2).place(Inventory.uniform(1, 8))
    assert [p.hardware_ranks for p in placements] == [(0, 2), (1, 3), (4, 6), (5, 7)]
    assert [p.local_rank for p in placements] == [0, 1, 2, 3]
    assert {p.local_world_size for p in placements} == {4}


def test_spec6_packed_block_may_not_cross_a_node() -> None:
    with pytest.raises(PlacementRuleError, match="process 0 would span nodes 0 and 1") as info:
        packed(7, 8, per_process=2).place(TWO_NODES)
    assert "resources 7-8" in str(info.value)


def test_spec6_packed_on_nodes_of_different_sizes() -> None:
    inventory = Inventory(
        (
            Node(0, "node-0", accelerators=accelerators(8)),
            Node(1, "node-1", accelerators=accelerators(4)),
        )
    )
    placements = packed(0, 11, per_process=4).place(inventory)
    assert layout(placements) == [(0, 0, (0, 1, 2, 3)), (1, 0, (4, 5, 6, 7)), (2, 1, (0, 1, 2, 3))]
    assert [p.local_world_size for p in placements] == [2, 2, 1]


def test_packed_never_hands_out_a_gpu_past_the_node() -> None:
    # RLinf's off-by-one could give GPU 8 on an 8-GPU node (deliberately unlike RLinf,
    # docs/guides/coming-from-rlinf.md).
    with pytest.raises(PlacementRuleError, match="would span nodes"):
        packed(4, 11, per_process=4, stride=2).place(TWO_NODES)


def test_packed_count_must_divide_into_blocks() -> None:
    with pytest.raises(
        PlacementRuleError, match="not divisible into blocks of per_process 2 x stride 2"
    ):
        packed(0, 5, per_process=2, stride=2)


@pytest.mark.parametrize(
    ("kwargs", "path"),
    [
        ({"start": -1, "end": 3}, "start"),
        ({"start": 0, "end": 3, "per_process": 0}, "per_process"),
        ({"start": 0, "end": 3, "stride": 0}, "stride"),
        ({"start": 0, "end": 3, "stride": True}, "stride"),
        ({"start": 4, "end": 3}, "end"),
        ({"start": 0, "end": 3.0}, "end"),
    ],
)
def test_packed_rejects_bad_arguments(kwargs: dict[str, object], path: str) -> None:
    with pytest.raises(PlacementRuleError) as info:
        packed(**kwargs)  # type: ignore[arg-type]
    assert info.value.path == path


def test_packed_end_out_of_range_names_the_valid_ranks() -> None:
    with pytest.raises(PlacementRuleError, match=r"resource 16 is out of range.*0\.\.15"):
        packed(0, 16, per_process=1).place(TWO_NODES)


def test_packed_without_isolation_sees_the_whole_node() -> None:
    placements = packed(2, 5, per_process=2, isolate_accelerator=False).place(
        Inventory.uniform(1, 8)
    )
    assert [p.visible_accelerators for p in placements] == [tuple(range(8))] * 2
    assert [p.local_accelerator_rank for p in placements] == [2, 4]
    assert {p.isolate_accelerator for p in placements} == {False}


def test_placements_share_their_tuples() -> None:
    placements = packed(0, 15).place(TWO_NODES)
    assert placements[0].hardware_ranks is placements[8].hardware_ranks
    assert placements[0].visible_accelerators is placements[0].hardware_ranks


def test_packed_places_on_a_ready_space() -> None:
    space = build_space(TWO_NODES, None, "cluster")
    assert len(packed(0, 15).place(space, inventory=TWO_NODES)) == 16
    with pytest.raises(PlacementRuleError, match="needs the inventory"):
        packed(0, 15).place(space)


# --- 6.2 flexible -------------------------------------------------------------------------


def test_flexible_orders_processes_by_first_resource_stably() -> None:
    lists = [[9, 8], [3], [0, 1], [3, 2]]
    placements = flexible(lists).place(TWO_NODES)
    assert layout(placements) == [(0, 0, (0, 1)), (1, 0, (2, 3)), (2, 0, (3,)), (3, 1, (0, 1))]


def test_flexible_is_stable_for_equal_first_resources() -> None:
    strategy = flexible([[5, 6], [5], [5, 7]])
    assert strategy.resource_lists == ((5, 6), (5,), (5, 7))


def test_flexible_never_mutates_the_callers_lists() -> None:
    lists = [[3, 1], [0]]
    flexible(lists).place(TWO_NODES)
    assert lists == [[3, 1], [0]]


def test_flexible_allows_colocation() -> None:
    placements = flexible([[0], [0], [0, 1]]).place(TWO_NODES)
    assert [p.hardware_ranks for p in placements] == [(0,), (0,), (0, 1)]
    assert [p.local_rank for p in placements] == [0, 1, 2]


def test_flexible_resources_must_lie_on_one_node() -> None:
    with pytest.raises(PlacementRuleError, match="would span nodes 0 and 1"):
        flexible([[7, 8]]).place(TWO_NODES)


def test_flexible_resources_must_exist() -> None:
    with pytest.raises(PlacementRuleError, match="resource rank 16 is out of range"):
        flexible([[16]]).place(TWO_NODES)


@pytest.mark.parametrize(
    ("lists", "fragment"),
    [
        ([], "at least one process"),
        ([[]], "non-empty list"),
        ([[1, 1]], "listed twice"),
        ([[-1]], "int >= 0"),
        ([[True]], "int >= 0"),
        ("0-3", "list of resource-rank lists"),
    ],
)
def test_flexible_rejects_bad_lists(lists: object, fragment: str) -> None:
    with pytest.raises(PlacementRuleError, match=fragment):
        flexible(lists)  # type: ignore[arg-type]


# --- 6.3 node ------------------------------------------------------------------------------


def test_node_strategy_allows_repeats_and_sorts() -> None:
    placements = node([1, 0, 1]).place(TWO_NODES)
    assert [(p.rank, p.node_rank, p.local_rank, p.local_world_size) for p in placements] == [
        (0, 0, 0, 1),
        (1, 1, 0, 2),
        (2, 1, 1, 2),
    ]
    assert [p.placement_node_rank for p in placements] == [0, 1, 1]


def test_node_strategy_sees_every_accelerator_of_the_node() -> None:
    (placement,) = node([0]).place(TWO_NODES)
    assert placement.hardware_ranks == ()
    assert placement.visible_accelerators == tuple(range(8))
    assert placement.local_accelerator_rank == 0
    assert isinstance(placement.local_accelerator_rank, int)
    assert placement.isolate_accelerator is False
    assert placement.node_group == "node"


def test_node_strategy_on_a_cpu_node() -> None:
    (placement,) = node(0).place(Inventory.uniform(1, 0))
    assert placement.local_accelerator_rank == -1
    assert placement.accelerator_type is None


@pytest.mark.parametrize("ranks", [[], [-1], ["0"], None])
def test_node_strategy_rejects_bad_ranks(ranks: object) -> None:
    with pytest.raises(PlacementRuleError):
        node(ranks)  # type: ignore[arg-type]


def test_node_strategy_rank_must_be_a_node_of_the_group() -> None:
    with pytest.raises(PlacementRuleError, match="node 2 is not in node group 'node'"):
        node([2]).place(TWO_NODES)


# --- strided rollout -------------------------------------------------------------------------


def test_strided_rollout_uses_stride_trainer_tp_over_rollout_tp() -> None:
    result = strided_rollout(4, 2, Inventory.uniform(1, 8))
    assert result.stride == 2
    assert [p.hardware_ranks for p in result.placements] == [(0, 2), (1, 3), (4, 6), (5, 7)]
    assert result.shared_with == ((0, 2), (1, 3), (4, 6), (5, 7))


def test_strided_rollout_reports_trainer_ranks_of_a_given_trainer() -> None:
    trainer = packed(0, 15, per_process=2).place(TWO_NODES)  # trainer rank r on GPUs 2r,2r+1
    result = strided_rollout(8, 2, TWO_NODES, trainer=trainer)
    assert [p.hardware_ranks for p in result.placements][:2] == [(0, 4), (1, 5)]
    assert result.shared_with[0] == (0, 2)
    assert result.shared_with[4] == (4, 6)


def test_strided_rollout_matches_devices_by_uuid() -> None:
    node0 = Node(0, "n0", accelerators=tuple(Accelerator(i, uuid=f"GPU-{i}") for i in range(4)))
    inventory = Inventory((node0,))
    result = strided_rollout(2, 1, inventory)
    assert result.shared_with == ((0,), (1,), (2,), (3,))


def test_strided_rollout_requires_divisible_tp() -> None:
    with pytest.raises(PlacementRuleError, match="trainer_tp 4 is not a multiple of rollout_tp 3"):
        strided_rollout(4, 3, TWO_NODES)


def test_strided_rollout_on_a_partial_range() -> None:
    result = strided_rollout(2, 2, TWO_NODES, start=8, end=15)
    assert [(p.node_rank, p.hardware_ranks) for p in result.placements] == [
        (1, (0, 1)), (1, (2, 3)), (1, (4, 5)), (1, (6, 7))
    ]  # fmt: skip
    assert result.shared_with == ((0, 1), (2, 3), (4, 5), (6, 7))
