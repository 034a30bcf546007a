"""The placement record and its fast builder.

See docs/concepts/placement-records.md.
"""

from __future__ import annotations

import dataclasses
import gc
import pickle

import pytest

from placement_core.inventory import Accelerator, Inventory, Node
from placement_core.records import Placement, build_placements
from placement_core.rules import parse_rule, resolve_rule
from placement_core.spaces import build_space
from placement_core.strategies import packed


def sample() -> Placement:
    return Placement(
        rank=3,
        node_rank=1,
        node_id="node-1",
        placement_node_rank=0,
        local_rank=2,
        local_world_size=4,
        hardware_ranks=(2, 3),
        visible_accelerators=(2, 3),
        local_accelerator_rank=2,
        accelerator_type="nvidia",
        node_group="a800",
        isolate_accelerator=True,
    )


def test_placement_is_a_frozen_slotted_dataclass() -> None:
    p = sample()
    assert dataclasses.is_dataclass(p)
    assert not hasattr(p, "__dict__")
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.rank = 4  # type: ignore[misc]


def test_placement_fields_are_the_spec_fields_in_order() -> None:
    assert [f.name for f in dataclasses.fields(Placement)] == [
        "rank", "node_rank", "node_id", "placement_node_rank", "local_rank",
        "local_world_size", "hardware_ranks", "visible_accelerators",
        "local_accelerator_rank", "accelerator_type", "node_group", "isolate_accelerator",
        "hardware_type", "link", "numa_node", "cpus",
    ]  # fmt: skip
    assert sample().hardware_type is None


def test_placement_pickles_and_hashes() -> None:
    p = sample()
    assert pickle.loads(pickle.dumps(p)) == p
    assert hash(p) == hash(dataclasses.replace(p))


def test_built_placements_are_real_placements_equal_to_constructed_ones() -> None:
    (built,) = packed(2, 3, per_process=2).place(Inventory.uniform(1, 8))
    assert type(built) is Placement
    assert built == Placement(0, 0, "node-0", 0, 0, 1, (2, 3), (2, 3), 2, "nvidia", "cluster", True)
    with pytest.raises(dataclasses.FrozenInstanceError):
        built.rank = 1  # type: ignore[misc]
    assert pickle.loads(pickle.dumps(built)) == built
    assert dataclasses.asdict(built)["hardware_ranks"] == (2, 3)


def _build(num_nodes: int, *, pause_gc: bool) -> tuple[Placement, ...]:
    inventory = Inventory.uniform(num_nodes, 8)
    entries = resolve_rule(parse_rule("all"), build_space(inventory, None, "cluster"))
    return build_placements(entries, inventory, pause_gc=pause_gc)


def test_builder_leaves_the_garbage_collector_alone_by_default(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    touched: list[str] = []
    for name in ("disable", "enable", "freeze", "unfreeze"):
        monkeypatch.setattr(gc, name, lambda name=name: touched.append(name))
    _build(2, pause_gc=False)
    assert touched == []


def test_paused_builder_restores_the_garbage_collector() -> None:
    assert gc.isenabled()
    _build(1, pause_gc=True)
    assert gc.isenabled()


def test_paused_builder_leaves_a_disabled_collector_disabled() -> None:
    gc.disable()
    try:
        _build(1, pause_gc=True)
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_paused_builder_moves_new_records_past_the_young_generations() -> None:
    assert len(_build(100, pause_gc=True)) == 800
    assert gc.isenabled()
    assert gc.get_count()[0] < 700  # no young collection is owed for the new records
    assert gc.get_freeze_count() == 0


def test_paused_builder_leaves_a_process_frozen_generation_alone() -> None:
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        _build(1, pause_gc=True)
        assert gc.get_freeze_count() == frozen
    finally:
        gc.unfreeze()


def test_device_index_is_zero_when_isolating() -> None:
    assert sample().device_index == 0


def test_device_index_is_the_position_among_visible_accelerators() -> None:
    p = dataclasses.replace(sample(), visible_accelerators=(0, 1, 2, 3), isolate_accelerator=False)
    assert p.device_index == 2
    sparse = dataclasses.replace(p, visible_accelerators=(1, 2, 5))
    assert sparse.device_index == 1


def test_device_index_is_minus_one_without_accelerators() -> None:
    p = dataclasses.replace(
        sample(), hardware_ranks=(), visible_accelerators=(), local_accelerator_rank=-1
    )
    assert p.device_index == -1


def test_hardware_placements_name_their_hardware_type() -> None:
    from placement_core.inventory import HardwareDevice

    arm = HardwareDevice("Franka", 0, {"robot_ip": "10.0.0.1"})
    inventory = Inventory((Node(0, "node-0", accelerators=(Accelerator(0),), hardware=(arm,)),))
    from placement_core.spaces import SpaceKind, SpaceRun

    run = SpaceRun(0, 0, (0,), "franka", SpaceKind.HARDWARE, "Franka")
    (p,) = build_placements([(1, run, (0,))], inventory)
    assert p.hardware_type == "Franka"
    assert p.hardware_ranks == (0,)
    assert p.visible_accelerators == (0,)
    assert p.isolate_accelerator is False
    assert p.local_accelerator_rank == 0
    assert p.accelerator_type == "nvidia"


def test_local_ranks_follow_rank_order_across_segments() -> None:
    inventory = Inventory.uniform(2, 4)
    space = build_space(inventory, None, "cluster")
    entries = resolve_rule(parse_rule("0-1,4-5,2-3:4-5"[:7]), space)
    placements = build_placements(entries, inventory)
    assert [(p.node_rank, p.local_rank, p.local_world_size) for p in placements] == [
        (0, 0, 2), (0, 1, 2), (1, 0, 2), (1, 1, 2)
    ]  # fmt: skip


def test_placement_node_rank_counts_distinct_nodes_in_rank_order() -> None:
    inventory = Inventory.uniform(4, 2)
    space = build_space(inventory, None, "cluster")
    placements = build_placements(resolve_rule(parse_rule("2-3,6-7"), space), inventory)
    assert [(p.node_rank, p.placement_node_rank) for p in placements] == [
        (1, 0), (1, 0), (3, 1), (3, 1)
    ]  # fmt: skip


def test_shared_and_one_per_process_segments_on_one_node() -> None:
    inventory = Inventory.uniform(1, 4)
    space = build_space(inventory, None, "cluster")
    placements = build_placements(resolve_rule(parse_rule("0-1:0-3,2-3"), space), inventory)
    assert [(p.rank, p.hardware_ranks, p.local_rank) for p in placements] == [
        (0, (0,), 0), (1, (0,), 1), (2, (1,), 2), (3, (1,), 3), (4, (2,), 4), (5, (3,), 5)
    ]  # fmt: skip
    assert {p.local_world_size for p in placements} == {6}
