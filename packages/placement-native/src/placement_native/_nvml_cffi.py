"""The compiled backend: one call into C fills one struct; this module only unpacks it.

Turning the struct into Python records costs more than the C call, so this module does
the least it can:

- Nothing is read field by field through cffi: the snapshot's head and each GPU entry
  are decoded with one ``struct.unpack_from`` each over the raw buffer, their layout
  (offsets, padding) taken from the compiled module at first use.
- The C side writes every entry in full (zeroed first, padding included), so equal bytes
  mean equal facts. A GPU entry, its identity (what it is, as opposed to what it is
  doing), the process table and the pair table are kept as bytes with what they decoded
  to; a read whose bytes compare equal (a memcmp) hands out the same records again. What
  is kept lives in one ``CffiReader`` (the snapshot's reader object), not in the module.
- A GPU with nothing for ``check_limits`` to look at (no error, no MIG device, every
  process listed) is made into its public ``Accelerator`` here, by the function the
  pure-Python backend's records go through (``_assemble.accelerator``), without a
  ``RawGpu`` between; every other GPU is a ``RawGpu`` as the other backend has it.
"""

from __future__ import annotations

import struct
import sys
import threading
from typing import Any, cast

from ._assemble import (
    Assembler,
    accelerator,
    fabric_record,
    make_accelerator,
    process_records,
)
from ._backend import native_module
from ._model import Accelerator, Fabric
from ._raw import MAX_MIG, NVML_VALUE_NOT_AVAILABLE, RawGpu, RawMig, RawNode
from .errors import NVMLError, nvml_error

NVML_ERROR_LIBRARY_NOT_FOUND = 12

__all__ = ["CffiReader"]

_BYTEORDER = sys.byteorder

# (field path in pn_nvml_gpu, how to decode it), in declaration order: "s" bytes of the
# field's size, else a struct format code. First what a GPU is (name to fabric_health_mask:
# one stretch of bytes, decoded only when it differs from the last read of that GPU),
# then what it is doing. The per-peer NVLink counts stay bytes: on most nodes they are
# all zero (NVSwitch fabric, or no NVLink), which one comparison tells.
_GPU_IDENTITY_FIELDS = (
    (("name",), "s"),
    (("uuid",), "s"),
    (("pci_bus_id",), "s"),
    (("numa_node",), "i"),
    (("has_cpu_affinity",), "i"),
    (("cpu_affinity",), "s"),
    (("cc_major",), "i"),
    (("cc_minor",), "i"),
    (("mig_mode",), "i"),
    (("mig_slots",), "I"),
    (("nvlink_to",), "s"),
    (("nvswitch_links",), "I"),
    (("has_fabric",), "i"),
    (("fabric_cluster_uuid",), "s"),
    (("fabric_status",), "i"),
    (("fabric_clique_id",), "I"),
    (("fabric_state",), "I"),
    (("fabric_health_mask",), "I"),
)
_GPU_STATE_FIELDS = (
    (("index",), "I"),
    (("has_handle",), "i"),
    (("error", "code"), "i"),
    (("error", "function"), "s"),
    (("has_memory",), "i"),
    (("memory_total",), "Q"),
    (("memory_used",), "Q"),
    (("procs", "read"), "i"),
    (("procs", "first"), "I"),
    (("procs", "count"), "I"),
    (("procs", "total"), "I"),
    (("mig_count",), "I"),
)


# The same for the fields of pn_nvml_snapshot before its GPU entries, and its counts.
_HEAD_FIELDS = (
    (("host", "hostname"), "s"),
    (("host", "cpus"), "i"),
    (("host", "numa_nodes"), "i"),
    (("host", "route_ip"), "s"),
    (("error", "code"), "i"),
    (("error", "function"), "s"),
    (("detail",), "s"),
    (("driver",), "s"),
    (("device_count",), "I"),
    (("gpu_count",), "I"),
)
_COUNT_FIELDS = ((("pair_count",), "I"), (("process_count",), "I"))


def _struct(ffi: Any, type_name: str, fields: tuple[tuple[tuple[str, ...], str], ...]) -> Any:
    """A ``struct.Struct`` reading ``fields`` of the C struct, from its first one's offset."""
    parts, position = ["="], ffi.offsetof(type_name, *fields[0][0])
    for path, kind in fields:
        offset = ffi.offsetof(type_name, *path)
        ctype: Any = ffi.typeof(type_name)
        for name in path:
            ctype = dict(ctype.fields)[name].type
        code = f"{ffi.sizeof(ctype)}s" if kind == "s" else kind
        if offset > position:
            parts.append(f"{offset - position}x")
        parts.append(code)
        position = offset + struct.calcsize("=" + code)
    return struct.Struct("".join(parts))


