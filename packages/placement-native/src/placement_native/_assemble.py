"""Turn a backend's ``RawNode`` into the public ``NodeSnapshot`` (shared by both backends)."""

from __future__ import annotations

from pathlib import Path

from . import _host
from ._log import get_logger
from ._model import Accelerator, Link, MigInstance, NodeSnapshot
from ._raw import RawGpu, RawNode

__all__ = ["P2P_NAMES", "TOPOLOGY_LEVELS", "assemble"]

logger = get_logger(__name__)

# nvmlGpuTopologyLevel_t -> the names nvidia-smi topo -m prints.
TOPOLOGY_LEVELS = {0: "X", 10: "PIX", 20: "PXB", 30: "PHB", 40: "NODE", 50: "SYS"}
# nvmlGpuP2PStatus_t -> the abbreviations of nvidia-smi topo -p2p r.
P2P_NAMES = {0: "OK", 1: "CNS", 2: "GNS", 3: "TNS", 4: "DIS", 5: "NS", 6: "U"}


def _accelerator(gpu: RawGpu, sysfs: Path | None) -> Accelerator:
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
        nvlink_peers=tuple(sorted(gpu.nvlink_peers.items())),
        nvswitch_links=gpu.nvswitch_links,
        error=None if gpu.error is None else str(gpu.error),
    )


def assemble(raw: RawNode, *, source: str, sysfs: Path | None = None) -> NodeSnapshot:
    """Build the snapshot from what a backend read (NVML and the host facts)."""
    if raw.device_count > len(raw.gpus):
        logger.warning(
            "NVML reports %d GPUs; the snapshot holds the first %d", raw.device_count, len(raw.gpus)
        )
    gpus = raw.gpus
    links = []
    for i, gi in enumerate(gpus):
        for j in range(i + 1, len(gpus)):
            gj = gpus[j]
            direct = gi.nvlink_peers.get(gj.index, 0) or gj.nvlink_peers.get(gi.index, 0)
            nvlinks = direct or min(gi.nvswitch_links, gj.nvswitch_links)
            level = raw.topology.get((gi.index, gj.index))
            p2p = raw.p2p_read.get((gi.index, gj.index))
            if level is None and p2p is None and not nvlinks:
                continue  # nothing known about the pair (one of them refused every query)
            links.append(
                Link(
                    gi.index,
                    gj.index,
                    None if level is None else TOPOLOGY_LEVELS.get(level, f"L{level}"),
                    nvlinks,
                    None if p2p is None else P2P_NAMES.get(p2p, "U"),
                )
            )
    return NodeSnapshot(
        hostname=raw.hostname,
        ip=_host.primary_ip(raw.route_ip, raw.hostname),
        cpus=raw.cpus,
        numa_nodes=raw.numa_nodes,
        accelerators=tuple(_accelerator(g, sysfs) for g in gpus),
        links=tuple(links),
        driver=raw.driver,
        source=source,
        nvml_error=None if raw.error is None else str(raw.error),
    )
