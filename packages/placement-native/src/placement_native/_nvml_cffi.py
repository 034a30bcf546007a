"""The compiled backend: one call into C fills one struct; this module only unpacks it."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from ._backend import native_module
from ._raw import RawGpu, RawMig, RawNode
from .errors import NVMLError, nvml_error

__all__ = ["read"]

_allocators: dict[int, Any] = {}


def _new(ffi: Any, ctype: str) -> Any:
    """Allocate without clearing: the C side writes every field this module reads, and the
    struct is large enough (~300 KB) that zeroing it would cost more than the call."""
    allocate = _allocators.get(id(ffi))
    if allocate is None:
        allocate = _allocators[id(ffi)] = ffi.new_allocator(should_clear_after_alloc=False)
    return allocate(ctype)


def _error(string: Any, err: Any, detail: str) -> NVMLError | None:
    if err.code == 0:
        return None
    return nvml_error(err.code, string(err.function).decode(), detail)


def _mig(string: Any, m: Any, gpu_index: int) -> RawMig:
    slot = m.slot
    return RawMig(
        slot=slot,
        uuid=string(m.uuid).decode() or None,
        name=string(m.name).decode() or None,
        memory_total=m.memory_total if m.has_memory else None,
        gpu_instance_id=m.gpu_instance_id if m.gpu_instance_id >= 0 else None,
        compute_instance_id=m.compute_instance_id if m.compute_instance_id >= 0 else None,
        error=_error(string, m.error, f"GPU {gpu_index} MIG slot {slot}"),
    )


def _gpu(ffi: Any, g: Any, count: int) -> RawGpu:
    string = ffi.string
    index = g.index
    gpu = RawGpu(index=index, error=_error(string, g.error, f"GPU {index}"))
    if not g.has_handle:
        return gpu
    gpu.name = string(g.name).decode() or None
    gpu.uuid = string(g.uuid).decode() or None
    gpu.pci_bus_id = string(g.pci_bus_id).decode() or None
    gpu.memory_total = g.memory_total if g.has_memory else None
    numa = g.numa_node
    gpu.numa_node = numa if numa >= 0 else None
    if g.has_cpu_affinity:
        gpu.cpu_mask = int.from_bytes(ffi.buffer(g.cpu_affinity), sys.byteorder)
    if g.cc_major >= 0:
        gpu.compute_capability = (g.cc_major, g.cc_minor)
    gpu.mig_mode = bool(g.mig_mode)
    if g.mig_count:
        gpu.migs = [_mig(string, g.mig[k], index) for k in range(g.mig_count)]
    gpu.nvlink_peers = {j: n for j, n in enumerate(ffi.unpack(g.nvlink_to, count)) if n}
    gpu.nvswitch_links = g.nvswitch_links
    return gpu


def read(library: str, sysfs: Path) -> RawNode:
    """Read the host facts and this node's NVML view through the compiled extension.

    Args:
        library: Path or soname of libnvidia-ml to ``dlopen``.
        sysfs: Where sysfs is mounted.
    """
    if native_module is None:
        raise RuntimeError("the compiled backend is not loaded")
    ffi, lib = native_module.ffi, native_module.lib
    out = _new(ffi, "pn_nvml_snapshot *")
    lib.pn_nvml_snapshot_read(library.encode(), str(sysfs).encode(), out)
    host = out.host
    node = RawNode(
        hostname=ffi.string(host.hostname).decode("utf-8", "replace"),
        cpus=host.cpus,
        numa_nodes=host.numa_nodes,
        route_ip=ffi.string(host.route_ip).decode() or None,
    )
    if out.error.code:
        node.error = _error(
            ffi.string, out.error, ffi.string(out.detail).decode("utf-8", "replace")
        )
        return node
    node.driver = ffi.string(out.driver).decode() or None
    node.device_count = out.device_count
    n = out.gpu_count
    node.gpus = [_gpu(ffi, out.gpus[i], n) for i in range(n)]
    stride = lib.PN_NVML_MAX_GPUS
    topology, p2p = out.topology, out.p2p_read
    for i in range(n):
        row = i * stride
        levels = ffi.unpack(topology + row, n)
        statuses = ffi.unpack(p2p + row, n)
        for j in range(i + 1, n):
            if levels[j] >= 0:
                node.topology[(i, j)] = levels[j]
            if statuses[j] >= 0:
                node.p2p_read[(i, j)] = statuses[j]
    return node