class _Layout:
    """How to decode the compiled structs, measured from the compiled module."""

    def __init__(self, ffi: Any, lib: Any) -> None:
        self.gpu = _struct(ffi, "pn_nvml_gpu", _GPU_STATE_FIELDS)
        self.identity = _struct(ffi, "pn_nvml_gpu", _GPU_IDENTITY_FIELDS)
        self.identity_start = ffi.offsetof("pn_nvml_gpu", "name")
        self.identity_end = ffi.offsetof("pn_nvml_gpu", "has_handle")
        self.head = _struct(ffi, "pn_nvml_snapshot", _HEAD_FIELDS)
        self.counts = _struct(ffi, "pn_nvml_snapshot", _COUNT_FIELDS)
        self.counts_offset = ffi.offsetof("pn_nvml_snapshot", "pair_count")
        self.gpu_size = ffi.sizeof("pn_nvml_gpu")
        self.no_links = bytes(ffi.sizeof("unsigned int") * lib.PN_NVML_MAX_GPUS)
        self.links = [struct.Struct(f"={n}I") for n in range(lib.PN_NVML_MAX_GPUS + 1)]
        self.gpus_offset = ffi.offsetof("pn_nvml_snapshot", "gpus")
        # One GPU entry but its MIG table (read apart, through cffi, for MIG GPUs only).
        self.entry_end = ffi.offsetof("pn_nvml_gpu", "mig")
        self.pids_offset = ffi.offsetof("pn_nvml_snapshot", "process_pid")
        self.used_offset = ffi.offsetof("pn_nvml_snapshot", "process_used")
        self.pairs_offset = ffi.offsetof("pn_nvml_snapshot", "pairs")
        self.uint_size = ffi.sizeof("unsigned int")
        self.ull_size = ffi.sizeof("unsigned long long")
        self.int_size = ffi.sizeof("int")
        # The C side writes every field read here: no need to clear ~300 KB per call.
        self.new = ffi.new_allocator(should_clear_after_alloc=False)
        self.ffi = ffi


def _text(raw: bytes) -> str | None:
    return raw.partition(b"\0")[0].decode("utf-8", "replace") or None


def _error(code: int, function: bytes, detail: str) -> NVMLError | None:
    return None if code == 0 else nvml_error(code, _text(function) or "?", detail)


def _mig(ffi: Any, m: Any, gpu_index: int, processes: list[tuple[int, int | None]]) -> RawMig:
    slot = m.slot
    detail = f"GPU {gpu_index} MIG slot {slot}"
    procs = m.procs
    return RawMig(
        slot,
        _text(ffi.string(m.uuid)),
        _text(ffi.string(m.name)),
        m.memory_total if m.has_memory else None,
        m.gpu_instance_id if m.gpu_instance_id >= 0 else None,
        m.compute_instance_id if m.compute_instance_id >= 0 else None,
        _error(m.error.code, ffi.string(m.error.function), detail),
        m.memory_used if m.has_memory else None,
        processes[procs.first : procs.first + procs.count] if procs.read else None,
        procs.total,
    )


def _peers(links: bytes, count: int, layout: _Layout) -> dict[int, int]:
    """Direct NVLinks per peer GPU index, from the GPU's nvlink_to bytes."""
    if links == layout.no_links:
        return {}
    return {j: n for j, n in enumerate(layout.links[count].unpack_from(links)) if n}


# What a position made last: from which entry bytes and sysfs, the stretch of the process
# table that was its own, the (pid, memory) list found there, and the Accelerator.
_Made = tuple[bytes, str, slice | None, list[Any] | None, Accelerator]


