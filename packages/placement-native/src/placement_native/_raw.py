"""What a backend reads from NVML, before it becomes a ``NodeSnapshot``.

Both backends (the compiled one and the nvidia-ml-py fallback) fill these records with
the same calls in the same order; ``_assemble`` turns them into the public dataclasses,
so the two backends cannot disagree on anything but what NVML told them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ._fields import absent_values, position
from ._model import Accelerator
from .errors import NVMLAnswerError, NVMLError

__all__ = [
    "MAX_GPUS",
    "MAX_MIG",
    "MAX_PROCESSES",
    "NVML_NOT_SUPPORTED",
    "NVML_VALUE_NOT_AVAILABLE",
    "OPTIONAL_ABSENT",
    "PROCESS_CAP",
    "PROCESS_FIRST",
    "PROCESS_SYMBOLS",
    "PROCESS_TRIES",
    "REQUIRED_SYMBOLS",
    "RawGpu",
    "RawMig",
    "RawNode",
    "check_limits",
]

NVML_NOT_SUPPORTED = 3
NVML_FUNCTION_NOT_FOUND = 13
NVML_GPU_IS_LOST = 15
# A query answered with one of these is an absent value, not a device error.
OPTIONAL_ABSENT = frozenset({NVML_NOT_SUPPORTED, NVML_FUNCTION_NOT_FOUND})
# Without these the library is unusable; every other symbol is optional.
REQUIRED_SYMBOLS = (
    "nvmlInit_v2",
    "nvmlShutdown",
    "nvmlDeviceGetCount_v2",
    "nvmlDeviceGetHandleByIndex_v2",
)
# The capacities of the C struct (PN_NVML_MAX_GPUS, PN_NVML_MAX_MIG): GPUs per node and MIG
# slots per GPU that are read. No node has more than 64 GPUs, and NVML's largest GPUs
# split into at most 7 MIG devices; an answer beyond these is a faulty driver's.
MAX_GPUS = 64
MAX_MIG = 8
# Compute processes (PN_NVML_MAX_PROCS, _PROC_FIRST, _PROC_CAP, _PROC_TRIES): listed per node,
# all devices together; room offered by a device's first query; the most read from one
# device; queries per device, the retries after NVML_ERROR_INSUFFICIENT_SIZE included.
MAX_PROCESSES = 4096
PROCESS_FIRST = 64
PROCESS_CAP = 4096
PROCESS_TRIES = 4
# The process list functions, newest first, and whether each fills nvmlProcessInfo_v2_t
# (pid, used memory, GPU and compute instance ids) or the v1 struct (pid, used memory).
PROCESS_SYMBOLS = (
    ("nvmlDeviceGetComputeRunningProcesses_v3", True),
    ("nvmlDeviceGetComputeRunningProcesses_v2", True),
    ("nvmlDeviceGetComputeRunningProcesses", False),
)
NVML_VALUE_NOT_AVAILABLE = 2**64 - 1  # an unsigned long long NVML could not measure
DEFAULT_LIBRARY = "libnvidia-ml.so.1"
LIBRARY_ENV = "PLACEMENT_NVML_LIBRARY"


@dataclass(slots=True)
class RawMig:
    slot: int
    uuid: str | None = None
    name: str | None = None
    memory_total: int | None = None
    gpu_instance_id: int | None = None
    compute_instance_id: int | None = None
    error: NVMLError | None = None
    memory_used: int | None = None
    processes: list[tuple[int, int | None]] | None = None  # (pid, used memory), listed ones
    process_total: int = 0  # NVML's count: above len(processes) when the node ran out of room


_INDEX = position("index")
_MIGS = position("mig_instances")
_PROCESSES = position("processes")


@dataclass(slots=True)
class RawGpu:
    """What a backend read of one GPU: one value per ``ACCELERATOR_FIELDS`` row, in the
    form the backend reads it (the row's ``convert`` makes the record's), and what the read
    left to check.

    Attributes:
        values: One per row, in table order (``RawGpu.absent`` starts from the rows'
            ``absent`` values); the error's place is ``error``'s when the record is made.
        error: Its first failure, or None: kept apart from ``values`` because the readers
            and the checks look at it after every query.
        mig_slots: What nvmlDeviceGetMaxMigDeviceCount answered (MIG mode only).
        process_total: NVML's process count: above the processes listed when the node ran
            out of room.
    """

    values: list[Any]
    error: NVMLError | None = None
    mig_slots: int = 0
    process_total: int = 0

    @classmethod
    def absent(cls, index: int, error: NVMLError | None = None) -> RawGpu:
        """GPU ``index`` with nothing read but its error."""
        values = absent_values()
        values[_INDEX] = index
        return cls(values, error)

    @property
    def index(self) -> int:
        """Its NVML index."""
        index: int = self.values[_INDEX]
        return index

    @property
    def migs(self) -> Sequence[RawMig]:
        """Its MIG devices (MIG mode only)."""
        migs: Sequence[RawMig] = self.values[_MIGS]
        return migs

    @property
    def processes(self) -> list[tuple[int, int | None]] | None:
        """(pid, used memory or None) of the compute processes listed; None when not read
        (and for a GPU in MIG mode, whose MIG devices are asked instead)."""
        listed: list[tuple[int, int | None]] | None = self.values[_PROCESSES]
        return listed


@dataclass(slots=True)
class RawNode:
    hostname: str = ""
    cpus: int = 1
    numa_nodes: int = 1
    route_ip: str | None = None  # IPv4 of the default-route interface, unless loopback
    error: NVMLError | None = None
    driver: str | None = None
    device_count: int = 0
    # A GPU with nothing left to check (no error, no MIG device, every process listed) may
    # come as its Accelerator already (the compiled backend makes those itself).
    gpus: list[RawGpu | Accelerator] = field(default_factory=list)
    # every GPU pair i < j, flat, five ints each (as the C struct has them): i, j,
    # nvmlGpuTopologyLevel_t (-1 unknown), NVLinks (direct, else the narrower side's into
    # a shared NVSwitch fabric, else 0), nvmlGpuP2PStatus_t (-1 unknown)
    pairs: list[int] = field(default_factory=list)


def _unlisted(record: RawGpu | RawMig, device: str) -> NVMLAnswerError | None:
    """The error for processes NVML reported but the full snapshot had no room for."""
    listed = record.processes
    if listed is None or record.process_total <= len(listed):
        return None
    return NVMLAnswerError(
        "nvmlDeviceGetComputeRunningProcesses",
        f"{device}: {record.process_total} compute processes, beyond the {MAX_PROCESSES} a "
        f"snapshot lists for the whole node; {len(listed)} are listed",
    )


def check_limits(raw: RawNode) -> None:
    """Report what the read left out: a device count or MIG slot count beyond the
    capacities (only the first ``MAX_GPUS`` / ``MAX_MIG`` were read), processes beyond the
    ``MAX_PROCESSES`` of a node. Each becomes the error of the node, GPU or MIG device,
    unless it has one."""
    if raw.error is None and raw.device_count > MAX_GPUS:
        raw.error = NVMLAnswerError(
            "nvmlDeviceGetCount_v2",
            f"{raw.device_count} devices, more than the {MAX_GPUS} a node can hold; "
            f"GPUs 0-{MAX_GPUS - 1} were read",
        )
    for gpu in raw.gpus:
        if not isinstance(gpu, RawGpu):
            continue
        if gpu.error is None and gpu.mig_slots > MAX_MIG:
            gpu.error = NVMLAnswerError(
                "nvmlDeviceGetMaxMigDeviceCount",
                f"GPU {gpu.index}: {gpu.mig_slots} MIG slots, more than the {MAX_MIG} a GPU "
                f"can have; slots 0-{MAX_MIG - 1} were read",
            )
        listed = gpu.processes
        if gpu.error is None and listed is not None and gpu.process_total > len(listed):
            gpu.error = _unlisted(gpu, f"GPU {gpu.index}")
        for mig in gpu.migs:
            if mig.error is None:
                mig.error = _unlisted(mig, f"GPU {gpu.index} MIG slot {mig.slot}")
