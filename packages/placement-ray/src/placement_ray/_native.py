"""placement-native's errors, raised again as placement-ray's.

placement-native imports neither core nor ray, so its root ``NativeError`` is not a
``placement_core.PlacementError``. Every call placement-ray makes into placement-native
(the testing kit's fake NVML in the driver, port reservations inside workers) runs under
:func:`native_errors`: a native error leaves as a placement-ray error with the native one
as its ``__cause__``, so one ``except placement_core.PlacementError`` catches everything
the stack raises. A native error that is a ``ValueError`` (a bad argument: an unknown fake
machine, bad port arguments, an unusable ``PLACEMENT_*`` variable) becomes an
``ArgumentError``; any other a ``NativeCallError``.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from placement_native.errors import NativeError

from .errors import ArgumentError, NativeCallError, PlacementRayError

__all__ = ["as_ray_error", "native_errors"]


def as_ray_error(error: NativeError, what: str) -> PlacementRayError:
    """The placement-ray error for a native ``error`` raised while doing ``what``."""
    native = type(error).__name__
    message = f"{what}: placement-native raised {native}: {error}"
    if isinstance(error, ValueError):
        return ArgumentError(message)
    return NativeCallError(message, native=native)


@contextmanager
def native_errors(what: str) -> Iterator[None]:
    """Re-raise placement-native's errors inside the block as placement-ray's.

    Args:
        what: What the block does, for the message (``"topology"``, ``"port block
            'nccl'"``).

    Raises:
        ArgumentError: a native ``ValueError`` (its ``__cause__``).
        NativeCallError: any other native error (its ``__cause__``).
    """
    try:
        yield
    except NativeError as error:
        raise as_ray_error(error, what) from error
