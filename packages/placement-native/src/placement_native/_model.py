"""The node snapshot: plain frozen dataclasses and their JSON form (docs/concepts/node-snapshot.md).

``NodeSnapshot.to_dict()`` is the contract with placement-core's inventory reader (see
docs/concepts/node-snapshot.md). Keys of the schema come first and keep their meaning; the extra
keys (``compute_capability``, ``mig_instances``, ``error``, ``memory_used_bytes``,
``processes``, ``numa_nodes``, ``topology``, ``node_rank``) are additions a reader may ignore.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, fields, make_dataclass
from typing import Any, TypeVar

__all__ = [
    "FABRIC_STATES",
    "SCHEMA_VERSION",
    "Accelerator",
    "Fabric",
    "Link",
    "MigInstance",
    "NodeSnapshot",
    "Process",
    "record_maker",
]

SCHEMA_VERSION = 1
_T = TypeVar("_T")


@dataclass(frozen=True, slots=True)
class Process:
    """A compute process (a CUDA context) running on an accelerator, as NVML lists it.

    Attributes:
        pid: Its process id, in the PID namespace of the NVIDIA driver (the host's, for a
            process in a container).
        used_memory_bytes: The GPU memory it uses; None where NVML cannot tell.
    """

    pid: int
    used_memory_bytes: int | None = None

    def to_dict(self) -> dict[str, Any]:
        """The process as a JSON-ready dict."""
        return {"pid": self.pid, "used_memory_bytes": self.used_memory_bytes}


def _processes_dict(processes: tuple[Process, ...] | None) -> list[dict[str, Any]] | None:
    return None if processes is None else [p.to_dict() for p in processes]


@dataclass(frozen=True, slots=True)
class MigInstance:
    """One MIG device of a MIG-enabled GPU: its own schedulable accelerator.

    Attributes:
        index: The MIG device's index on its parent GPU.
        uuid: ``MIG-...``; what ``CUDA_VISIBLE_DEVICES`` takes to select it.
        model: NVML's name for it, e.g. ``NVIDIA A100-SXM4-40GB MIG 1g.5gb``.
        memory_bytes: Memory of the instance.
        gpu_instance_id: NVML GPU instance id, or None where unsupported.
        compute_instance_id: NVML compute instance id, or None where unsupported.
        error: Why a query of this instance failed, or None.
        memory_used_bytes: Memory of the instance in use, or None where unknown.
        processes: The compute processes running on the instance; None where NVML did
            not list them.
    """

    index: int
    uuid: str | None = None
    model: str | None = None
    memory_bytes: int | None = None
    gpu_instance_id: int | None = None
    compute_instance_id: int | None = None
    error: str | None = None
    memory_used_bytes: int | None = None
    processes: tuple[Process, ...] | None = None

    def to_dict(self) -> dict[str, Any]:
        """The instance as a JSON-ready dict."""
        return {
            "index": self.index,
            "uuid": self.uuid,
            "model": self.model,
            "memory_bytes": self.memory_bytes,
            "gpu_instance_id": self.gpu_instance_id,
            "compute_instance_id": self.compute_instance_id,
            "memory_used_bytes": self.memory_used_bytes,
            "processes": _processes_dict(self.processes),
            "error": self.error,
        }


# nvmlGpuFabricState_t -> the names the snapshot gives.
FABRIC_STATES = {0: "not_supported", 1: "not_started", 2: "in_progress", 3: "completed"}


@dataclass(frozen=True, slots=True)
class Fabric:
    """The NVLink fabric a GPU is registered with (rack-scale NVLink, e.g. GB200 NVL72).

    GPUs that share ``cluster_uuid`` and ``clique_id`` reach each other over NVLink, across
    trays; a GPU whose registration is not ``completed`` with status ``success`` is not
    (yet) part of its domain.

    Attributes:
        cluster_uuid: The fabric's cluster UUID, canonical form
            (``8-4-4-4-12`` lowercase hex digits).
        clique_id: The clique (NVLink partition) within the cluster.
        state: ``not_supported``, ``not_started``, ``in_progress`` or ``completed``
            (``state_<n>`` for a value newer than this package).
        status: The registration's NVML return code by name, lowercased without its
            ``NVML_ERROR_`` / ``NVML_`` prefix (``success``, ``not_ready``, ...).
        health_mask: NVML's fabric health mask (0 where the driver has only the legacy
            call, which reports none).
    """

    cluster_uuid: str
    clique_id: int
    state: str
    status: str
    health_mask: int = 0

    @property
    def registered(self) -> bool:
        """Whether the GPU is registered: state ``completed`` with status ``success``."""
        return self.state == "completed" and self.status == "success"

    def to_dict(self) -> dict[str, Any]:
        """The fabric as a JSON-ready dict."""
        return {
            "cluster_uuid": self.cluster_uuid,
            "clique_id": self.clique_id,
            "state": self.state,
            "status": self.status,
            "health_mask": self.health_mask,
        }


@dataclass(frozen=True, slots=True)
class Accelerator:
    """One physical GPU of this node.

    Attributes:
        index: NVML index (PCI order), the node-local physical index.
        type: Accelerator vendor type; always ``nvidia`` here.
        model: Product name (``NVIDIA H100 80GB HBM3``).
        uuid: ``GPU-...``.
        pci_bus_id: ``00000000:18:00.0`` (NVML's form, 8-digit domain).
        memory_bytes: Total framebuffer memory.
        numa_node: The NUMA node closest to the GPU, or None where the host has no NUMA
            information.
        cpu_affinity: The CPUs close to the GPU as a Linux cpu list (``0-55,112-167``).
        compute_capability: ``(major, minor)``, e.g. ``(9, 0)``.
        mig: Whether MIG mode is currently enabled.
        mig_instances: The MIG devices carved out of this GPU (empty unless ``mig``).
        nvlink_peers: ``(peer index, active link count)`` for every GPU of this node that
            this one reaches by direct NVLink, ascending by index.
        nvswitch_links: Active NVLinks that end at an NVSwitch (the NVLink fabric).
        error: Why this device could not be (fully) queried, e.g.
            ``nvmlDeviceGetUUID: NVML_ERROR_NO_PERMISSION``; None when all went well.
        memory_used_bytes: Memory in use (NVML's ``used``, without what the driver
            reserves where the driver tells them apart), or None where unknown.
        processes: The compute processes running on the GPU (on a GPU in MIG mode: those
            of its MIG instances), in NVML's order; empty when none runs, None where NVML
            did not list them.
        fabric: The NVLink fabric the GPU is registered with, or None where the driver
            reports none (no fabric on this GPU, or a driver without the query).
    """

    index: int
    type: str = "nvidia"
    model: str | None = None
    uuid: str | None = None
    pci_bus_id: str | None = None
    memory_bytes: int | None = None
    numa_node: int | None = None
    cpu_affinity: str | None = None
    compute_capability: tuple[int, int] | None = None
    mig: bool = False
    mig_instances: tuple[MigInstance, ...] = ()
    nvlink_peers: tuple[tuple[int, int], ...] = ()
    nvswitch_links: int = 0
    error: str | None = None
    memory_used_bytes: int | None = None
    processes: tuple[Process, ...] | None = None
    fabric: Fabric | None = None

    def to_dict(self) -> dict[str, Any]:
        """The accelerator as a node-snapshot accelerator entry, plus the extra keys
        (docs/concepts/node-snapshot.md): its fields as ``ACCELERATOR_FIELDS`` writes them."""
        # Imported here: the field table builds these records, so it imports this module.
        from ._fields import accelerator_json

        return accelerator_json(self)


@dataclass(frozen=True, slots=True)
class Link:
    """How two GPUs of this node reach each other (``a < b``).

    Attributes:
        a: Index of the first GPU.
        b: Index of the second GPU.
        level: The PCIe path as ``nvidia-smi topo -m`` names it: ``PIX`` (one PCIe
            switch), ``PXB`` (several switches), ``PHB`` (a host bridge), ``NODE`` (host
            bridges within a NUMA node), ``SYS`` (across NUMA nodes, SMP interconnect),
            ``X`` (same board); None when NVML could not tell.
        nvlinks: Direct NVLinks between the two, or the NVLinks of the narrower of the two
            to a shared NVSwitch fabric; 0 for none.
        p2p: Peer-to-peer read status as NVML reports it (``OK``, ``NS``
            (not supported), ``CNS`` (chipset), ``GNS`` (GPU), ``TNS`` (topology),
            ``DIS`` (disabled by regkey), ``U`` (unknown)); None when not queried.
    """

    a: int
    b: int
    level: str | None
    nvlinks: int = 0
    p2p: str | None = None

    @property
    def label(self) -> str:
        """``NV<n>`` for NVLink-connected GPUs, else the PCIe level (``nvidia-smi topo -m``)."""
        if self.nvlinks:
            return f"NV{self.nvlinks}"
        return self.level or "?"


@dataclass(frozen=True, slots=True)
class NodeSnapshot:
    """Everything placement needs to know about this node, read in one go.

    Attributes:
        hostname: ``socket.gethostname()``.
        ip: The primary IP: the default-route interface's address, else the hostname's,
            ``127.0.0.1`` as a last resort. Found without sending a packet.
        cpus: Logical CPUs of the node.
        numa_nodes: NUMA nodes of the node (1 where the kernel reports none).
        accelerators: The node's GPUs by NVML index.
        links: Pairwise topology for every ``a < b``, in ``(a, b)`` order.
        driver: The NVIDIA driver version, or None without NVML.
        source: Which backend read NVML: ``nvml-cffi`` or ``nvml-pynvml``.
        nvml_error: Why NVML gave nothing (library missing, init failed), or what went
            wrong beside what was read (a device count beyond 64, of which the first
            64 are listed), or None.
        node_rank: The node's rank from ``PLACEMENT_NODE_RANK`` (or ``RLINF_NODE_RANK``) in the
            environment, or None (docs/concepts/node-order.md: then the cluster orders nodes
            itself).
        host_memory_bytes: The node's RAM (``MemTotal`` of ``/proc/meminfo``), or None where
            it cannot be read.
    """

    hostname: str
    ip: str
    cpus: int
    numa_nodes: int = 1
    accelerators: tuple[Accelerator, ...] = ()
    links: tuple[Link, ...] = ()
    driver: str | None = None
    source: str = "nvml-cffi"
    nvml_error: str | None = None
    node_rank: int | None = None
    host_memory_bytes: int | None = None

    def link(self, a: int, b: int) -> Link | None:
        """The link between GPUs ``a`` and ``b`` (either order), or None if unknown."""
        lo, hi = min(a, b), max(a, b)
        for link in self.links:
            if link.a == lo and link.b == hi:
                return link
        return None

    def to_dict(self) -> dict[str, Any]:
        """The snapshot in the node-snapshot schema (``schema: 1``; docs/concepts/node-snapshot.md),
        ready for ``json.dumps``."""
        return {
            "schema": SCHEMA_VERSION,
            "hostname": self.hostname,
            "ip": self.ip,
            "cpus": self.cpus,
            "numa_nodes": self.numa_nodes,
            "accelerators": [acc.to_dict() for acc in self.accelerators],
            "links": [[link.a, link.b, link.label] for link in self.links],
            "topology": [
                {
                    "a": link.a,
                    "b": link.b,
                    "level": link.level,
                    "nvlinks": link.nvlinks,
                    "p2p": link.p2p,
                }
                for link in self.links
            ],
            "driver": self.driver,
            "source": self.source,
            "nvml_error": self.nvml_error,
            "node_rank": self.node_rank,
            "host_memory_bytes": self.host_memory_bytes,
        }

    def to_json(self, *, indent: int | None = None) -> str:
        """``to_dict()`` as JSON text."""
        return json.dumps(self.to_dict(), indent=indent)


def record_maker(cls: type[_T]) -> Callable[..., _T]:
    """A positional constructor for a frozen slotted dataclass that fills the slots directly.

    A frozen dataclass's ``__init__`` assigns every field through ``object.__setattr__``;
    a snapshot builds dozens of records, and that alone cost more than the whole C call.
    The maker takes every field in declaration order (no defaults) and produces the same
    object, still frozen: it is a plain (not frozen) slotted dataclass with the same fields,
    whose ``__init__`` stores each slot directly, and whose ``__post_init__`` makes the new
    object a ``cls`` by assigning ``__class__``, which CPython allows between classes of one
    layout.
    """

    def become(self: Any) -> None:
        self.__class__ = cls

    maker: Callable[..., _T] = make_dataclass(
        f"_{cls.__name__}Maker",
        [(f.name, Any) for f in fields(cls)],  # type: ignore[arg-type]
        namespace={"__post_init__": become},
        slots=True,
        eq=False,
        repr=False,
    )
    return maker
