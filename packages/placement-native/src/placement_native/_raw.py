"""What a backend reads from NVML, before it becomes a ``NodeSnapshot``.

Both backends (the compiled one and the nvidia-ml-py fallback) fill these records with
the same calls in the same order; ``_assemble`` turns them into the public dataclasses,
so the two backends cannot disagree on anything but what NVML told them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .errors import NVMLAnswerError, NVMLError

__all__ = [
    "MAX_GPUS",
    "MAX_MIG",
    "NVML_NOT_SUPPORTED",
    "OPTIONAL_ABSENT",
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


@dataclass(slots=True)
class RawGpu:
    index: int
    error: NVMLError | None = None
    name: str | None = None
    uuid: str | None = None
    pci_bus_id: str | None = None
    memory_total: int | None = None
    numa_node: int | None = None
    cpu_mask: int | None = None  # NVML's cpu set as one integer: bit k = CPU k
    compute_capability: tuple[int, int] | None = None
    mig_mode: bool = False
    mig_slots: int = 0  # what nvmlDeviceGetMaxMigDeviceCount answered
    migs: list[RawMig] = field(default_factory=list)
    # active NVLinks: peer GPU index -> direct links, and links into an NVSwitch fabric
    nvlink_peers: dict[int, int] = field(default_factory=dict)
    nvswitch_links: int = 0


@dataclass(slots=True)
class RawNode:
    hostname: str = ""
    cpus: int = 1
    numa_nodes: int = 1
    route_ip: str | None = None  # IPv4 of the default-route interface, unless loopback
    error: NVMLError | None = None
    shutdown_error: NVMLError | None = None  # nvmlShutdown failed after the read
    driver: str | None = None
    device_count: int = 0
    gpus: list[RawGpu] = field(default_factory=list)
    # every GPU pair i < j, flat, five ints each (as the C struct has them): i, j,
    # nvmlGpuTopologyLevel_t (-1 unknown), NVLinks (direct, else the narrower side's into
    # a shared NVSwitch fabric, else 0), nvmlGpuP2PStatus_t (-1 unknown)
    pairs: list[int] = field(default_factory=list)


def check_limits(raw: RawNode) -> None:
    """Report what the read left out: a device count or MIG slot count beyond the
    capacities (only the first ``MAX_GPUS`` / ``MAX_MIG`` were read), and a failed
    ``nvmlShutdown``. Each becomes the error of the node or GPU, unless it has one."""
    if raw.error is None and raw.device_count > MAX_GPUS:
        raw.error = NVMLAnswerError(
            "nvmlDeviceGetCount_v2",
            f"{raw.device_count} devices, more than the {MAX_GPUS} a node can hold; "
            f"GPUs 0-{MAX_GPUS - 1} were read",
        )
    for gpu in raw.gpus:
        if gpu.error is None and gpu.mig_slots > MAX_MIG:
            gpu.error = NVMLAnswerError(
                "nvmlDeviceGetMaxMigDeviceCount",
                f"GPU {gpu.index}: {gpu.mig_slots} MIG slots, more than the {MAX_MIG} a GPU "
                f"can have; slots 0-{MAX_MIG - 1} were read",
            )
    if raw.error is None:
        raw.error = raw.shutdown_error
