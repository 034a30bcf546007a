"""The compiled backend: one call into C fills one struct; this module only unpacks it.

Turning the struct into Python records costs more than the C call, so this module does
the least it can:

- Nothing is read field by field through cffi: the snapshot's head and each GPU entry
  are decoded with one ``struct.unpack_from`` each over the raw buffer, their layout
  (offsets, padding, the members each field of ``ACCELERATOR_FIELDS`` decodes from) taken
  from the compiled module once per reader (``_Layout``).
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
import threading
from collections.abc import Sequence
from typing import Any, cast

from ._assemble import Assembler, accelerator, make_accelerator
from ._backend import native_module
from ._fields import ACCELERATOR_FIELDS, Decode, absent_values, position
from ._model import Accelerator
from ._raw import MAX_MIG, NVML_VALUE_NOT_AVAILABLE, RawGpu, RawMig, RawNode
from .errors import NVMLError, nvml_error

NVML_ERROR_LIBRARY_NOT_FOUND = 12

__all__ = ["CffiReader"]

# Members of pn_nvml_gpu the reader itself looks at, beside the fields': what it checks
# before a GPU becomes its record (``check_limits``' MIG slots and process count), and
# where the GPU's processes start in the process table (which the entry does not hold).
_FRAME_IDENTITY = ("mig_slots",)
_FRAME_STATE = ("procs.total", "procs.first")
# The fields of pn_nvml_snapshot before its GPU entries, and its counts.
_HEAD_FIELDS = (
    "host.hostname",
    "host.cpus",
    "host.numa_nodes",
    "host.route_ip",
    "error.code",
    "error.function",
    "detail",
    "driver",
    "device_count",
    "gpu_count",
)
_COUNT_FIELDS = ("pair_count", "process_count")
_PROCESSES = position("processes")
_ERROR, _INDEX = position("error"), position("index")
_NUMA, _CPUS = position("numa_node"), position("cpu_affinity")
_MIGS = position("mig_instances")


def _member(ffi: Any, type_name: str, path: str) -> tuple[int, str]:
    """(offset, ``struct`` code) of a member: bytes of its size for an array, else the
    integer of its size and signedness."""
    ctype: Any = ffi.typeof(type_name)
    for name in path.split("."):
        ctype = dict(ctype.fields)[name].type
    size = ffi.sizeof(ctype)
    if ctype.kind == "array":
        code = f"{size}s"
    else:
        code = {4: "i", 8: "q"}[size]
        code = code.upper() if ctype.cname.startswith("unsigned") else code
    return ffi.offsetof(type_name, *path.split(".")), code


def _struct(
    ffi: Any, type_name: str, paths: Sequence[str], base: int | None = None
) -> tuple[struct.Struct, dict[str, int]]:
    """A ``struct.Struct`` reading the members ``paths`` of the C struct in offset order
    (from ``base``, else the first one's offset), and each member's place in what it
    unpacks."""
    members = sorted({(*_member(ffi, type_name, p), p) for p in paths})
    parts, position = ["="], members[0][0] if base is None else base
    for offset, code, _ in members:
        if offset > position:
            parts.append(f"{offset - position}x")
        parts.append(code)
        position = offset + struct.calcsize("=" + code)
    return struct.Struct("".join(parts)), {path: k for k, (_, _, path) in enumerate(members)}


# A field as the layout decodes it: its row in the table, where its guard is in what the
# struct unpacks (None: it has none), its decode, and where its members' values are there
# (an index where there is no decode, else a slice: a field's members are adjacent).
Row = tuple[int, int | None, Decode | None, int | slice]


def _rows(places: dict[str, int], part: str) -> tuple[Row, ...]:
    """The fields of ``ACCELERATOR_FIELDS`` decoded from ``part`` of the entry."""
    rows: list[Row] = []
    for k, f in enumerate(ACCELERATOR_FIELDS):
        if not f.members or f.part != part:
            continue
        first, last = places[f.members[0]], places[f.members[-1]]
        at = first if f.decode is None else slice(first, last + 1)
        rows.append((k, None if f.guard is None else places[f.guard], f.decode, at))
    return tuple(rows)


def _members(part: str, frame: tuple[str, ...]) -> list[str]:
    """The members of ``pn_nvml_gpu`` that ``part`` of the entry is decoded from."""
    found = [*frame]
    for f in ACCELERATOR_FIELDS:
        if f.part == part and f.members:
            found += [*f.members, *([] if f.guard is None else [f.guard])]
    return found


class _Layout:
    """How to decode the compiled structs, measured from the compiled module."""

    def __init__(self, ffi: Any) -> None:
        gpu = "pn_nvml_gpu"
        # What the GPU is: the entry's bytes before has_handle; what it is doing: after.
        self.identity_end = ffi.offsetof(gpu, "has_handle")
        self.identity, places = _struct(ffi, gpu, _members("identity", _FRAME_IDENTITY), 0)
        self.identity_rows = _rows(places, "identity")
        self.mig_slots = places["mig_slots"]
        self.gpu, places = _struct(ffi, gpu, _members("state", _FRAME_STATE), 0)
        self.state_rows = _rows(places, "state")
        self.process_total, self.process_first = places["procs.total"], places["procs.first"]
        # The conversions of what the checks look at (a field's absent value converts to
        # itself: it is left as it is).
        self.fast_converts = tuple(
            (k, f.convert, f.absent)
            for k, f in enumerate(ACCELERATOR_FIELDS)
            if f.convert and k not in (_ERROR, _MIGS)  # absent where a GPU is made here
        )
        self._snapshot(ffi)
        self.ffi = ffi

    def _snapshot(self, ffi: Any) -> None:
        snap = "pn_nvml_snapshot"
        self.head = _struct(ffi, snap, _HEAD_FIELDS)[0]
        self.counts = _struct(ffi, snap, _COUNT_FIELDS)[0]
        self.counts_offset = ffi.offsetof(snap, "pair_count")
        self.gpu_size = ffi.sizeof("pn_nvml_gpu")
        self.gpus_offset = ffi.offsetof(snap, "gpus")
        # One GPU entry but its MIG table (read apart, through cffi, for MIG GPUs only).
        self.entry_end = ffi.offsetof("pn_nvml_gpu", "mig")
        self.pids_offset = ffi.offsetof(snap, "process_pid")
        self.used_offset = ffi.offsetof(snap, "process_used")
        self.pairs_offset = ffi.offsetof(snap, "pairs")
        self.uint_size = ffi.sizeof("unsigned int")
        self.ull_size = ffi.sizeof("unsigned long long")
        self.int_size = ffi.sizeof("int")
        # The C side writes every field read here: no need to clear ~300 KB per call.
        self.new = ffi.new_allocator(should_clear_after_alloc=False)


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


class _Entry:
    """The GPU entry being decoded, as a field's decode sees it (``_fields.Entry``)."""

    __slots__ = ("ffi", "index", "out", "position", "processes")

    def __init__(self, ffi: Any, out: Any, processes: list[tuple[int, int | None]]) -> None:
        self.ffi, self.out, self.processes = ffi, out, processes
        self.position = self.index = 0

    def migs(self, count: int) -> list[RawMig]:
        table = self.out.gpus[self.position].mig
        return [_mig(self.ffi, table[k], self.index, self.processes) for k in range(count)]


# What a position made last: from which entry bytes, sysfs and process table, the
# (pid, memory) list that was its own there, and the Accelerator.
_Made = tuple[
    bytes, str, list[tuple[int, int | None]], list[tuple[int, int | None]] | None, Accelerator
]


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
        self._identities: dict[int, tuple[bytes, tuple[Any, ...], int]] = {}
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
        layout = self._layout or _Layout(ffi)
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
        entry = _Entry(ffi, out, processes)
        for i in range(n):
            at = start + i * size
            raw = buffer[at : at + end]
            last = made.get(i)
            if (
                last is not None
                and last[0] == raw
                and last[1] == sysfs
                and (last[2] is processes or self._same_processes(raw, processes, last[3], layout))
            ):
                gpus.append(last[4])
                continue
            entry.position = i
            gpus.append(self._gpu(entry, raw, sysfs, layout))
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

    @staticmethod
    def _same_processes(
        raw: bytes,
        processes: list[tuple[int, int | None]],
        listed: list[tuple[int, int | None]] | None,
        layout: _Layout,
    ) -> bool:
        """Whether a GPU entry (the same bytes as last read's) finds the processes it
        listed then in this read's process table, which changed."""
        if listed is None:
            return True
        first = layout.gpu.unpack_from(raw)[layout.process_first]
        return processes[first : first + len(listed)] == listed

    def _identity(self, entry: _Entry, raw: bytes, layout: _Layout) -> tuple[tuple[Any, ...], int]:
        """What a GPU is, from its identity bytes: every field's value in table order (the
        identity fields', the others absent) and its MIG slot count, kept per GPU with its
        bytes."""
        unpacked = layout.identity.unpack_from(raw)
        values = absent_values()
        _decode(entry, unpacked, layout.identity_rows, values)
        mig_slots: int = unpacked[layout.mig_slots]
        self._identities[entry.position] = (raw, tuple(values), mig_slots)
        return tuple(values), mig_slots

    def _gpu(self, entry: _Entry, raw: bytes, sysfs: str, layout: _Layout) -> RawGpu | Accelerator:
        """A GPU decoded from its entry's bytes: its Accelerator when nothing about it is
        left to check, else its RawGpu."""
        state = layout.gpu.unpack_from(raw)
        # What it is: the last read's while its identity bytes are the same (checked here,
        # not in a call: this runs for every GPU whose entry changed).
        known = self._identities.get(entry.position)
        if known is not None and raw.startswith(known[0]):  # no copy of the identity bytes
            identity, mig_slots = known[1], known[2]
        else:
            identity, mig_slots = self._identity(entry, raw[: layout.identity_end], layout)
        values = list(identity)
        entry.index = values[_INDEX]
        for k, guard, decode, at in layout.state_rows:  # _decode, inline for the same reason
            if guard is None or state[guard]:
                values[k] = state[at] if decode is None else decode(entry, *state[at])
        listed, total = values[_PROCESSES], state[layout.process_total]
        if (
            values[_ERROR] is None
            and not values[_MIGS]
            and mig_slots <= MAX_MIG
            and (listed is None or total <= len(listed))
        ):
            for k, convert, absent in layout.fast_converts:
                value = values[k]
                if value is not absent:
                    values[k] = convert(value)
            if values[_NUMA] is None or values[_CPUS] is None:
                made = accelerator(values, sysfs)  # from sysfs where NVML could not tell
            else:
                made = make_accelerator(*values)
            self._made[entry.position] = (raw, sysfs, entry.processes, listed, made)
            return made
        self._made.pop(entry.position, None)
        return RawGpu(values, values[_ERROR], mig_slots, total)


def _decode(
    entry: _Entry, unpacked: tuple[Any, ...], rows: tuple[Row, ...], values: list[Any]
) -> None:
    """Set ``values`` (in table order) of the fields ``rows``, from what their part of the
    entry unpacked to; a field whose guard is 0 keeps the value it has (its absent one)."""
    for k, guard, decode, at in rows:
        if guard is None or unpacked[guard]:
            values[k] = unpacked[at] if decode is None else decode(entry, *unpacked[at])
