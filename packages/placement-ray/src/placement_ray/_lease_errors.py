"""Errors of the lease ledger (several jobs on one Ray cluster).

They live apart from ``errors.py`` so the ledger stays one feature in its own modules;
``placement_ray`` exports them with the others. Each pickles like every placement-ray error
(it crosses from the ledger actor to the driver).
"""

from __future__ import annotations

from collections.abc import Sequence

from .errors import ArgumentError, PlacementRayError

__all__ = [
    "JobNameTakenError",
    "LeaseError",
    "LedgerVersionError",
    "QueueTimeoutError",
]


class LeaseError(ArgumentError):
    """A lease names a node or accelerator the ledger does not know, a bad share, a bad
    priority, or a job that holds no lease; the ledger is left as it was."""


class JobNameTakenError(LeaseError):
    """Another live job (another owner) already holds or waits for a lease of this name.

    Attributes:
        job: The name asked for.
        owner: The owner (Ray job id) that holds it.
    """

    def __init__(self, message: str, *, job: str = "", owner: str = "") -> None:
        self.job = job
        self.owner = owner
        super().__init__(message)


class LedgerVersionError(PlacementRayError, RuntimeError):
    """The cluster's lease ledger (or its stored state) speaks another version than this
    placement-ray; nothing was changed.

    Attributes:
        found: The ledger's (or stored state's) version.
        expected: This placement-ray's ledger version.
    """

    def __init__(self, message: str, *, found: int = 0, expected: int = 0) -> None:
        self.found = found
        self.expected = expected
        super().__init__(message)


class QueueTimeoutError(PlacementRayError, TimeoutError):
    """A job waited ``queue_timeout_s`` in the lease queue without its accelerators coming
    free; it left the queue.

    Attributes:
        job: The waiting job.
        need: Accelerators it needs per node (its plan on the whole cluster).
        holders: One line per lease in the way: job, nodes, accelerators, since when.
    """

    def __init__(
        self, message: str, *, job: str = "", need: Sequence[int] = (), holders: Sequence[str] = ()
    ) -> None:
        self.job = job
        self.need = tuple(need)
        self.holders = tuple(holders)
        super().__init__(message)
