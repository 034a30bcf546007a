"""The placement record and its fast builder.

See docs/concepts/placement-records.md.
"""

from __future__ import annotations

import dataclasses
import gc
import pickle

import pytest
from hypothesis import given
from hypothesis import strategies as st

from placement_core._inventory import Accelerator, Inventory, Node
from placement_core._records import Placement, Placements, build_placements, node_runs
from placement_core._rules import parse_rule, resolve_rule
from placement_core._spaces import build_space
from placement_core._strategies import packed


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


def _build(num_nodes: int, rule: str = "all") -> Placements:
    inventory = Inventory.uniform(num_nodes, 8)
    entries = resolve_rule(parse_rule(rule), build_space(inventory, None, "cluster"))
    return build_placements(entries, inventory)


def test_builder_leaves_the_garbage_collector_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    touched: list[str] = []
    for name in ("disable", "enable", "freeze", "unfreeze", "collect"):
        monkeypatch.setattr(gc, name, lambda *_, name=name: touched.append(name))
    assert len(list(_build(2))) == 16
    assert touched == []


def test_built_records_are_read_in_rank_order_and_by_index() -> None:
    placements = _build(3, "0-23:0-5")
    records = tuple(placements)
    assert [p.rank for p in records] == list(range(6))
    assert [placements[i] for i in range(-6, 6)] == [*records, *records]
    assert records[4] == Placement(
        4, 2, "node-2", 2, 0, 2, (0, 1, 2, 3), (0, 1, 2, 3), 0, "nvidia", "cluster", True
    )


def test_built_records_behave_as_a_tuple_of_them() -> None:
    placements = _build(2)
    records = tuple(placements)
    assert placements == records
    assert records == placements
    assert hash(placements) == hash(records)
    assert placements[2:5] == records[2:5]
    assert placements + () == records  # noqa: RUF005
    assert () + placements == records  # noqa: RUF005
    assert repr(placements) == repr(records)
    assert pickle.loads(pickle.dumps(placements)) == records
    assert placements.index(records[9]) == 9
    assert records[3] in placements
    with pytest.raises(IndexError):
        placements[16]


def test_annotations_reach_every_record_and_survive_pickling() -> None:
    placements = _build(1, "0-7:0-1")
    placements.annotate(["NV4", "NV8"], [0, 1], ["0-3", "4-7"])
    for copy in (placements, pickle.loads(pickle.dumps(placements))):
        assert [(p.link, p.numa_node, p.cpus) for p in copy] == [
            ("NV4", 0, "0-3"),
            ("NV8", 1, "4-7"),
        ]
        assert copy[1].cpus == "4-7"


def test_annotations_must_cover_every_record() -> None:
    with pytest.raises(ValueError, match="expected 2 values"):
        _build(1, "0-7:0-1").annotate(["NV4"], [0], ["0-3"])


def test_building_many_records_tracks_no_object_per_record() -> None:
    inventory = Inventory.uniform(2000, 8)
    entries = resolve_rule(parse_rule("all:0-7999"), build_space(inventory, None, "cluster"))
    gc.collect()
    before = len(gc.get_objects())
    placements = build_placements(entries, inventory)
    gc.collect()
    assert len(placements) == 8_000
    assert len(gc.get_objects()) - before < 3 * inventory.num_nodes  # per node, not record


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
    from placement_core._inventory import HardwareDevice

    arm = HardwareDevice("Franka", 0, {"robot_ip": "10.0.0.1"})
    inventory = Inventory((Node(0, "node-0", accelerators=(Accelerator(0),), hardware=(arm,)),))
    from placement_core._spaces import SpaceKind, SpaceRun

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


RULES = ["all", "0-23:0-5", "0-1:0-3,2-3", "0-15:0-31", "3-20", "0-15:0-3"]


@given(nodes=st.integers(3, 6), rule=st.sampled_from(RULES))
def test_node_runs_read_from_the_segments_match_the_records(nodes: int, rule: str) -> None:
    placements = _build(nodes, rule)
    from_segments = [n for node, count in placements.node_runs() for n in [node] * count]
    assert from_segments == [p.node_rank for p in placements]
    assert list(node_runs(tuple(placements))) == [
        (node, count) for node, count in _merged(placements.node_runs())
    ]


@given(nodes=st.integers(3, 6), rule=st.sampled_from(RULES))
def test_processes_by_node_read_from_the_segments_match_the_records(nodes: int, rule: str) -> None:
    placements = _build(nodes, rule)
    expected: dict[int, list[tuple[str | None, tuple[int, ...]]]] = {}
    for p in placements:
        expected.setdefault(p.node_rank, []).append((p.hardware_type, p.hardware_ranks))
    got = list(placements.processes_by_node())
    assert [node for node, _ in got] == list(expected)  # each node once, in rank order
    assert {node: list(processes) for node, processes in got} == expected


def _merged(runs: object) -> list[tuple[int, int]]:
    """Runs with consecutive ones on one node joined (as records grouped by node are)."""
    out: list[tuple[int, int]] = []
    for node, count in runs:  # type: ignore[attr-defined]
        if out and out[-1][0] == node:
            out[-1] = (node, out[-1][1] + count)
        else:
            out.append((node, count))
    return out


def test_moved_records_replace_their_stretch_and_keep_the_rest_compact() -> None:
    placements = _build(3, "0-23:0-5")
    moved = {
        r: dataclasses.replace(placements[r], node_rank=9, node_id="node-9", link="NV4")
        for r in range(6)
        if placements[r].node_rank == 1
    }
    result = placements.with_moved(moved)
    assert isinstance(result, Placements)
    assert list(result) == [moved.get(r, p) for r, p in enumerate(placements)]
    assert list(placements)[2].node_rank == 1  # the original is untouched


def test_moving_part_of_a_stretch_or_another_field_is_refused() -> None:
    placements = _build(2)
    first = placements[0]
    with pytest.raises(ValueError, match="must move together"):
        placements.with_moved({0: dataclasses.replace(first, node_rank=5, node_id="node-5")})
    stretch = {r: placements[r] for r in range(8)}
    stretch[3] = dataclasses.replace(stretch[3], local_rank=7)
    with pytest.raises(ValueError, match="may change only its node"):
        placements.with_moved(stretch)
