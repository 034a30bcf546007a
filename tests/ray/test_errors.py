"""Every placement-ray error lives in ``errors``, derives from the root and a builtin, and pickles.

The classes are discovered from the module, so a new one without a case here fails
``test_every_error_class_has_a_case``.
"""

from __future__ import annotations

import importlib
import inspect
import pickle
import pkgutil

import pytest

from placement_ray import errors

ROOT = errors.PlacementRayError

CASES: list[tuple[errors.PlacementRayError, type[Exception]]] = [
    (errors.ArgumentError("num_nodes: expected an int >= 1, got 0"), ValueError),
    (errors.InterpreterError("bad", problems=[(1, "/x", "does not exist")]), ValueError),
    (
        errors.OversubscribedGPUError("too much", gpus=[("node 0 GPU 0", 1.2, [("a", 0.6)])]),
        ValueError,
    ),
    (errors.BusyAcceleratorError("busy", busy=[(0, 3, [4242])]), RuntimeError),
    (errors.CpuBindingError("cpu 99 is not ours"), OSError),
    (errors.ClusterError("cannot connect"), RuntimeError),
    (errors.ForeignClusterError("not ours", expected="abc", found="def"), RuntimeError),
    (
        errors.NodesNotReadyError("2/4 nodes up", expected=4, alive=2, missing_ranks=[2, 3]),
        TimeoutError,
    ),
    (errors.NodeOrderError("ranks repeat"), ValueError),
    (
        errors.InfeasiblePlacementGroupError("never", problems=["bundle 0 fits on no node"]),
        ValueError,
    ),
    (
        errors.EngineAlignmentError(
            "engines straddle", problems=["engines of 3 GPUs straddle nodes"], fitting_sizes=[1]
        ),
        ValueError,
    ),
    (
        errors.AcceleratorMismatchError("wrong vendor", mismatches=[(1, "nvidia", "ascend")]),
        ValueError,
    ),
    (
        errors.PlacementGroupTimeoutError(
            "late", unplaced=[(1, {"GPU": 1.0})], nodes={"n0": {"rank": 0, "total": {"GPU": 4}}}
        ),
        TimeoutError,
    ),
    (errors.ProbeError("probe failed"), RuntimeError),
    (errors.NativeCallError("fake NVML: no compiler", native="FakeNVMLBuildError"), RuntimeError),
    (
        errors.NodeLostError(
            "lost", dead_nodes=[(1, "n1")], affected=[{"role": "actor", "rank": 4, "node_rank": 1}]
        ),
        RuntimeError,
    ),
    (
        errors.NoSpareNodeError(
            "cannot recover", lost=[2], needs={2: "a spare with 8x nvidia; node groups a800"}
        ),
        RuntimeError,
    ),
    (
        errors.LaunchNotFoundError(
            "no launch", name="job", namespace="placement-a", elsewhere=["placement-b"]
        ),
        LookupError,
    ),
    (errors.WorkerStartError("died", workers=[("w on node 0", "why")]), RuntimeError),
    (errors.WorkerStartTimeoutError("late", workers=[("w on node 0", "why")]), TimeoutError),
    (
        errors.WorkerCallError("failed", method="train", failed=[(2, "actor rank 2", "boom")]),
        RuntimeError,
    ),
    (errors.WorkerTimeoutError("slow", method="train", pending=[0, 3]), TimeoutError),
    (errors.PortNotHeldError("no block 'nccl'"), LookupError),
    (errors.UnknownRoleError("role: unknown role 'critic'"), KeyError),
    (errors.LeaseError("node 9: not a node of the cluster"), ValueError),
    (errors.JobNameTakenError("taken", job="grpo", owner="01000000"), ValueError),
    (errors.LedgerVersionError("newer ledger", found=3, expected=1), RuntimeError),
    (
        errors.QueueTimeoutError(
            "waited", job="grpo", need=[8, 8], holders=["job-a: node 0 GPUs 0-7 since 10:00"]
        ),
        TimeoutError,
    ),
]


def _error_classes() -> set[type[errors.PlacementRayError]]:
    return {
        cls
        for _, cls in inspect.getmembers(errors, inspect.isclass)
        if issubclass(cls, ROOT) and cls is not ROOT
    }


def _ids(case: object) -> str:
    return type(case).__name__ if isinstance(case, Exception) else ""


def test_every_error_class_has_a_case() -> None:
    assert {type(error) for error, _ in CASES} == _error_classes()


def test_every_error_class_is_exported() -> None:
    warnings = {"PlacementRayWarning"}  # the one warning, defined beside the errors
    assert (
        set(errors.__all__)
        == {cls.__name__ for cls in _error_classes()} | {ROOT.__name__} | warnings
    )
    assert issubclass(errors.PlacementRayWarning, UserWarning)


def test_the_drawn_hierarchy_names_every_class() -> None:
    drawn = errors.__doc__ or ""
    assert [cls.__name__ for cls in _error_classes() if cls.__name__ not in drawn] == []


#: The frameworks whose drop-ins (placement_ray.compat) import them; tests/compat runs them.
FRAMEWORKS = {"verl", "openrlhf"}


def test_no_error_class_is_defined_outside_errors() -> None:
    import placement_ray

    for info in pkgutil.walk_packages(placement_ray.__path__, "placement_ray."):
        if info.name.endswith("__main__"):
            continue  # running it is the demo
        try:
            module = importlib.import_module(info.name)
        except ModuleNotFoundError as missing:  # a drop-in for a framework not installed here
            if (missing.name or "").split(".")[0] not in FRAMEWORKS:
                raise
            continue
        defined = [
            cls
            for _, cls in inspect.getmembers(module, inspect.isclass)
            if issubclass(cls, BaseException) and cls.__module__ == module.__name__
        ]
        assert defined == [] or module is errors, info.name


@pytest.mark.parametrize(("error", "builtin"), CASES, ids=_ids)
def test_error_pickles_with_message_and_attributes(
    error: errors.PlacementRayError, builtin: type[Exception]
) -> None:
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is type(error)
    assert str(copy) == str(error)
    assert copy.__dict__ == error.__dict__


@pytest.mark.parametrize(("error", "builtin"), CASES, ids=_ids)
def test_error_derives_from_root_and_builtin(
    error: errors.PlacementRayError, builtin: type[Exception]
) -> None:
    assert isinstance(error, ROOT)
    assert isinstance(error, builtin)


def test_root_derives_only_from_the_core_root() -> None:
    from placement_core import PlacementError

    assert ROOT.__bases__ == (PlacementError,)
