"""The compiled backend: one call into C fills one struct; this module only unpacks it.

Reading a struct field by field through cffi costs more per GPU than the C call itself,
so each GPU entry is decoded with one ``struct.unpack_from`` over the raw buffer, its
layout (offsets, padding) taken from the compiled module at first use.
"""

from __future__ import annotations

import struct
import sys
from typing import Any

from ._backend import native_module
from ._raw import RawGpu, RawMig, RawNode
from .errors import NVMLError, nvml_error

NVML_ERROR_LIBRARY_NOT_FOUND = 12

__all__ = ["read"]

_BYTEORDER = sys.byteorder

# (field path in pn_nvml_gpu, how to decode it), in declaration order: "s" bytes of the
# field's size, "I*" an unsigned int array, else a struct format code.
_GPU_FIELDS = (
    (("index",), "I"),
    (("has_handle",), "i"),
    (("error", "code"), "i"),
    (("error", "function"), "s"),
    (("name",), "s"),
    (("uuid",), "s"),
    (("pci_bus_id",), "s"),
    (("has_memory",), "i"),
    (("memory_total",), "Q"),
    (("numa_node",), "i"),
    (("has_cpu_affinity",), "i"),
    (("cpu_affinity",), "s"),
    (("cc_major",), "i"),
    (("cc_minor",), "i"),
    (("mig_mode",), "i"),
    (("mig_count",), "I"),
    (("mig_slots",), "I"),
    (("nvlink_to",), "I*"),
    (("nvswitch_links",), "I"),
)


class _Layout:
    """How to decode the compiled structs, measured from the compiled module."""

    def __init__(self, ffi: Any, lib: Any) -> None:
        parts, position = ["="], 0
        for path, kind in _GPU_FIELDS:
            offset = ffi.offsetof("pn_nvml_gpu", *path)
            ctype: Any = ffi.typeof("pn_nvml_gpu")
            for name in path:
                ctype = dict(ctype.fields)[name].type
            size = ffi.sizeof(ctype)
            code = {"s": f"{size}s", "I*": f"{size // 4}I"}.get(kind, kind)
            if offset > position:
                parts.append(f"{offset - position}x")
            parts.append(code)
            position = offset + struct.calcsize("=" + code)
        self.gpu = struct.Struct("".join(parts))
        self.gpu_size = ffi.sizeof("pn_nvml_gpu")
        self.gpus_offset = ffi.offsetof("pn_nvml_snapshot", "gpus")
        # The C side writes every field read here: no need to clear ~300 KB per call.
        self.new = ffi.new_allocator(should_clear_after_alloc=False)


_layout: _Layout | None = None


def _text(raw: bytes) -> str | None:
    return raw.partition(b"\0")[0].decode("utf-8", "replace") or None


def _error(code: int, function: bytes, detail: str) -> NVMLError | None:
    return None if code == 0 else nvml_error(code, _text(function) or "?", detail)


def _mig(ffi: Any, m: Any, gpu_index: int) -> RawMig:
    slot = m.slot
    detail = f"GPU {gpu_index} MIG slot {slot}"
    return RawMig(
        slot=slot,
        uuid=_text(ffi.string(m.uuid)),
        name=_text(ffi.string(m.name)),
        memory_total=m.memory_total if m.has_memory else None,
        gpu_instance_id=m.gpu_instance_id if m.gpu_instance_id >= 0 else None,
        compute_instance_id=m.compute_instance_id if m.compute_instance_id >= 0 else None,
        error=_error(m.error.code, ffi.string(m.error.function), detail),
    )


def _gpu(values: tuple[Any, ...], count: int) -> RawGpu:
    index, has_handle, code, function = values[:4]
    error = None if code == 0 else nvml_error(code, _text(function) or "?", f"GPU {index}")
    if not has_handle:
        return RawGpu(index, error)
    name, uuid, bus_id, has_memory, memory, numa, has_cpus, cpus = values[4:12]
    # Driver strings that are not UTF-8 become U+FFFD, as the pure-Python backend has it.
    cc_major, cc_minor, mig_mode, _, mig_slots = values[12:17]
    peers = values[17 : 17 + count]
    return RawGpu(
        index,
        error,
        name.partition(b"\0")[0].decode("utf-8", "replace") or None,
        uuid.partition(b"\0")[0].decode("utf-8", "replace") or None,
        bus_id.partition(b"\0")[0].decode("utf-8", "replace") or None,
        memory if has_memory else None,
        numa if numa >= 0 else None,
        int.from_bytes(cpus, _BYTEORDER) if has_cpus else None,
        (cc_major, cc_minor) if cc_major >= 0 else None,
        bool(mig_mode),
        mig_slots,
        [],
        {j: n for j, n in enumerate(peers) if n} if any(peers) else {},
        values[-1],
    )


def read(library: str, sysfs: str) -> RawNode:
    """Read the host facts and this node's NVML view through the compiled extension.

    Args:
        library: Path or soname of libnvidia-ml to ``dlopen``.
        sysfs: Where sysfs is mounted.
    """
    global _layout
    if native_module is None:
        raise nvml_error(
            NVML_ERROR_LIBRARY_NOT_FOUND, "placement_native._native", "the extension is not loaded"
        )
    ffi, lib = native_module.ffi, native_module.lib
    layout = _layout or _Layout(ffi, lib)
    _layout = layout
    out = layout.new("pn_nvml_snapshot *")
    lib.pn_nvml_snapshot_read(library.encode(), sysfs.encode(), out)
    host = out.host
    node = RawNode(
        hostname=ffi.string(host.hostname).decode("utf-8", "replace"),
        cpus=host.cpus,
        numa_nodes=host.numa_nodes,
        route_ip=ffi.string(host.route_ip).decode() or None,
    )
    error = out.error
    if error.code:
        detail = ffi.string(out.detail).decode("utf-8", "replace")
        node.error = _error(error.code, ffi.string(error.function), detail)
        return node
    node.driver = _text(ffi.string(out.driver))
    shutdown = out.shutdown
    node.shutdown_error = _error(shutdown.code, ffi.string(shutdown.function), "")
    node.device_count = out.device_count
    n = out.gpu_count
    buffer = ffi.buffer(out)
    unpack_gpu, size, start = layout.gpu.unpack_from, layout.gpu_size, layout.gpus_offset
    for i in range(n):
        values = unpack_gpu(buffer, start + i * size)
        gpu = _gpu(values, n)
        if values[15]:  # mig_count
            entry = out.gpus[i]
            gpu.migs = [_mig(ffi, entry.mig[k], gpu.index) for k in range(entry.mig_count)]
        node.gpus.append(gpu)
    node.pairs = ffi.unpack(out.pairs, 5 * out.pair_count)
    return node
