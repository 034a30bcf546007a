"""placement-native's errors reach the user as placement-ray's, the native one as cause.

One ``except placement_core.PlacementError`` catches everything the stack raises, although
placement-native's root ``NativeError`` does not derive from it.
"""

from __future__ import annotations

import pickle

import pytest

from placement_core import PlacementError
from placement_native import errors as native
from placement_ray._native import native_errors
from placement_ray.errors import ArgumentError, NativeCallError
from placement_ray.testing import SimulatedCluster

VALUE_ERRORS = [
    native.FakeTopologyError("unknown fake machine 'dgx-x'", field="name"),
    native.PortError("count: expected an int >= 1, got 0"),
    native.EnvVarError("PLACEMENT_PORT_RANGE", "a-b", "two ports, low-high"),
]
OTHER_ERRORS = [
    native.FakeNVMLBuildError("no C compiler found", compiler="cc"),
    native.NoFreePortsError("no 16 consecutive free ports in 20000-30000"),
    native.NVMLError(999, "nvmlInit_v2"),
    native.NVMLGpuLostError(15, "nvmlDeviceGetMemoryInfo_v2", "GPU 3"),
    native.BackendMismatchError("the compiled extension is 0.1.0, the package 0.2.1"),
]


@pytest.mark.parametrize("error", VALUE_ERRORS, ids=lambda e: type(e).__name__)
def test_a_native_value_error_becomes_an_argument_error_caused_by_it(
    error: native.NativeError,
) -> None:
    with pytest.raises(ArgumentError) as caught, native_errors("ports"):
        raise error
    assert caught.value.__cause__ is error
    assert str(caught.value).startswith(f"ports: placement-native raised {type(error).__name__}")


@pytest.mark.parametrize("error", OTHER_ERRORS, ids=lambda e: type(e).__name__)
def test_any_other_native_error_becomes_a_native_call_error_caused_by_it(
    error: native.NativeError,
) -> None:
    with pytest.raises(NativeCallError) as caught, native_errors("fake NVML"):
        raise error
    assert caught.value.__cause__ is error
    assert caught.value.native == type(error).__name__
    assert str(error) in str(caught.value)


@pytest.mark.parametrize("error", VALUE_ERRORS + OTHER_ERRORS, ids=lambda e: type(e).__name__)
def test_one_except_placement_error_catches_every_native_error(error: native.NativeError) -> None:
    with pytest.raises(PlacementError), native_errors("anything"):
        raise error


def test_the_placement_ray_error_pickles_for_the_trip_across_ray() -> None:
    with pytest.raises(NativeCallError) as caught, native_errors("fake NVML"):
        raise native.FakeNVMLBuildError("no C compiler found", compiler="cc")
    copy = pickle.loads(pickle.dumps(caught.value))
    assert (type(copy), str(copy), copy.native) == (
        NativeCallError,
        str(caught.value),
        "FakeNVMLBuildError",
    )


def test_errors_that_are_not_native_pass_through_unchanged() -> None:
    with pytest.raises(KeyError), native_errors("anything"):
        raise KeyError("x")


def test_an_unknown_fake_machine_in_the_testing_kit_is_a_placement_error() -> None:
    with pytest.raises(PlacementError) as caught:
        SimulatedCluster(nodes=1, topology="no-such-machine")
    assert isinstance(caught.value, ArgumentError)
    assert isinstance(caught.value.__cause__, native.FakeTopologyError)
    assert "no-such-machine" in str(caught.value)
