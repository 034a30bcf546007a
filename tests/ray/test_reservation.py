"""The job's reservation: a group per used node and per spare, or groups in a caller's
order (verl's pools, OpenRLHF's group), the GPU map, their removal.

On the suite's default shape (3 labelled nodes x 4 GPUs).
"""

from __future__ import annotations

import pytest
from ray.util.placement_group import placement_group_table

from placement_core import plan_from_assignments
from placement_ray._cluster import Cluster
from placement_ray._reservation import GroupAsk, Reservation
from placement_ray.errors import ArgumentError, PlacementGroupTimeoutError

from .conftest import GPUS_PER_NODE

WHOLE_NODE_1 = [(1, g) for g in range(GPUS_PER_NODE)]


def _state(group: object) -> str:
    return str(placement_group_table(group.pg)["state"])  # type: ignore[attr-defined]


def test_one_group_per_used_node_and_per_spare_pinned_to_it(
    placement_cluster: Cluster,
) -> None:
    reservation = Reservation.reserve(
        placement_cluster, {1: GPUS_PER_NODE}, [2], planned=WHOLE_NODE_1, timeout_s=120
    )
    try:
        assert sorted(reservation.groups) == [1]
        assert sorted(reservation.spares) == [2]
        assert {s.node_rank for s in reservation.groups[1].slots} == {1}
        assert [s.node_rank for s in reservation.spares[2].slots] == [2] * GPUS_PER_NODE
        assert reservation.gpu_map == {key: key[1] for key in WHOLE_NODE_1}  # a whole node
        assert reservation.all_groups == (reservation.groups[1], reservation.spares[2])
    finally:
        reservation.release()


def test_a_placement_is_seated_in_its_node_group_on_the_gpus_held_for_it(
    placement_cluster: Cluster,
) -> None:
    reservation = Reservation.reserve(
        placement_cluster, {1: GPUS_PER_NODE}, planned=WHOLE_NODE_1, timeout_s=120
    )
    try:
        placement = plan_from_assignments(
            {"actor": [(1, (2, 3))]}, placement_cluster.inventory
        ).components["actor"][0]
        seat = reservation.seat(placement)
        assert seat.node_rank == 1
        assert seat.gpu_ids == (2, 3)
        assert seat.bundle is not None
        assert seat.bundle[0].id == reservation.groups[1].pg.id
    finally:
        reservation.release()


def test_drop_removes_a_lost_nodes_groups_and_take_spares_hands_a_spare_over(
    placement_cluster: Cluster,
) -> None:
    reservation = Reservation.reserve(
        placement_cluster, {1: GPUS_PER_NODE}, [2], planned=WHOLE_NODE_1, timeout_s=120
    )
    try:
        lost = reservation.groups[1]
        reservation.drop([1])
        assert _state(lost) == "REMOVED"
        assert reservation.groups == {}
        assert reservation.gpu_map == {}
        spare = reservation.spares[2]
        reservation.take_spares([2])
        assert reservation.groups == {2: spare}
        assert reservation.spares == {}
        assert reservation.gpu_map == {(2, g): g for g in range(GPUS_PER_NODE)}
    finally:
        reservation.release()


def test_release_removes_every_group_once(placement_cluster: Cluster) -> None:
    reservation = Reservation.reserve(placement_cluster, {0: 1}, [2], timeout_s=120)
    held = reservation.all_groups
    reservation.release()
    reservation.release()
    assert reservation.removed
    assert [_state(g) for g in held] == ["REMOVED", "REMOVED"]


def test_a_spare_that_cannot_be_held_leaves_nothing_reserved(
    placement_cluster: Cluster,
) -> None:
    blocker = Reservation.reserve(placement_cluster, {2: 1}, timeout_s=120)
    try:
        with pytest.raises(PlacementGroupTimeoutError):
            Reservation.reserve(placement_cluster, {0: 1}, [2], timeout_s=3)
        table = placement_group_table()
        created = [g for g in table.values() if g["state"] == "CREATED"]
        assert [g["placement_group_id"] for g in created] == [blocker.groups[2].pg.id.hex()]
    finally:
        blocker.release()


def test_held_gpus_that_do_not_match_the_plan_leave_nothing_reserved(
    placement_cluster: Cluster,
) -> None:
    with pytest.raises(ArgumentError, match="held bundles do not match the planned GPUs"):
        Reservation.reserve(placement_cluster, {1: 2}, planned=WHOLE_NODE_1, timeout_s=120)
    table = placement_group_table()
    assert [g for g in table.values() if g["state"] == "CREATED"] == []


def _ask(node: int, count: int) -> GroupAsk:
    return GroupAsk(({"GPU": 1.0},) * count, (node,) * count)


def test_ordered_groups_keep_the_asked_order_and_are_released_together(
    placement_cluster: Cluster,
) -> None:
    reservation = Reservation.reserve_ordered(
        placement_cluster, [_ask(2, 2), _ask(1, 2)], timeout_s=120
    )
    held = reservation.all_groups
    try:
        assert [g.node_ranks for g in reservation.ordered] == [(2, 2), (1, 1)]
        assert held == tuple(reservation.ordered)
        assert reservation.groups == {}
        assert reservation.spares == {}
    finally:
        reservation.release()
    assert [_state(g) for g in held] == ["REMOVED", "REMOVED"]


def test_an_ordered_group_that_cannot_be_placed_leaves_nothing_reserved(
    placement_cluster: Cluster,
) -> None:
    blocker = Reservation.reserve(placement_cluster, {2: 1}, timeout_s=120)
    try:
        with pytest.raises(PlacementGroupTimeoutError):
            Reservation.reserve_ordered(
                placement_cluster, [_ask(1, 1), _ask(2, GPUS_PER_NODE)], timeout_s=3
            )
        table = placement_group_table()
        created = [g for g in table.values() if g["state"] == "CREATED"]
        assert [g["placement_group_id"] for g in created] == [blocker.groups[2].pg.id.hex()]
    finally:
        blocker.release()
