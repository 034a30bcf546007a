"""The node snapshot: plain frozen dataclasses and their JSON form (docs/concepts/node-snapshot.md).

``NodeSnapshot.to_dict()`` is the contract with placement-core's inventory reader (see
docs/concepts/node-snapshot.md). Keys of the schema come first and keep their meaning; the extra
keys (``compute_capability``, ``mig_instances``, ``error``, ``memory_used_bytes``,
``processes``, ``numa_nodes``, ``topology``, ``node_rank``) are additions a reader may ignore.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from ._fields import accelerator_json
from ._parts import FABRIC_STATES, Fabric, MigInstance, Process, record_maker

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
        }

    def to_json(self, *, indent: int | None = None) -> str:
        """``to_dict()`` as JSON text."""
        return json.dumps(self.to_dict(), indent=indent)
