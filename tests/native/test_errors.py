"""Errors: the hierarchy, NVML codes to typed exceptions in one helper, pickling."""

from __future__ import annotations

import importlib
import pickle
import pkgutil

import pytest

import placement_native
from placement_native import errors
from placement_native.errors import (
    BackendMismatchError,
    EnvVarError,
    FakeNVMLBuildError,
    FakeTopologyError,
    NativeError,
    NoFreePortsError,
    NVMLAnswerError,
    NVMLError,
    PortError,
    nvml_error,
)

NVML_SUBCLASSES = [
    (1, errors.NVMLUninitializedError),
    (3, errors.NVMLNotSupportedError),
    (4, errors.NVMLNoPermissionError),
    (9, errors.NVMLDriverNotLoadedError),
    (12, errors.NVMLLibraryNotFoundError),
    (13, errors.NVMLFunctionNotFoundError),
    (15, errors.NVMLGpuLostError),
]


@pytest.mark.parametrize(("code", "cls"), NVML_SUBCLASSES)
def test_each_common_code_has_its_class(code: int, cls: type[NVMLError]) -> None:
    error = nvml_error(code, "nvmlDeviceGetUUID", "GPU 3")
    assert type(error) is cls
    assert (error.code, error.function, error.detail) == (code, "nvmlDeviceGetUUID", "GPU 3")


def test_other_codes_are_plain_nvml_errors() -> None:
    error = nvml_error(999, "nvmlInit")
    assert type(error) is NVMLError
    assert str(error) == "nvmlInit failed: NVML_ERROR_UNKNOWN [999]"


def test_message_names_function_code_and_detail() -> None:
    error = nvml_error(4, "nvmlDeviceGetHandleByIndex_v2", "GPU 1")
    assert str(error) == (
        "nvmlDeviceGetHandleByIndex_v2 failed: NVML_ERROR_NO_PERMISSION [4] (GPU 1)"
    )
    assert nvml_error(77, "f").code_name == "NVML_ERROR_77"


def test_hierarchy_matches_the_builtins() -> None:
    assert issubclass(NVMLError, NativeError)
    assert issubclass(NVMLError, RuntimeError)
    assert issubclass(BackendMismatchError, ImportError)
    assert issubclass(PortError, ValueError)
    assert issubclass(NoFreePortsError, OSError)
    for _, cls in NVML_SUBCLASSES:
        assert issubclass(cls, NVMLError)


@pytest.mark.parametrize(
    "error",
    [
        nvml_error(4, "nvmlDeviceGetUUID", "GPU 2"),
        nvml_error(15, "nvmlDeviceGetMemoryInfo"),
        nvml_error(999, "nvmlInit"),
        BackendMismatchError("built for 0.0.1"),
        PortError("count must be >= 1, got 0"),
        NoFreePortsError("no 16 consecutive free ports in 20000-20100"),
        FakeNVMLBuildError("no C compiler found", compiler="gcc"),
        FakeTopologyError("gpus[0].memory: expected int, got 'x'", field="gpus[0].memory"),
    ],
    ids=lambda e: type(e).__name__,
)
def test_every_error_pickles(error: NativeError) -> None:
    clone = pickle.loads(pickle.dumps(error))
    assert type(clone) is type(error)
    assert str(clone) == str(error)
    assert clone.__dict__ == error.__dict__


def _native_error_classes() -> list[type[NativeError]]:
    found: set[type[NativeError]] = set()
    for info in pkgutil.iter_modules(placement_native.__path__, "placement_native."):
        if info.name.endswith(("__main__", "._native")):
            continue
        module = importlib.import_module(info.name)
        for value in vars(module).values():
            if isinstance(value, type) and issubclass(value, NativeError):
                found.add(value)
    return sorted(found, key=lambda cls: cls.__name__)


def _sample(cls: type[NativeError]) -> NativeError:
    if cls is NVMLAnswerError:
        return NVMLAnswerError("nvmlDeviceGetCount_v2", "4294967295 devices")
    if cls is EnvVarError:
        return EnvVarError("PLACEMENT_NODE_RANK", "x" * 100, "an integer")
    if issubclass(cls, NVMLError):
        return cls(cls.code_value or 999, "nvmlDeviceGetUUID", "GPU 1")
    return cls("something went wrong")


@pytest.mark.parametrize("cls", _native_error_classes(), ids=lambda cls: cls.__name__)
def test_every_error_class_of_the_package_pickles(cls: type[NativeError]) -> None:
    error = _sample(cls)
    clone = pickle.loads(pickle.dumps(error))
    assert type(clone) is cls
    assert str(clone) == str(error)
    assert clone.args == error.args
