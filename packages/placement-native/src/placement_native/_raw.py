"""What a backend reads from NVML, before it becomes a ``NodeSnapshot``.

Both backends (the compiled one and the nvidia-ml-py fallback) fill these records with
the same calls in the same order; ``_assemble`` turns them into the public dataclasses,
so the two backends cannot disagree on anything but what NVML told them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .errors import NVMLError

__all__ = [
    "NVML_NOT_SUPPORTED",
    "OPTIONAL_ABSENT",
    "REQUIRED_SYMBOLS",
    "RawGpu",
    "RawMig",
    "RawNode",
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
    driver: str | None = None
    device_count: int = 0
    gpus: list[RawGpu] = field(default_factory=list)
    # every GPU pair i < j, flat, five ints each (as the C struct has them): i, j,
    # nvmlGpuTopologyLevel_t (-1 unknown), NVLinks (direct, else the narrower side's into
    # a shared NVSwitch fabric, else 0), nvmlGpuP2PStatus_t (-1 unknown)
    pairs: list[int] = field(default_factory=list)
