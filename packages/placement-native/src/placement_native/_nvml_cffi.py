"""The compiled backend: one call into C fills one struct; this module only unpacks it."""

from __future__ import annotations

from typing import Any

from ._backend import native_module
from ._raw import RawGpu, RawLink, RawMig, RawNode
from .errors import NVMLError, nvml_error

__all__ = ["read"]


def _text(ffi: Any, chars: Any) -> str | None:
    value: str = ffi.string(chars).decode("utf-8", "replace")
    return value or None


def _error(ffi: Any, err: Any, detail: str) -> NVMLError | None:
    if err.code == 0:
        return None
    return nvml_error(err.code, ffi.string(err.function).decode(), detail)


def _gpu(ffi: Any, g: Any, words: int) -> RawGpu:
    index = int(g.index)
    gpu = RawGpu(index=index, error=_error(ffi, g.error, f"GPU {index}"))
    if not g.has_handle:
        return gpu
    gpu.name = _text(ffi, g.name)
    gpu.uuid = _text(ffi, g.uuid)
    gpu.pci_bus_id = _text(ffi, g.pci_bus_id)
    gpu.memory_total = int(g.memory_total) if g.has_memory else None
    gpu.numa_node = int(g.numa_node) if g.numa_node >= 0 else None
    if g.has_cpu_affinity:
        mask = ffi.unpack(g.cpu_affinity, words)
        while mask and not mask[-1]:
            mask.pop()
        gpu.cpu_mask = tuple(mask)
    if g.cc_major >= 0:
        gpu.compute_capability = (int(g.cc_major), int(g.cc_minor))
    gpu.mig_mode = bool(g.mig_mode)
    for k in range(g.mig_count):
        m = g.mig[k]
        gpu.migs.append(
            RawMig(
                slot=int(m.slot),
                uuid=_text(ffi, m.uuid),
                name=_text(ffi, m.name),
                memory_total=int(m.memory_total) if m.has_memory else None,
                gpu_instance_id=int(m.gpu_instance_id) if m.gpu_instance_id >= 0 else None,
                compute_instance_id=(
                    int(m.compute_instance_id) if m.compute_instance_id >= 0 else None
                ),
                error=_error(ffi, m.error, f"GPU {index} MIG slot {int(m.slot)}"),
            )
        )
    for k in range(g.link_count):
        link = g.links[k]
        gpu.links.append(
            RawLink(
                remote_bus_id=ffi.string(link.remote_bus_id).decode(),
                remote_type=int(link.remote_type) if link.remote_type >= 0 else None,
            )
        )
    return gpu


def read(library: str) -> RawNode:
    """Read this node's NVML view through the compiled extension.

    Args:
        library: Path or soname of libnvidia-ml to ``dlopen``.
    """
    if native_module is None:
        raise RuntimeError("the compiled backend is not loaded")
    ffi, lib = native_module.ffi, native_module.lib
    out = ffi.new("pn_nvml_snapshot *")
    lib.pn_nvml_snapshot_read(library.encode(), out)
    node = RawNode()
    if out.error.code:
        node.error = _error(ffi, out.error, ffi.string(out.detail).decode("utf-8", "replace"))
        return node
    node.driver = _text(ffi, out.driver)
    node.device_count = int(out.device_count)
    words = lib.PN_NVML_CPUSET_WORDS
    stride = lib.PN_NVML_MAX_GPUS
    n = int(out.gpu_count)
    node.gpus = [_gpu(ffi, out.gpus[i], words) for i in range(n)]
    topology, p2p = out.topology, out.p2p_read
    for i in range(n):
        for j in range(i + 1, n):
            level, status = topology[i * stride + j], p2p[i * stride + j]
            if level >= 0:
                node.topology[(i, j)] = int(level)
            if status >= 0:
                node.p2p_read[(i, j)] = int(status)
    return node
