"""Turn a backend's ``RawNode`` into the public ``NodeSnapshot`` (shared by both backends)."""

from __future__ import annotations

from typing import Any

from . import _host
from ._fields import ACCELERATOR_FIELDS, position
from ._model import Accelerator, Link, MigInstance, NodeSnapshot, Process, record_maker
from ._raw import RawGpu, RawNode

__all__ = [
    "P2P_NAMES",
    "TOPOLOGY_LEVELS",
    "Assembler",
    "accelerator",
    "make_accelerator",
]

# nvmlGpuTopologyLevel_t -> the names nvidia-smi topo -m prints.
TOPOLOGY_LEVELS = {0: "X", 10: "PIX", 20: "PXB", 30: "PHB", 40: "NODE", 50: "SYS"}
# nvmlGpuP2PStatus_t -> the abbreviations of nvidia-smi topo -p2p r.
P2P_NAMES = {0: "OK", 1: "CNS", 2: "GNS", 3: "TNS", 4: "DIS", 5: "NS", 6: "U"}

make_accelerator = record_maker(Accelerator)
"""``Accelerator`` from every field's value, positionally in ``ACCELERATOR_FIELDS`` order."""
_make_link = record_maker(Link)
_make_snapshot = record_maker(NodeSnapshot)

_CPULISTS_KEPT = 64
_BUS, _NUMA, _CPUS = position("pci_bus_id"), position("numa_node"), position("cpu_affinity")
_MIGS, _PROCESSES, _ERROR = position("mig_instances"), position("processes"), position("error")
_CONVERTS = tuple((k, f.convert, f.absent) for k, f in enumerate(ACCELERATOR_FIELDS) if f.convert)


def accelerator(values: list[Any], sysfs: str | None) -> Accelerator:
    """The public record of one GPU from its fields' record values (in ``ACCELERATOR_FIELDS``
    order; the list is the record's now), its NUMA node and CPUs taken from sysfs where
    NVML could not tell them."""
    bus_id = values[_BUS]
    if (values[_NUMA] is None or values[_CPUS] is None) and bus_id:
        sys_numa, sys_cpus = _host.pci_sysfs_affinity(bus_id, sysfs)
        if values[_NUMA] is None:
            values[_NUMA] = sys_numa
        if values[_CPUS] is None:
            values[_CPUS] = sys_cpus
    return make_accelerator(*values)


def _mig_processes(migs: tuple[MigInstance, ...]) -> tuple[Process, ...] | None:
    """The processes of a GPU in MIG mode (which is not asked itself): those of its MIG
    instances; None when none of them was listed."""
    listed = [m.processes for m in migs if m.processes is not None]
    return tuple(p for processes in listed for p in processes) if listed else None


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
            tuple([g if type(g) is Accelerator else self._accelerator(g, sysfs) for g in raw.gpus]),
            self._links(raw),
            raw.driver,
            source,
            None if raw.error is None else str(raw.error),
            node_rank,
            _host.host_memory_bytes(),
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
        values = gpu.values  # used up: the RawGpu is not read again
        values[_ERROR] = gpu.error
        for k, convert, absent in _CONVERTS:
            value = values[k]
            if value is not absent:  # an absent value converts to itself
                values[k] = convert(value)
        if values[_MIGS]:
            values[_PROCESSES] = _mig_processes(values[_MIGS])
        return accelerator(values, sysfs)


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
