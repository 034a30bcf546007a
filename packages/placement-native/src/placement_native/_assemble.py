"""Turn a backend's ``RawNode`` into the public ``NodeSnapshot`` (shared by both backends)."""

from __future__ import annotations

import logging
from collections import Counter
from pathlib import Path

from . import _host
from ._model import Accelerator, Link, MigInstance, NodeSnapshot
from ._raw import RawGpu, RawNode

__all__ = ["P2P_NAMES", "TOPOLOGY_LEVELS", "assemble"]

logger = logging.getLogger(__name__)

# nvmlGpuTopologyLevel_t -> the names nvidia-smi topo -m prints.
TOPOLOGY_LEVELS = {0: "X", 10: "PIX", 20: "PXB", 30: "PHB", 40: "NODE", 50: "SYS"}
# nvmlGpuP2PStatus_t -> the abbreviations of nvidia-smi topo -p2p r.
P2P_NAMES = {0: "OK", 1: "CNS", 2: "GNS", 3: "TNS", 4: "DIS", 5: "NS", 6: "U"}
NVLINK_GPU = 0
NVLINK_SWITCH = 2


def _bus_key(bus_id: str) -> str:
    """Bus ids compare without case and without the domain's leading zeros."""
    domain, _, rest = bus_id.strip().lower().partition(":")
    return f"{int(domain, 16):x}:{rest}" if rest and domain else bus_id.strip().lower()


def _peers_and_fabric(gpu: RawGpu, by_bus: dict[str, int]) -> tuple[Counter[int], int]:
    peers: Counter[int] = Counter()
    fabric = 0
    for link in gpu.links:
        peer = by_bus.get(_bus_key(link.remote_bus_id))
        if link.remote_type == NVLINK_SWITCH or (link.remote_type is None and peer is None):
            fabric += 1
        elif peer is not None and peer != gpu.index and link.remote_type in (NVLINK_GPU, None):
            peers[peer] += 1
    return peers, fabric


def _accelerator(gpu: RawGpu, peers: Counter[int], fabric: int, sysfs: Path | None) -> Accelerator:
    numa, cpus = gpu.numa_node, None
    if gpu.cpu_mask is not None:
        cpus = _host.cpulist_from_mask(gpu.cpu_mask) or None
    if (numa is None or cpus is None) and gpu.pci_bus_id:
        sys_numa, sys_cpus = _host.pci_sysfs_affinity(gpu.pci_bus_id, sysfs)
        numa = numa if numa is not None else sys_numa
        cpus = cpus if cpus is not None else sys_cpus
    migs = tuple(
        MigInstance(
            index=m.slot,
            uuid=m.uuid,
            model=m.name,
            memory_bytes=m.memory_total,
            gpu_instance_id=m.gpu_instance_id,
            compute_instance_id=m.compute_instance_id,
            error=None if m.error is None else str(m.error),
        )
        for m in gpu.migs
    )
    return Accelerator(
        index=gpu.index,
        model=gpu.name,
        uuid=gpu.uuid,
        pci_bus_id=gpu.pci_bus_id,
        memory_bytes=gpu.memory_total,
        numa_node=numa,
        cpu_affinity=cpus,
        compute_capability=gpu.compute_capability,
        mig=gpu.mig_mode,
        mig_instances=migs,
        nvlink_peers=tuple(sorted(peers.items())),
        nvswitch_links=fabric,
        error=None if gpu.error is None else str(gpu.error),
    )


def assemble(
    raw: RawNode,
    *,
    source: str,
    hostname: str,
    ip: str,
    cpus: int,
    numa_nodes: int,
    sysfs: Path | None = None,
) -> NodeSnapshot:
    """Build the snapshot from what a backend read plus the host facts."""
    if raw.device_count > len(raw.gpus):
        logger.warning(
            "NVML reports %d GPUs; the snapshot holds the first %d", raw.device_count, len(raw.gpus)
        )
    by_bus = {_bus_key(g.pci_bus_id): g.index for g in raw.gpus if g.pci_bus_id}
    wiring = [_peers_and_fabric(g, by_bus) for g in raw.gpus]
    accelerators = tuple(
        _accelerator(g, peers, fabric, sysfs)
        for g, (peers, fabric) in zip(raw.gpus, wiring, strict=True)
    )
    links = []
    for i, gi in enumerate(raw.gpus):
        for j in range(i + 1, len(raw.gpus)):
            gj = raw.gpus[j]
            direct = wiring[i][0].get(gj.index, 0) or wiring[j][0].get(gi.index, 0)
            fabric = min(wiring[i][1], wiring[j][1])
            level = raw.topology.get((gi.index, gj.index))
            p2p = raw.p2p_read.get((gi.index, gj.index))
            if level is None and p2p is None and not (direct or fabric):
                continue  # nothing known about the pair (one of them refused every query)
            links.append(
                Link(
                    a=gi.index,
                    b=gj.index,
                    level=None if level is None else TOPOLOGY_LEVELS.get(level, f"L{level}"),
                    nvlinks=direct or fabric,
                    p2p=None if p2p is None else P2P_NAMES.get(p2p, "U"),
                )
            )
    return NodeSnapshot(
        hostname=hostname,
        ip=ip,
        cpus=cpus,
        numa_nodes=numa_nodes,
        accelerators=accelerators,
        links=tuple(links),
        driver=raw.driver,
        source=source,
        nvml_error=None if raw.error is None else str(raw.error),
    )
