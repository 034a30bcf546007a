"""Turn a backend's ``RawNode`` into the public ``NodeSnapshot`` (shared by both backends)."""

from __future__ import annotations

from . import _host
from ._model import Accelerator, Link, MigInstance, NodeSnapshot, Process, record_maker
from ._raw import RawGpu, RawNode

__all__ = ["P2P_NAMES", "TOPOLOGY_LEVELS", "assemble"]

# nvmlGpuTopologyLevel_t -> the names nvidia-smi topo -m prints.
TOPOLOGY_LEVELS = {0: "X", 10: "PIX", 20: "PXB", 30: "PHB", 40: "NODE", 50: "SYS"}
# nvmlGpuP2PStatus_t -> the abbreviations of nvidia-smi topo -p2p r.
P2P_NAMES = {0: "OK", 1: "CNS", 2: "GNS", 3: "TNS", 4: "DIS", 5: "NS", 6: "U"}

_make_accelerator = record_maker(Accelerator)
_make_link = record_maker(Link)
_make_snapshot = record_maker(NodeSnapshot)
_make_process = record_maker(Process)

# A node's topology and CPU masks do not change between snapshots, nor do most of its
# processes from one snapshot to the next, and the records built from them are
# immutable: the last pair table's links, every mask's cpulist and the processes last
# seen are kept and handed out again for the same input.
_last_links: tuple[list[int], tuple[Link, ...]] = ([], ())
_cpulists: dict[int, str | None] = {}
_CPULISTS_KEPT = 64
_known_processes: dict[tuple[tuple[int, int | None], ...], tuple[Process, ...]] = {}
_PROCESSES_KEPT = 1024


def _new_processes(key: tuple[tuple[int, int | None], ...]) -> tuple[Process, ...]:
    if len(_known_processes) >= _PROCESSES_KEPT:
        _known_processes.clear()
    processes = _known_processes[key] = tuple([_make_process(*item) for item in key])
    return processes


def _processes(listed: list[tuple[int, int | None]] | None) -> tuple[Process, ...] | None:
    """A device's process records: the same tuple again for the same (pid, memory) list."""
    if listed is None:
        return None
    key = tuple(listed)
    return _known_processes.get(key) or _new_processes(key)


def _mig(gpu: RawGpu) -> tuple[MigInstance, ...]:
    return tuple(
        MigInstance(
            index=m.slot,
            uuid=m.uuid,
            model=m.name,
            memory_bytes=m.memory_total,
            gpu_instance_id=m.gpu_instance_id,
            compute_instance_id=m.compute_instance_id,
            error=None if m.error is None else str(m.error),
            memory_used_bytes=m.memory_used,
            processes=_processes(m.processes),
        )
        for m in gpu.migs
    )


def _gpu_processes(gpu: RawGpu, migs: tuple[MigInstance, ...]) -> tuple[Process, ...] | None:
    """The processes of a GPU in MIG mode (which is not asked itself): those of its MIG
    instances; None when none of them was listed."""
    listed = [m.processes for m in migs if m.processes is not None]
    return tuple(p for processes in listed for p in processes) if listed else None


def _cpulist(mask: int) -> str | None:
    cpus = _cpulists.get(mask, "")
    if cpus == "":
        if len(_cpulists) >= _CPULISTS_KEPT:
            _cpulists.clear()
        cpus = _cpulists[mask] = _host.cpulist_from_mask(mask) or None
    return cpus


def _accelerator(gpu: RawGpu, sysfs: str | None) -> Accelerator:
    numa, cpus = gpu.numa_node, None
    mask = gpu.cpu_mask
    if mask is not None:
        cpus = _cpulists.get(mask) or _cpulist(mask)
    if (numa is None or cpus is None) and gpu.pci_bus_id:
        sys_numa, sys_cpus = _host.pci_sysfs_affinity(gpu.pci_bus_id, sysfs)
        numa = numa if numa is not None else sys_numa
        cpus = cpus if cpus is not None else sys_cpus
    migs = _mig(gpu) if gpu.migs else ()
    return _make_accelerator(
        gpu.index,
        "nvidia",
        gpu.name,
        gpu.uuid,
        gpu.pci_bus_id,
        gpu.memory_total,
        numa,
        cpus,
        gpu.compute_capability,
        gpu.mig_mode,
        migs,
        tuple(sorted(gpu.nvlink_peers.items())) if gpu.nvlink_peers else (),
        gpu.nvswitch_links,
        None if gpu.error is None else str(gpu.error),
        gpu.memory_used,
        _gpu_processes(gpu, migs) if migs else _processes(gpu.processes),
    )


def _links(raw: RawNode) -> tuple[Link, ...]:
    global _last_links
    pairs, (last_pairs, last_links) = raw.pairs, _last_links
    if pairs == last_pairs:
        return last_links
    links = _build_links(pairs)
    _last_links = (pairs, links)
    return links


def _build_links(pairs: list[int]) -> tuple[Link, ...]:
    level_names, p2p_names, make = TOPOLOGY_LEVELS, P2P_NAMES, _make_link
    flat = iter(pairs)
    links = []
    for a, b, level, nvlinks, p2p in zip(flat, flat, flat, flat, flat, strict=True):
        if level < 0 and p2p < 0 and not nvlinks:
            continue  # nothing known about the pair (one of them refused every query)
        links.append(
            make(
                a,
                b,
                None if level < 0 else level_names.get(level) or f"L{level}",
                nvlinks,
                None if p2p < 0 else p2p_names.get(p2p, "U"),
            )
        )
    return tuple(links)


def assemble(
    raw: RawNode, *, source: str, sysfs: str | None = None, node_rank: int | None = None
) -> NodeSnapshot:
    """Build the snapshot from what a backend read (NVML and the host facts)."""
    return _make_snapshot(
        raw.hostname,
        _host.choose_ip(raw.route_ip, raw.hostname),
        raw.cpus,
        raw.numa_nodes,
        tuple([_accelerator(g, sysfs) for g in raw.gpus]),
        _links(raw),
        raw.driver,
        source,
        None if raw.error is None else str(raw.error),
        node_rank,
    )
