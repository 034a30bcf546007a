"""Turn a backend's ``RawNode`` into the public ``NodeSnapshot`` (shared by both backends)."""

from __future__ import annotations

import uuid as _uuid

from . import _host
from ._model import (
    FABRIC_STATES,
    Accelerator,
    Fabric,
    Link,
    MigInstance,
    NodeSnapshot,
    Process,
    record_maker,
)
from ._raw import RawGpu, RawNode
from .errors import NVML_CODE_NAMES

__all__ = [
    "P2P_NAMES",
    "TOPOLOGY_LEVELS",
    "Assembler",
    "accelerator",
    "fabric_record",
    "make_accelerator",
    "process_records",
]

# nvmlGpuTopologyLevel_t -> the names nvidia-smi topo -m prints.
TOPOLOGY_LEVELS = {0: "X", 10: "PIX", 20: "PXB", 30: "PHB", 40: "NODE", 50: "SYS"}
# nvmlGpuP2PStatus_t -> the abbreviations of nvidia-smi topo -p2p r.
P2P_NAMES = {0: "OK", 1: "CNS", 2: "GNS", 3: "TNS", 4: "DIS", 5: "NS", 6: "U"}

make_accelerator = record_maker(Accelerator)
"""``Accelerator`` from every field's value, positionally in ``ACCELERATOR_FIELDS`` order."""
_make_link = record_maker(Link)
_make_snapshot = record_maker(NodeSnapshot)
_make_process = record_maker(Process)

_CPULISTS_KEPT = 64


def process_records(listed: list[tuple[int, int | None]] | None) -> tuple[Process, ...] | None:
    """The Process records of a device's (pid, used memory) list; None stays None."""
    if listed is None:
        return None
    make = _make_process
    return tuple([make(pid, used) for pid, used in listed])


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
            processes=process_records(m.processes),
        )
        for m in gpu.migs
    )


def _gpu_processes(gpu: RawGpu, migs: tuple[MigInstance, ...]) -> tuple[Process, ...] | None:
    """The processes of a GPU in MIG mode (which is not asked itself): those of its MIG
    instances; None when none of them was listed."""
    listed = [m.processes for m in migs if m.processes is not None]
    return tuple(p for processes in listed for p in processes) if listed else None


def fabric_record(
    cluster_uuid: bytes, clique_id: int, state: int, status: int, health_mask: int
) -> Fabric:
    """The Fabric record of what NVML's fabric info holds (the UUID as its 16 bytes)."""
    code_name = NVML_CODE_NAMES.get(status)
    status_name = (
        f"error_{status}"
        if code_name is None
        else code_name.removeprefix("NVML_ERROR_").removeprefix("NVML_").lower()
    )
    return Fabric(
        cluster_uuid=str(_uuid.UUID(bytes=bytes(cluster_uuid))),
        clique_id=clique_id,
        state=FABRIC_STATES.get(state, f"state_{state}"),
        status=status_name,
        health_mask=health_mask,
    )


def accelerator(
    index: int,
    *,
    error: str | None,
    name: str | None,
    uuid: str | None,
    bus_id: str | None,
    memory_total: int | None,
    numa: int | None,
    cpus: str | None,
    compute_capability: tuple[int, int] | None,
    mig_mode: bool,
    migs: tuple[MigInstance, ...],
    nvlink_peers: tuple[tuple[int, int], ...],
    nvswitch_links: int,
    memory_used: int | None,
    processes: tuple[Process, ...] | None,
    fabric: Fabric | None,
    sysfs: str | None,
) -> Accelerator:
    """The public record of one GPU, from what NVML told (its CPUs as ``cpulist_of`` gives
    them), its NUMA node and CPUs taken from sysfs where NVML could not tell them."""
    if (numa is None or cpus is None) and bus_id:
        sys_numa, sys_cpus = _host.pci_sysfs_affinity(bus_id, sysfs)
        numa = numa if numa is not None else sys_numa
        cpus = cpus if cpus is not None else sys_cpus
    return make_accelerator(
        index,
        "nvidia",
        name,
        uuid,
        bus_id,
        memory_total,
        numa,
        cpus,
        compute_capability,
        mig_mode,
        migs,
        nvlink_peers,
        nvswitch_links,
        error,
        memory_used,
        processes,
        fabric,
    )


class Assembler:
    """Turns a backend's ``RawNode`` into the public ``NodeSnapshot``.

    A node's topology and CPU masks do not change between snapshots, and the records built
    from them are immutable: each assembler (one per backend reader) keeps the last pair
    table's links and every mask's cpulist, and hands them out again for the same input.
    """

    def __init__(self) -> None:
        self._last_links: tuple[list[int], tuple[Link, ...]] = ([], ())
        self._cpulists: dict[int, str | None] = {}

    def cpulist(self, mask: int | None) -> str | None:
        """NVML's CPU mask as a Linux cpulist (``0-55,112-167``); None for none."""
        if mask is None:
            return None
        cpulists = self._cpulists
        cpus = cpulists.get(mask, "")
        if cpus == "":
            if len(cpulists) >= _CPULISTS_KEPT:
                cpulists.clear()
            cpus = cpulists[mask] = _host.cpulist_from_mask(mask) or None
        return cpus

    def assemble(
        self, raw: RawNode, *, source: str, sysfs: str | None = None, node_rank: int | None = None
    ) -> NodeSnapshot:
        """Build the snapshot from what a backend read (NVML and the host facts)."""
        return _make_snapshot(
            raw.hostname,
            _host.choose_ip(raw.route_ip, raw.hostname),
            raw.cpus,
            raw.numa_nodes,
            tuple([self._accelerator(g, sysfs) for g in raw.gpus]),
            self._links(raw),
            raw.driver,
            source,
            None if raw.error is None else str(raw.error),
            node_rank,
        )

    def _links(self, raw: RawNode) -> tuple[Link, ...]:
        pairs, (last_pairs, last_links) = raw.pairs, self._last_links
        if pairs is last_pairs or pairs == last_pairs:
            return last_links
        links = _build_links(pairs)
        self._last_links = (pairs, links)
        return links

    def _accelerator(self, gpu: RawGpu | Accelerator, sysfs: str | None) -> Accelerator:
        if isinstance(gpu, Accelerator):  # made by the backend: nothing was left to check
            return gpu
        migs = _mig(gpu) if gpu.migs else ()
        return accelerator(
            gpu.index,
            error=None if gpu.error is None else str(gpu.error),
            name=gpu.name,
            uuid=gpu.uuid,
            bus_id=gpu.pci_bus_id,
            memory_total=gpu.memory_total,
            numa=gpu.numa_node,
            cpus=self.cpulist(gpu.cpu_mask),
            compute_capability=gpu.compute_capability,
            mig_mode=gpu.mig_mode,
            migs=migs,
            nvlink_peers=tuple(sorted(gpu.nvlink_peers.items())) if gpu.nvlink_peers else (),
            nvswitch_links=gpu.nvswitch_links,
            memory_used=gpu.memory_used,
            processes=_gpu_processes(gpu, migs) if migs else process_records(gpu.processes),
            fabric=gpu.fabric,
            sysfs=sysfs,
        )


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
