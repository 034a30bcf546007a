"""Exceptions raised by placement-native.

Hierarchy::

    NativeError                         root; never raised directly
    ├── NVMLError (RuntimeError)        an NVML call failed; ``.code`` and ``.function``
    │   ├── NVMLLibraryNotFoundError    libnvidia-ml could not be loaded
    │   ├── NVMLFunctionNotFoundError   a required NVML symbol is missing from the library
    │   ├── NVMLUninitializedError      NVML_ERROR_UNINITIALIZED
    │   ├── NVMLNotSupportedError       NVML_ERROR_NOT_SUPPORTED
    │   ├── NVMLNoPermissionError       NVML_ERROR_NO_PERMISSION
    │   ├── NVMLDriverNotLoadedError    NVML_ERROR_DRIVER_NOT_LOADED
    │   ├── NVMLGpuLostError            NVML_ERROR_GPU_IS_LOST
    │   └── NVMLAnswerError             NVML answered a count beyond what a node can have
    ├── BackendMismatchError (ImportError)
    │                                   the compiled extension belongs to another version
    ├── EnvVarError (ValueError)        a PLACEMENT_* environment variable is unusable
    ├── PortError (ValueError)          bad arguments to the port functions
    ├── NoFreePortsError (OSError)      nothing free in the searched range
    ├── FakeNVMLBuildError (RuntimeError)
    │                                   the testing kit's fake NVML could not be compiled
    └── FakeTopologyError (ValueError)  an unknown or malformed fake-NVML topology

``NativeError`` does not derive from ``placement_core.PlacementError``: this package
imports neither core nor ray. placement-ray, which promises that one ``except
PlacementError`` catches everything the stack raises, re-raises every native error from
its own calls into this package as one of its errors (``ArgumentError`` for a
``ValueError`` here, ``NativeCallError`` otherwise) with the native error as
``__cause__``. Code that calls placement-native directly catches ``NativeError``.

Every exception pickles (they cross Ray process boundaries): constructor arguments are
kept and replayed by ``__reduce__``.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing is not imported at run time: import time matters here
if TYPE_CHECKING:
    from typing import Any, ClassVar

__all__ = [
    "BackendMismatchError",
    "EnvVarError",
    "FakeNVMLBuildError",
    "FakeTopologyError",
    "NVMLAnswerError",
    "NVMLDriverNotLoadedError",
    "NVMLError",
    "NVMLFunctionNotFoundError",
    "NVMLGpuLostError",
    "NVMLLibraryNotFoundError",
    "NVMLNoPermissionError",
    "NVMLNotSupportedError",
    "NVMLUninitializedError",
    "NativeError",
    "NoFreePortsError",
    "PortError",
    "nvml_error",
    "shorten",
]


class NativeError(Exception):
    """Root of every placement-native error. Catch this to catch them all."""

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild, (type(self), self.args, dict(self.__dict__)))


def _rebuild(cls: type[NativeError], args: tuple[Any, ...], state: dict[str, Any]) -> NativeError:
    error = cls.__new__(cls)
    Exception.__init__(error, *args)
    error.__dict__.update(state)
    return error


# NVML return codes (nvmlReturn_t in nvml.h) and their names.
NVML_CODE_NAMES: dict[int, str] = {
    0: "NVML_SUCCESS",
    1: "NVML_ERROR_UNINITIALIZED",
    2: "NVML_ERROR_INVALID_ARGUMENT",
    3: "NVML_ERROR_NOT_SUPPORTED",
    4: "NVML_ERROR_NO_PERMISSION",
    5: "NVML_ERROR_ALREADY_INITIALIZED",
    6: "NVML_ERROR_NOT_FOUND",
    7: "NVML_ERROR_INSUFFICIENT_SIZE",
    8: "NVML_ERROR_INSUFFICIENT_POWER",
    9: "NVML_ERROR_DRIVER_NOT_LOADED",
    10: "NVML_ERROR_TIMEOUT",
    11: "NVML_ERROR_IRQ_ISSUE",
    12: "NVML_ERROR_LIBRARY_NOT_FOUND",
    13: "NVML_ERROR_FUNCTION_NOT_FOUND",
    14: "NVML_ERROR_CORRUPTED_INFOROM",
    15: "NVML_ERROR_GPU_IS_LOST",
    16: "NVML_ERROR_RESET_REQUIRED",
    17: "NVML_ERROR_OPERATING_SYSTEM",
    18: "NVML_ERROR_LIB_RM_VERSION_MISMATCH",
    19: "NVML_ERROR_IN_USE",
    20: "NVML_ERROR_MEMORY",
    21: "NVML_ERROR_NO_DATA",
    22: "NVML_ERROR_VGPU_ECC_NOT_ENABLED",
    23: "NVML_ERROR_INSUFFICIENT_RESOURCES",
    24: "NVML_ERROR_FREQ_NOT_SUPPORTED",
    25: "NVML_ERROR_ARGUMENT_VERSION_MISMATCH",
    26: "NVML_ERROR_DEPRECATED",
    27: "NVML_ERROR_NOT_READY",
    28: "NVML_ERROR_GPU_NOT_FOUND",
    29: "NVML_ERROR_INVALID_STATE",
    999: "NVML_ERROR_UNKNOWN",
}


NVML_ERROR_UNKNOWN = 999


class NVMLError(NativeError, RuntimeError):
    """An NVML call failed.

    Attributes:
        code: The ``nvmlReturn_t`` value (e.g. 4 for ``NVML_ERROR_NO_PERMISSION``).
        function: The NVML function that returned it (e.g. ``nvmlDeviceGetUUID``).
        detail: Extra context (the device index, the library path), or an empty string.
    """

    code_value: ClassVar[int | None] = None

    def __init__(self, code: int, function: str, detail: str = "") -> None:
        self.code = code
        self.function = function
        self.detail = detail
        super().__init__(code, function, detail)

    @property
    def code_name(self) -> str:
        """The symbolic name of ``code`` (``NVML_ERROR_NO_PERMISSION``)."""
        return NVML_CODE_NAMES.get(self.code, f"NVML_ERROR_{self.code}")

    def __str__(self) -> str:
        extra = f" ({self.detail})" if self.detail else ""
        return f"{self.function} failed: {self.code_name} [{self.code}]{extra}"


class NVMLUninitializedError(NVMLError):
    """NVML was used before ``nvmlInit`` succeeded."""

    code_value = 1


class NVMLNotSupportedError(NVMLError):
    """The device or driver does not support the query."""

    code_value = 3


class NVMLNoPermissionError(NVMLError):
    """The caller may not query this device."""

    code_value = 4


class NVMLDriverNotLoadedError(NVMLError):
    """The NVIDIA kernel driver is not loaded."""

    code_value = 9


class NVMLLibraryNotFoundError(NVMLError):
    """libnvidia-ml could not be loaded (no driver installed, or a bad override path)."""

    code_value = 12


class NVMLFunctionNotFoundError(NVMLError):
    """A required NVML symbol is missing from the loaded library (a very old driver)."""

    code_value = 13


class NVMLGpuLostError(NVMLError):
    """The GPU fell off the bus or is otherwise inaccessible."""

    code_value = 15


class NVMLAnswerError(NVMLError):
    """A call succeeded but answered more than a node can hold (a faulty or hostile driver):
    the snapshot keeps what fits and reports this error.

    ``code`` is ``NVML_ERROR_UNKNOWN`` (999); ``detail`` says what was answered and what
    was read instead.
    """

    def __init__(self, function: str, detail: str) -> None:
        super().__init__(NVML_ERROR_UNKNOWN, function, detail)

    def __str__(self) -> str:
        return f"{self.function} answered out of bounds: {self.detail}"


_BY_CODE: dict[int, type[NVMLError]] = {
    cls.code_value: cls
    for cls in (
        NVMLUninitializedError,
        NVMLNotSupportedError,
        NVMLNoPermissionError,
        NVMLDriverNotLoadedError,
        NVMLLibraryNotFoundError,
        NVMLFunctionNotFoundError,
        NVMLGpuLostError,
    )
    if cls.code_value is not None
}


def nvml_error(code: int, function: str, detail: str = "") -> NVMLError:
    """The typed exception for an NVML return code: the one place codes become exceptions.

    Args:
        code: The ``nvmlReturn_t`` value (non-zero).
        function: The NVML function (or ``dlopen``) that failed.
        detail: Extra context for the message.

    Returns:
        An instance of the most specific ``NVMLError`` subclass for ``code``.
    """
    return _BY_CODE.get(code, NVMLError)(code, function, detail)


class BackendMismatchError(NativeError, ImportError):
    """The compiled extension was built for another version of the package."""


def shorten(value: str, limit: int = 60) -> str:
    """``value`` cut to ``limit`` characters with how much was left out, for messages."""
    if len(value) <= limit:
        return value
    return f"{value[:limit]}... ({len(value)} characters)"


class EnvVarError(NativeError, ValueError):
    """An environment variable placement-native reads holds a value it cannot use.

    Attributes:
        name: The variable (``PLACEMENT_NODE_RANK``).
        value: Its value, shortened (undecodable bytes are lone surrogates, which the
            message shows escaped).
        expected: What the variable must hold.
    """

    def __init__(self, name: str, value: str, expected: str) -> None:
        self.name = name
        self.value = shorten(value)
        self.expected = expected
        super().__init__(name, value, expected)

    def __str__(self) -> str:
        return f"{self.name}={self.value!r} is not usable: expected {self.expected}"


class PortError(NativeError, ValueError):
    """Bad arguments to ``reserve_ports`` / ``find_free_ports`` (count, range, host)."""


class NoFreePortsError(NativeError, OSError):
    """No free port (or run of consecutive ports) exists in the searched range."""


class FakeNVMLBuildError(NativeError, RuntimeError):
    """The testing kit's fake ``libnvidia-ml`` could not be compiled.

    Attributes:
        compiler: The compiler command tried, or an empty string when none was found.
    """

    def __init__(self, message: str, *, compiler: str = "") -> None:
        self.compiler = compiler
        super().__init__(message)


class FakeTopologyError(NativeError, ValueError):
    """A fake-NVML topology name is unknown, or a topology (file) is malformed.

    Attributes:
        field: The offending field (``gpus[2].nvlinks[0].remote``), or an empty string.
    """

    def __init__(self, message: str, *, field: str = "") -> None:
        self.field = field
        super().__init__(message)
