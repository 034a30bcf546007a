"""Every placement-ray error derives from the root and its builtin, and pickles."""

from __future__ import annotations

import pickle

import pytest

from placement_ray import errors

CASES = [
    errors.ArgumentError("num_nodes: expected an int >= 1, got 0"),
    errors.ClusterError("cannot connect"),
    errors.ForeignClusterError("not ours", expected="abc", found="def"),
    errors.NodesNotReadyError("2/4 nodes up", expected=4, alive=2, missing_ranks=[2, 3]),
    errors.NodeOrderError("ranks repeat"),
    errors.InfeasiblePlacementGroupError("never", problems=["bundle 0 fits on no node"]),
    errors.PlacementGroupTimeoutError(
        "late", unplaced=[(1, {"GPU": 1.0})], nodes={"n0": {"rank": 0, "total": {"GPU": 4}}}
    ),
    errors.ProbeError("probe failed"),
    errors.NodeLostError(
        "lost", dead_nodes=[(1, "n1")], affected=[{"role": "actor", "rank": 4, "node_rank": 1}]
    ),
]

BUILTIN = {
    errors.ArgumentError: ValueError,
    errors.ClusterError: RuntimeError,
    errors.ForeignClusterError: RuntimeError,
    errors.NodesNotReadyError: TimeoutError,
    errors.NodeOrderError: ValueError,
    errors.InfeasiblePlacementGroupError: ValueError,
    errors.PlacementGroupTimeoutError: TimeoutError,
    errors.ProbeError: RuntimeError,
    errors.NodeLostError: RuntimeError,
}


@pytest.mark.parametrize("error", CASES, ids=lambda e: type(e).__name__)
def test_error_pickles_with_message_and_attributes(error: errors.PlacementRayError) -> None:
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is type(error)
    assert str(copy) == str(error)
    assert copy.__dict__ == error.__dict__


@pytest.mark.parametrize("error", CASES, ids=lambda e: type(e).__name__)
def test_error_derives_from_root_and_builtin(error: errors.PlacementRayError) -> None:
    assert isinstance(error, errors.PlacementRayError)
    assert isinstance(error, BUILTIN[type(error)])


def test_every_public_error_is_covered() -> None:
    public = {getattr(errors, name) for name in errors.__all__} - {errors.PlacementRayError}
    assert public == {type(e) for e in CASES}