class CffiReader:
    """Reads snapshots through the compiled extension, keeping what it can reuse.

    Per reader (never in the module): the layout measured from the compiled module, the
    struct each thread reads into (a fresh 300 KB costs the C call its page faults), and
    the bytes last read with what they decoded to: each GPU's identity and entry, the
    process table and the pair table. A read whose bytes compare equal hands out the same
    records again.
    """

    def __init__(self) -> None:
        self.assembler = Assembler()
        self._layout: _Layout | None = None
        self._outputs = threading.local()
        self._last_processes: tuple[tuple[bytes, bytes], list[tuple[int, int | None]]] = (
            (b"", b""),
            [],
        )
        self._last_pairs: tuple[bytes, list[int]] = (b"", [])
        self._identities: dict[int, tuple[bytes, tuple[Any, ...]]] = {}
        self._made: dict[int, _Made] = {}

    def read(self, library: str, sysfs: str) -> RawNode:
        """Read the host facts and this node's NVML view through the compiled extension.

        Args:
            library: Path or soname of libnvidia-ml to ``dlopen``.
            sysfs: Where sysfs is mounted.
        """
        if native_module is None:
            raise nvml_error(
                NVML_ERROR_LIBRARY_NOT_FOUND,
                "placement_native._native",
                "the extension is not loaded",
            )
        ffi, lib = native_module.ffi, native_module.lib
        layout = self._layout or _Layout(ffi, lib)
        self._layout = layout
        out = self._output(layout)
        lib.pn_nvml_snapshot_read(library.encode(), sysfs.encode(), out)
        buffer = ffi.buffer(out)
        hostname, cpus, numa_nodes, route_ip, code, function, detail, *rest = (
            layout.head.unpack_from(buffer)
        )
        node = RawNode(
            hostname.partition(b"\0")[0].decode("utf-8", "replace"),
            cpus,
            numa_nodes,
            route_ip.partition(b"\0")[0].decode() or None,
        )
        if code:
            text = detail.partition(b"\0")[0].decode("utf-8", "replace")
            node.error = _error(code, function, text)
            return node
        driver, node.device_count, n = rest
        node.driver = _text(driver)
        pair_count, process_count = layout.counts.unpack_from(buffer, layout.counts_offset)
        processes = self._process_pairs(buffer, process_count, layout)
        size, start, end = layout.gpu_size, layout.gpus_offset, layout.entry_end
        made, gpus = self._made, node.gpus
        for i in range(n):
            at = start + i * size
            entry = buffer[at : at + end]
            last = made.get(i)
            if last is not None and last[0] == entry and last[1] == sysfs:
                own = last[2]
                if own is None or processes[own] == last[3]:
                    gpus.append(last[4])
                    continue
            gpus.append(
                self._gpu(i, entry, n, processes, out=out, sysfs=sysfs, last=last, layout=layout)
            )
        node.pairs = self._pairs(buffer, pair_count, layout)
        return node

    def close(self) -> NVMLError | None:
        """Give back the NVML session the extension holds for the process (``nvmlShutdown``).

        Returns:
            The shutdown's failure, or None (also when none was held).
        """
        if native_module is None:
            return None
        code = native_module.lib.pn_nvml_release()
        return None if code == 0 else nvml_error(code, "nvmlShutdown")

    def forget(self) -> None:
        """Drop the held session without shutting it down (in a forked child)."""
        if native_module is not None:
            native_module.lib.pn_nvml_forget()

    def holds(self) -> bool:
        """Whether the extension holds an NVML session for this process."""
        return native_module is not None and bool(native_module.lib.pn_nvml_held())

    def _output(self, layout: _Layout) -> Any:
        out = getattr(self._outputs, "out", None)
        if out is None:
            out = self._outputs.out = layout.new("pn_nvml_snapshot *")
        return out

    def _process_pairs(
        self, buffer: Any, count: int, layout: _Layout
    ) -> list[tuple[int, int | None]]:
        """(pid, used memory or None) of every process listed, all devices together: the
        same list as the last read's while the table's bytes are the same."""
        pids_at, used_at = layout.pids_offset, layout.used_offset
        key = (
            buffer[pids_at : pids_at + count * layout.uint_size],
            buffer[used_at : used_at + count * layout.ull_size],
        )
        last = self._last_processes
        if key == last[0]:
            return last[1]
        used = cast("list[int | None]", memoryview(key[1]).cast("Q").tolist())
        if NVML_VALUE_NOT_AVAILABLE in used:
            used = [None if u == NVML_VALUE_NOT_AVAILABLE else u for u in used]
        pairs = list(zip(memoryview(key[0]).cast("I").tolist(), used))  # noqa: B905 (count each)
        self._last_processes = (key, pairs)
        return pairs

    def _pairs(self, buffer: Any, count: int, layout: _Layout) -> list[int]:
        """The pair table, flat (five ints a pair): the same list while its bytes are."""
        at = layout.pairs_offset
        raw = buffer[at : at + 5 * count * layout.int_size]
        if raw != self._last_pairs[0]:
            self._last_pairs = (raw, memoryview(raw).cast("i").tolist())
        return self._last_pairs[1]

    def _identity(self, index: int, raw: bytes, count: int, layout: _Layout) -> tuple[Any, ...]:
        """What a GPU is (name, UUID, bus id, NUMA node, CPUs, capability, MIG mode,
        NVLinks, fabric), decoded from its identity bytes (the caller looked for them among
        those kept first); kept per GPU index with them."""
        name, uuid, bus_id, numa, has_cpus, cpus, cc_major, cc_minor, mig_mode, *rest = (
            layout.identity.unpack_from(raw)
        )
        mig_slots, links, nvswitch_links, has_fabric, *fabric = rest
        peers = _peers(links, count, layout)
        mask = int.from_bytes(cpus, _BYTEORDER) if has_cpus else None
        cluster, status, clique, state, health = fabric
        made: Fabric | None = (
            fabric_record(cluster, clique, state, status, health) if has_fabric else None
        )
        # Driver strings that are not UTF-8 become U+FFFD, as the pure-Python backend has it.
        identity = (
            name.partition(b"\0")[0].decode("utf-8", "replace") or None,
            uuid.partition(b"\0")[0].decode("utf-8", "replace") or None,
            bus_id.partition(b"\0")[0].decode("utf-8", "replace") or None,
            numa if numa >= 0 else None,
            mask,
            self.assembler.cpulist(mask),
            (cc_major, cc_minor) if cc_major >= 0 else None,
            bool(mig_mode),
            mig_slots,
            peers,
            tuple(peers.items()),  # ascending by index, as _peers builds it
            nvswitch_links,
            made,
        )
        self._identities[index] = (raw, identity)
        return identity

    def _gpu(
        self,
        i: int,
        entry: bytes,
        count: int,
        processes: list[tuple[int, int | None]],
        *,
        out: Any,
        sysfs: str,
        last: _Made | None,
        layout: _Layout,
    ) -> RawGpu | Accelerator:
        """GPU ``i`` decoded from its entry's bytes (``last``: what this position made
        last): its Accelerator when nothing about it is left to check, else its RawGpu."""
        (
            index,
            has_handle,
            code,
            function,
            has_memory,
            memory,
            used,
            procs_read,
            procs_first,
            procs_count,
            procs_total,
            mig_count,
        ) = layout.gpu.unpack_from(entry)
        error = None if code == 0 else nvml_error(code, _text(function) or "?", f"GPU {index}")
        if not has_handle:
            return RawGpu(index, error)
        raw_identity = entry[layout.identity_start : layout.identity_end]
        known = self._identities.get(index)
        if known is not None and known[0] == raw_identity:
            identity = known[1]
        else:
            identity = self._identity(index, raw_identity, count, layout)
        name, uuid, bus_id, numa, cpu_mask, cpus, cc, mig_mode, mig_slots, *rest = identity
        peers, peer_links, links, fabric = rest
        own = slice(procs_first, procs_first + procs_count) if procs_read else None
        listed = None if own is None else processes[own]
        if (
            error is None
            and not mig_count
            and mig_slots <= MAX_MIG
            and (listed is None or procs_total <= procs_count)
        ):
            if last is not None and listed is not None and listed == last[3]:
                records = last[4].processes
            else:
                records = process_records(listed)
            if numa is not None and cpus is not None:  # the usual case: fields in table order
                made = make_accelerator(
                    index,
                    "nvidia",
                    name,
                    uuid,
                    bus_id,
                    memory if has_memory else None,
                    numa,
                    cpus,
                    cc,
                    mig_mode,
                    (),
                    peer_links,
                    links,
                    None,
                    used if has_memory else None,
                    records,
                    fabric,
                )
                self._made[i] = (entry, sysfs, own, listed, made)
                return made
            made = accelerator(  # NUMA node or CPUs from sysfs where NVML could not tell
                index,
                error=None,
                name=name,
                uuid=uuid,
                bus_id=bus_id,
                memory_total=memory if has_memory else None,
                numa=numa,
                cpus=cpus,
                compute_capability=cc,
                mig_mode=mig_mode,
                migs=(),
                nvlink_peers=peer_links,
                nvswitch_links=links,
                memory_used=used if has_memory else None,
                processes=records,
                fabric=fabric,
                sysfs=sysfs,
            )
            self._made[i] = (entry, sysfs, own, listed, made)
            return made
        self._made.pop(i, None)
        gpu = RawGpu(
            index,
            error,
            name,
            uuid,
            bus_id,
            memory if has_memory else None,
            numa,
            cpu_mask,
            cc,
            mig_mode,
            mig_slots,
            [],
            dict(peers) if peers else {},
            links,
            used if has_memory else None,
            listed,
            procs_total,
            fabric,
        )
        if mig_count:
            mig = out.gpus[i].mig
            gpu.migs = [_mig(layout.ffi, mig[k], index, processes) for k in range(mig_count)]
        return gpu
