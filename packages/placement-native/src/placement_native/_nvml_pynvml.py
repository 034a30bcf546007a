"""The pure-Python backend: the same NVML calls as the C code, through nvidia-ml-py.

It mirrors ``nvml_snapshot.c`` call for call (same symbols, same order, same handling of
"not supported" and of a lost GPU), so both backends produce the same ``RawNode``.

pynvml keeps its library and function pointers in module globals and loads
``libnvidia-ml.so.1`` by name. To point it at the configured library without changing
``pynvml`` for anyone else in the process, this backend runs a private copy of the module
(``placement_native._pynvml``, loaded from nvidia-ml-py's own file) and sets that copy's
library. Every pynvml exception stops here: it becomes an ``NVMLError`` in the record.
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib.util
import re
import sys
import threading
from collections.abc import Callable
from typing import Any

from . import _host
from ._assemble import Assembler
from ._fields import PYNVML_QUERIES, fabric_record, position
from ._model import Fabric
from ._raw import (
    MAX_GPUS,
    MAX_MIG,
    MAX_PROCESSES,
    NVML_GPU_IS_LOST,
    NVML_VALUE_NOT_AVAILABLE,
    OPTIONAL_ABSENT,
    PROCESS_CAP,
    PROCESS_FIRST,
    PROCESS_SYMBOLS,
    PROCESS_TRIES,
    REQUIRED_SYMBOLS,
    RawGpu,
    RawMig,
    RawNode,
)
from .errors import NVMLError, nvml_error

__all__ = ["PynvmlReader"]

NVML_ERROR_INVALID_ARGUMENT = 2
NVML_ERROR_NOT_SUPPORTED = 3
NVML_ERROR_NOT_FOUND = 6
NVML_ERROR_INSUFFICIENT_SIZE = 7
NVML_ERROR_LIBRARY_NOT_FOUND = 12
NVML_ERROR_FUNCTION_NOT_FOUND = 13
NVML_AFFINITY_SCOPE_NODE = 0
NVML_P2P_CAPS_INDEX_READ = 0
NVML_DEVICE_MIG_ENABLE = 1
NVML_FEATURE_ENABLED = 1
NVLINK_DEVICE_TYPE_GPU = 0
NVLINK_DEVICE_TYPE_SWITCH = 2
# The capacities of the C struct, so both backends cut at the same place.
CPUSET_WORDS = 64
MAX_LINKS = 36
PRIVATE_NAME = "placement_native._pynvml"
# NVML_STRUCT_VERSION(Memory, 2): sizeof(nvmlMemory_v2_t) | 2 << 24, as nvml.h has it.
NVML_MEMORY_V2 = 40 | 2 << 24


class _ProcessInfoV1(ctypes.Structure):
    """nvmlProcessInfo_v1_t: what the unversioned process list function fills."""

    _fields_ = (("pid", ctypes.c_uint), ("usedGpuMemory", ctypes.c_ulonglong))


class _ProcessInfoV2(ctypes.Structure):
    """nvmlProcessInfo_v2_t, also the nvmlProcessInfo_t of the _v3 function."""

    _fields_ = (
        ("pid", ctypes.c_uint),
        ("usedGpuMemory", ctypes.c_ulonglong),
        ("gpuInstanceId", ctypes.c_uint),
        ("computeInstanceId", ctypes.c_uint),
    )


# nvidia-ml-py's module is one per process (the private copy included): one lock for all.
class _FabricInfo(ctypes.Structure):
    """nvmlGpuFabricInfo_t: what the legacy nvmlDeviceGetGpuFabricInfo fills."""

    _fields_ = (
        ("clusterUuid", ctypes.c_ubyte * 16),
        ("status", ctypes.c_int),
        ("cliqueId", ctypes.c_uint),
        ("state", ctypes.c_ubyte),
    )


class _FabricInfoV(ctypes.Structure):
    """nvmlGpuFabricInfo_v3_t; its first fields are nvmlGpuFabricInfo_v2_t."""

    _fields_ = (
        ("version", ctypes.c_uint),
        ("clusterUuid", ctypes.c_ubyte * 16),
        ("status", ctypes.c_int),
        ("cliqueId", ctypes.c_uint),
        ("state", ctypes.c_ubyte),
        ("healthMask", ctypes.c_uint),
        ("healthSummary", ctypes.c_ubyte),
    )


# NVML_STRUCT_VERSION(GpuFabricInfo, 3) and (.., 2): the size in the low bytes, the
# version in the top one (v2 ends after healthMask: 36 bytes).
FABRIC_INFO_V3 = ctypes.sizeof(_FabricInfoV) | 3 << 24
FABRIC_INFO_V2 = (_FabricInfoV.healthMask.offset + 4) | 2 << 24
NVML_ERROR_ARGUMENT_VERSION_MISMATCH = 25
# nvmlGpuFabricState_t of a GPU outside any NVLink fabric (answered with NVML_SUCCESS).
NVML_GPU_FABRIC_STATE_NOT_SUPPORTED = 0

_lock = threading.Lock()


class _Absent:
    """Marker for "this query gave no value"."""


ABSENT = _Absent()


class _Target:
    """Where a query's failure is recorded: a GPU or a MIG instance, plus its message detail."""

    __slots__ = ("detail", "record")

    def __init__(self, record: RawGpu | RawMig, detail: str) -> None:
        self.record = record
        self.detail = detail

    @property
    def lost(self) -> bool:
        error = self.record.error
        return error is not None and error.code == NVML_GPU_IS_LOST

    def fail(self, code: int, function: str) -> None:
        if code not in OPTIONAL_ABSENT and self.record.error is None:
            self.record.error = nvml_error(code, function, self.detail)


def _private_pynvml() -> Any:
    """Our own instance of nvidia-ml-py's ``pynvml`` module (made once), so that loading a
    library into it leaves the ``pynvml`` other code imports untouched.

    Raises:
        ImportError: nvidia-ml-py is not installed, or ``pynvml`` is not its one-file
            module.
    """
    loaded = sys.modules.get(PRIVATE_NAME)
    if loaded is not None:
        return loaded
    spec = importlib.util.find_spec("pynvml")
    if spec is None or spec.origin is None or spec.submodule_search_locations is not None:
        where = "not installed" if spec is None else f"found at {spec.origin}, not a module file"
        raise ImportError(f"nvidia-ml-py's pynvml module is {where}")
    private = importlib.util.spec_from_file_location(PRIVATE_NAME, spec.origin)
    if private is None or private.loader is None:
        raise ImportError(f"cannot load pynvml from {spec.origin}")
    module = importlib.util.module_from_spec(private)
    # pynvml looks itself up in sys.modules while it loads (to add its error classes).
    sys.modules[PRIVATE_NAME] = module
    try:
        private.loader.exec_module(module)
    except BaseException:
        del sys.modules[PRIVATE_NAME]
        raise
    return module


def _str(value: Any) -> str | None:
    """Text as the C backend decodes it: invalid UTF-8 becomes U+FFFD, never an error."""
    if isinstance(value, bytes):
        value = value.decode("utf-8", "replace")
    return str(value) or None


def _raw_bytes(function: Callable[..., Any]) -> Callable[..., Any]:
    """A pynvml string query without its strict ``bytes.decode()`` (the undecorated
    function behind ``convertStrBytes``), so ``_str`` decodes the bytes."""
    return getattr(function, "__wrapped__", function)


def _field(struct: Any, name: str) -> Any:
    """A field of a pynvml structure as ctypes gives it: pynvml's own attribute access
    decodes char arrays strictly, which raises on bytes that are not UTF-8."""
    if isinstance(struct, ctypes.Structure):
        return ctypes.Structure.__getattribute__(struct, name)
    return getattr(struct, name)


def _bus_id(pci: Any) -> str | None:
    return _str(_field(pci, "busId")) or _str(_field(pci, "busIdLegacy"))


_BUS_ID = re.compile(
    r"([0-9a-fA-F]{1,8}):([0-9a-fA-F]{1,8}):([0-9a-fA-F]{1,8})\.([0-9a-fA-F]{1,8})"
)


def _bus_key(
    bus_id: str | None, cache: dict[str, tuple[int, ...] | None]
) -> tuple[int, ...] | None:
    """A bus id as numbers, so ids compare whatever their case or domain width (as
    ``bus_key`` in C); None when it does not parse."""
    if bus_id is None:
        return None
    if bus_id in cache:
        return cache[bus_id]
    match = _BUS_ID.fullmatch(bus_id)
    key = None if match is None else tuple(int(part, 16) for part in match.groups())
    if key is not None and max(key[1:]) > 0xFF:
        key = None
    cache[bus_id] = key
    return key


_BUS = position("pci_bus_id")
_PEERS, _SWITCH_LINKS = position("nvlink_peers"), position("nvswitch_links")

NvLinks = tuple[dict[int, int], int]  # direct links per peer GPU index, links into NVSwitches


def _match_nvlinks(gpus: list[RawGpu], links: list[list[tuple[str, int | None]]]) -> list[NvLinks]:
    """Count each GPU's active NVLinks per peer GPU and into the NVSwitch fabric, and set
    the GPU's NVLink fields.

    A link ends at a peer when the far bus id is a GPU of this node (and the driver does
    not say otherwise); at the fabric when the far end is an NVSwitch, or, on drivers that
    cannot tell, anything that is not a GPU of this node (as ``match_nvlinks`` in C).
    """
    cache: dict[str, tuple[int, ...] | None] = {}
    keys: dict[tuple[int, ...], int] = {}
    for gpu in gpus:
        key = _bus_key(gpu.values[_BUS], cache)
        if key is not None:
            keys.setdefault(key, gpu.index)
    matched = []
    for gpu, gpu_links in zip(gpus, links, strict=True):
        peers: dict[int, int] = {}
        switch_links = 0
        for remote, kind in gpu_links:
            key = _bus_key(remote, cache)
            peer = None if key is None else keys.get(key)
            if kind == NVLINK_DEVICE_TYPE_SWITCH or (kind is None and peer is None):
                switch_links += 1
            elif peer is not None and peer != gpu.index and kind in (NVLINK_DEVICE_TYPE_GPU, None):
                peers[peer] = peers.get(peer, 0) + 1
        gpu.values[_PEERS] = tuple(sorted(peers.items()))
        gpu.values[_SWITCH_LINKS] = switch_links
        matched.append((peers, switch_links))
    return matched


# Wrappers that return driver text: called undecorated, their bytes decoded by ``_str``.
_STRING_QUERIES = frozenset({"nvmlDeviceGetName", "nvmlDeviceGetUUID"})


class _Bindings:
    """The pynvml module, where a wrapper this nvidia-ml-py release lacks raises
    FUNCTION_NOT_FOUND when called, as a symbol the driver lacks does."""

    def __init__(self, module: Any) -> None:
        self._module = module
        self.NVMLError = module.NVMLError

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._module, name, None)
        if name in _STRING_QUERIES and value is not None:
            value = _raw_bytes(value)
        if value is None:
            error = self._module.NVMLError

            def value(*args: Any) -> Any:
                raise error(NVML_ERROR_FUNCTION_NOT_FOUND)

        setattr(self, name, value)
        return value


class _Reader:
    """One snapshot's worth of pynvml calls.

    A GPU is read by the queries ``ACCELERATOR_FIELDS`` names (``PYNVML_QUERIES``), each a
    method here that answers the value of the one field naming it, or the values of the
    fields naming it (a tuple, in table order) or None to leave them absent; they run in
    the order of the C calls.
    """

    def __init__(self, nv: Any, cpulist: Callable[[int | None], str | None]) -> None:
        self.nv = _Bindings(nv)
        self.cpulist = cpulist
        self.process_count = 0  # processes listed so far, all devices together
        self.process_function: tuple[str, Any, type[ctypes.Structure]] | None = None
        self.links: list[list[tuple[str, int | None]]] = []  # per GPU read, as nvlinks() found
        for symbol, v2 in PROCESS_SYMBOLS:
            try:
                function = nv._nvmlGetFunctionPointer(symbol)
            except nv.NVMLError:  # this driver lacks it
                continue
            self.process_function = (symbol, function, _ProcessInfoV2 if v2 else _ProcessInfoV1)
            break

    def gpu(self, index: int) -> tuple[RawGpu, Any]:
        """GPU ``index`` and its handle (None where it has none, or was lost)."""
        gpu = RawGpu.absent(index)
        t = _Target(gpu, f"GPU {index}")
        self.links.append([])
        dev = self.query(
            t, "nvmlDeviceGetHandleByIndex_v2", self.nv.nvmlDeviceGetHandleByIndex, index
        )
        if dev is ABSENT:
            return gpu, None
        values = gpu.values
        for read, row, rows in _QUERIES:
            got = read(self, dev, gpu, t)
            if row is not None:
                values[row] = got
            elif got is not None:
                for k, value in zip(rows, got, strict=True):
                    values[k] = value
        return gpu, (None if t.lost else dev)

    def name(self, dev: Any, gpu: RawGpu, t: _Target) -> str | None:
        name: str | None = _opt(
            _str, self.query(t, "nvmlDeviceGetName", self.nv.nvmlDeviceGetName, dev)
        )
        return name

    def uuid(self, dev: Any, gpu: RawGpu, t: _Target) -> str | None:
        uuid: str | None = _opt(
            _str, self.query(t, "nvmlDeviceGetUUID", self.nv.nvmlDeviceGetUUID, dev)
        )
        return uuid

    def pci_bus_id(self, dev: Any, gpu: RawGpu, t: _Target) -> str | None:
        pci = self.query(t, "nvmlDeviceGetPciInfo_v3", self.nv.nvmlDeviceGetPciInfo_v3, dev)
        return None if pci is ABSENT else _bus_id(pci)

    def compute_capability(self, dev: Any, gpu: RawGpu, t: _Target) -> tuple[int, int] | None:
        nv = self.nv
        cc = self.query(
            t, "nvmlDeviceGetCudaComputeCapability", nv.nvmlDeviceGetCudaComputeCapability, dev
        )
        return None if cc is ABSENT else (int(cc[0]), int(cc[1]))

    def memory(self, dev: Any, gpu: RawGpu | RawMig, t: _Target) -> tuple[int, int] | None:
        """(total, used) memory: nvmlDeviceGetMemoryInfo_v2 where the driver has and
        answers it, else the v1 function (as ``read_memory`` in C)."""
        nv = self.nv
        if not t.lost:
            try:
                mem = nv.nvmlDeviceGetMemoryInfo(dev, NVML_MEMORY_V2)
            except nv.NVMLError as exc:
                if exc.value not in OPTIONAL_ABSENT:
                    t.fail(exc.value, "nvmlDeviceGetMemoryInfo_v2")
                    return None
            else:
                return int(mem.total), int(mem.used)
        mem = self.query(t, "nvmlDeviceGetMemoryInfo", nv.nvmlDeviceGetMemoryInfo, dev)
        return None if mem is ABSENT else (int(mem.total), int(mem.used))

    def processes(self, dev: Any, t: _Target) -> tuple[list[tuple[int, int | None]], int] | None:
        """The compute processes of one device and NVML's count of them, asked as
        ``read_processes`` in C asks: room for ``PROCESS_FIRST``, then again with the count
        NVML reports while it answers INSUFFICIENT_SIZE (``PROCESS_TRIES`` calls at most,
        never past ``PROCESS_CAP``); None when not listed."""
        if self.process_function is None or t.lost:
            return None
        symbol, function, entry = self.process_function
        count = ctypes.c_uint(PROCESS_FIRST)
        offered, rc = 0, NVML_ERROR_INSUFFICIENT_SIZE
        infos: Any = None
        for _ in range(PROCESS_TRIES):
            if rc != NVML_ERROR_INSUFFICIENT_SIZE or count.value > PROCESS_CAP:
                break
            offered = count.value
            infos = (entry * offered)()
            rc = function(dev, ctypes.byref(count), infos)
        if rc != 0:
            t.fail(rc, symbol)
            return None
        listed = min(count.value, offered)
        room = MAX_PROCESSES - self.process_count
        entries = [infos[k] for k in range(min(listed, room))]
        self.process_count += len(entries)
        pairs = [
            (int(e.pid), None if e.usedGpuMemory == NVML_VALUE_NOT_AVAILABLE else e.usedGpuMemory)
            for e in entries
        ]
        return pairs, listed

    def query(self, target: _Target, function: str, call: Callable[..., Any], *args: Any) -> Any:
        """Call one pynvml query; a failure other than "not supported" is the target's error."""
        if target.lost:
            return ABSENT
        try:
            return call(*args)
        except self.nv.NVMLError as exc:
            target.fail(exc.value, function)
            return ABSENT

    def numa_and_cpus(self, dev: Any, gpu: RawGpu, t: _Target) -> tuple[int | None, str | None]:
        """The GPU's NUMA node and its CPUs (as ``read_numa_and_cpus`` in C)."""
        nv = self.nv
        numa = None
        node = self.query(t, "nvmlDeviceGetNumaNodeId", nv.nvmlDeviceGetNumaNodeId, dev)
        if node is not ABSENT:
            numa = int(node)
        else:
            nodes = self.query(
                t,
                "nvmlDeviceGetMemoryAffinity",
                nv.nvmlDeviceGetMemoryAffinity,
                dev,
                CPUSET_WORDS,
                NVML_AFFINITY_SCOPE_NODE,
            )
            if nodes is not ABSENT:
                for w, word in enumerate(int(x) for x in nodes):
                    if word:
                        numa = w * 64 + (word & -word).bit_length() - 1
                        break
        mask = self.query(
            t,
            "nvmlDeviceGetCpuAffinityWithinScope",
            nv.nvmlDeviceGetCpuAffinityWithinScope,
            dev,
            CPUSET_WORDS,
            NVML_AFFINITY_SCOPE_NODE,
        )
        if mask is ABSENT:
            mask = self.query(
                t, "nvmlDeviceGetCpuAffinity", nv.nvmlDeviceGetCpuAffinity, dev, CPUSET_WORDS
            )
        if mask is ABSENT:
            return numa, None
        return numa, self.cpulist(sum(int(word) << (64 * w) for w, word in enumerate(mask)))

    def mig_and_processes(
        self, dev: Any, gpu: RawGpu, t: _Target
    ) -> tuple[bool, list[RawMig] | tuple[()], list[tuple[int, int | None]] | None]:
        """MIG mode, the MIG devices, and the GPU's processes where it is not in MIG mode
        (as ``read_mig`` then ``read_processes`` in C)."""
        nv = self.nv
        mode = self.query(t, "nvmlDeviceGetMigMode", nv.nvmlDeviceGetMigMode, dev)
        if mode is not ABSENT and int(mode[0]) == NVML_DEVICE_MIG_ENABLE:
            migs: list[RawMig] = []
            count = self.query(
                t, "nvmlDeviceGetMaxMigDeviceCount", nv.nvmlDeviceGetMaxMigDeviceCount, dev
            )
            if count is not ABSENT:
                gpu.mig_slots = int(count)
                self.mig_devices(dev, gpu.mig_slots, migs, t)
            return True, migs, None
        listed = self.processes(dev, t)
        if listed is None:
            return False, (), None
        gpu.process_total = listed[1]
        return False, (), listed[0]

    def mig_devices(self, dev: Any, slots: int, migs: list[RawMig], t: _Target) -> None:
        """The MIG devices of a GPU in MIG mode, slot by slot (as ``read_mig`` in C)."""
        nv = self.nv
        for slot in range(min(slots, MAX_MIG)):
            if t.lost:
                return
            try:
                handle = nv.nvmlDeviceGetMigDeviceHandleByIndex(dev, slot)
            except nv.NVMLError as exc:
                if exc.value == NVML_ERROR_FUNCTION_NOT_FOUND:
                    return
                if exc.value == NVML_ERROR_NOT_FOUND:
                    continue  # an unpopulated slot
                mig = RawMig(slot=slot)
                migs.append(mig)
                _Target(mig, f"{t.detail} MIG slot {slot}").fail(
                    exc.value, "nvmlDeviceGetMigDeviceHandleByIndex"
                )
                continue
            mig = RawMig(slot=slot)
            migs.append(mig)
            self.mig_device(handle, mig, _Target(mig, f"{t.detail} MIG slot {slot}"))

    def mig_device(self, handle: Any, mig: RawMig, mt: _Target) -> None:
        nv = self.nv
        mig.uuid = _opt(_str, self.query(mt, "nvmlDeviceGetUUID", nv.nvmlDeviceGetUUID, handle))
        mig.name = _opt(_str, self.query(mt, "nvmlDeviceGetName", nv.nvmlDeviceGetName, handle))
        memory = self.memory(handle, mig, mt)
        if memory is not None:
            mig.memory_total, mig.memory_used = memory
        gi = self.query(mt, "nvmlDeviceGetGpuInstanceId", nv.nvmlDeviceGetGpuInstanceId, handle)
        mig.gpu_instance_id = None if gi is ABSENT else int(gi)
        ci = self.query(
            mt, "nvmlDeviceGetComputeInstanceId", nv.nvmlDeviceGetComputeInstanceId, handle
        )
        mig.compute_instance_id = None if ci is ABSENT else int(ci)
        # Per MIG device: on the parent, NVML lists them only to privileged callers.
        listed = self.processes(handle, mt)
        if listed is not None:
            mig.processes, mig.process_total = listed

    def nvlinks(self, dev: Any, gpu: RawGpu, t: _Target) -> None:
        """The active NVLinks of one GPU: (far bus id, far device type or None), kept in
        ``links`` until every GPU is read (``_match_nvlinks`` sets the fields)."""
        nv = self.nv
        found = self.links[-1]
        for link in range(MAX_LINKS):
            if t.lost:
                return
            try:
                active = nv.nvmlDeviceGetNvLinkState(dev, link)
            except nv.NVMLError as exc:
                # NOT_SUPPORTED: no NVLink on this GPU; INVALID_ARGUMENT: past its last link.
                if exc.value not in (NVML_ERROR_NOT_SUPPORTED, NVML_ERROR_INVALID_ARGUMENT):
                    t.fail(exc.value, "nvmlDeviceGetNvLinkState")
                return
            if int(active) != NVML_FEATURE_ENABLED:
                continue
            # The far end's type first: a link into an NVSwitch needs no bus id.
            kind = self.query(
                t,
                "nvmlDeviceGetNvLinkRemoteDeviceType",
                nv.nvmlDeviceGetNvLinkRemoteDeviceType,
                dev,
                link,
            )
            remote = None if kind is ABSENT else int(kind)
            if remote == NVLINK_DEVICE_TYPE_SWITCH:
                found.append(("", remote))
                continue
            pci = self.query(
                t,
                "nvmlDeviceGetNvLinkRemotePciInfo_v2",
                nv.nvmlDeviceGetNvLinkRemotePciInfo,
                dev,
                link,
            )
            if pci is ABSENT:
                continue
            found.append((_bus_id(pci) or "", remote))
        return

    def fabric(self, dev: Any, gpu: RawGpu, t: _Target) -> Fabric | None:
        """The GPU's NVLink fabric, asked as ``read_fabric`` in C asks: the versioned call
        with struct v3, then v2 on a version mismatch, else the legacy call."""
        nv = self.nv
        for version in (FABRIC_INFO_V3, FABRIC_INFO_V2):
            if t.lost:
                return None
            info = _FabricInfoV(version=version)
            try:
                nv.nvmlDeviceGetGpuFabricInfoV(dev, ctypes.byref(info))
            except nv.NVMLError as exc:
                if exc.value == NVML_ERROR_ARGUMENT_VERSION_MISMATCH:
                    continue
                if exc.value == NVML_ERROR_FUNCTION_NOT_FOUND:
                    break  # this driver (or nvidia-ml-py) lacks it: the legacy call
                t.fail(exc.value, "nvmlDeviceGetGpuFabricInfoV")
                return None
            if info.state == NVML_GPU_FABRIC_STATE_NOT_SUPPORTED:
                return None  # a GPU outside an NVLink fabric: the driver reports none
            return fabric_record(
                bytes(info.clusterUuid), info.cliqueId, info.state, info.status, info.healthMask
            )
        legacy = _FabricInfo()
        done = self.query(
            t,
            "nvmlDeviceGetGpuFabricInfo",
            nv.nvmlDeviceGetGpuFabricInfo,
            dev,
            ctypes.byref(legacy),
        )
        if done is ABSENT or legacy.state == NVML_GPU_FABRIC_STATE_NOT_SUPPORTED:
            return None
        return fabric_record(
            bytes(legacy.clusterUuid), legacy.cliqueId, legacy.state, legacy.status, 0
        )

    def pairs(self, node: RawNode, handles: list[Any], links: list[NvLinks]) -> None:
        """Topology level, P2P status and NVLink count of every pair (as ``read_pairs``
        and ``match_nvlinks`` in C)."""
        nv = self.nv
        for i, a in enumerate(handles):
            for j in range(i + 1, len(handles)):
                b = handles[j]
                level = status = -1
                if a is not None and b is not None:
                    with contextlib.suppress(nv.NVMLError):
                        level = int(nv.nvmlDeviceGetTopologyCommonAncestor(a, b))
                    with contextlib.suppress(nv.NVMLError):
                        status = int(nv.nvmlDeviceGetP2PStatus(a, b, NVML_P2P_CAPS_INDEX_READ))
                (peers_i, switch_i), (peers_j, switch_j) = links[i], links[j]
                count = peers_i.get(j, 0) or peers_j.get(i, 0)
                if not count and switch_i and switch_j:
                    count = min(switch_i, switch_j)
                node.pairs += (i, j, level, count, status)


# The reader's method for each query of PYNVML_QUERIES, with the one row it fills (None when
# it fills several) and its rows.
_QUERIES: tuple[tuple[Callable[..., Any], int | None, tuple[int, ...]], ...] = tuple(
    (getattr(_Reader, name), rows[0] if len(rows) == 1 else None, rows)
    for name, rows in PYNVML_QUERIES
)


def _opt(convert: Callable[[Any], Any], value: Any) -> Any:
    return None if value is ABSENT else convert(value)


# What a held session answers once the driver dropped it (UNINITIALIZED,
# DRIVER_NOT_LOADED, GPU_IS_LOST): the read is worth one more try on a fresh init.
DROPPED_CODES = frozenset({1, 9, NVML_GPU_IS_LOST})


def _dropped(node: RawNode) -> bool:
    """Whether a read through a held session met a session the driver dropped."""
    if node.error is not None and node.error.code in DROPPED_CODES:
        return True
    for gpu in node.gpus:
        if not isinstance(gpu, RawGpu):
            continue
        if gpu.error is not None and gpu.error.code in DROPPED_CODES:
            return True
        if any(m.error is not None and m.error.code in DROPPED_CODES for m in gpu.migs):
            return True
    return False


class PynvmlReader:
    """Reads snapshots through nvidia-ml-py, keeping which library it loaded last and the
    NVML session it holds (initialised on first use, as the compiled backend does)."""

    def __init__(self) -> None:
        self.assembler = Assembler()
        self._loaded: tuple[str, Any] | None = None  # (path, the CDLL given to pynvml)
        self._held = False  # this reader holds one nvmlInit reference of pynvml's library

    def _load(self, pynvml: Any, library: str) -> NVMLError | None:
        loaded = self._loaded
        if loaded is not None and loaded[0] == library and pynvml.nvmlLib is loaded[1]:
            return None
        self._release(pynvml)  # the session belongs to the library being replaced
        try:
            lib = ctypes.CDLL(library)
        except OSError as exc:
            return nvml_error(NVML_ERROR_LIBRARY_NOT_FOUND, "dlopen", str(exc))
        for name in REQUIRED_SYMBOLS:
            if not hasattr(lib, name):
                return nvml_error(NVML_ERROR_FUNCTION_NOT_FOUND, name, library)
        with pynvml.libLoadLock:
            pynvml.nvmlLib = lib
            pynvml._nvmlGetFunctionPointer_cache.clear()
        self._loaded = (library, lib)
        return None

    def _acquire(self, pynvml: Any) -> NVMLError | None:
        """Initialise NVML unless held; a failed init is not kept."""
        if self._held:
            return None
        try:
            pynvml.nvmlInit()
        except pynvml.NVMLError as exc:
            return nvml_error(exc.value, "nvmlInit")
        self._held = True
        return None

    def _release(self, pynvml: Any) -> NVMLError | None:
        """Give back the held reference (``nvmlShutdown``); its failure, or None."""
        if not self._held:
            return None
        self._held = False
        try:
            pynvml.nvmlShutdown()
        except pynvml.NVMLError as exc:
            return nvml_error(exc.value, "nvmlShutdown")
        return None

    def close(self) -> NVMLError | None:
        """Give back the NVML session this reader holds (``nvmlShutdown``).

        Returns:
            The shutdown's failure, or None (also when none was held).
        """
        with _lock:
            pynvml = sys.modules.get(PRIVATE_NAME)
            return None if pynvml is None else self._release(pynvml)

    def forget(self) -> None:
        """Drop the held session without shutting it down (in a forked child)."""
        global _lock
        _lock = threading.Lock()  # another thread of the parent may have held it
        self._held = False

    def holds(self) -> bool:
        """Whether this reader holds an NVML session."""
        return self._held

    def read(self, library: str, sysfs: str) -> RawNode:
        """Read the host facts and this node's NVML view through nvidia-ml-py.

        Args:
            library: Path or soname of libnvidia-ml for pynvml to use.
            sysfs: Where sysfs is mounted.
        """
        node = RawNode(
            hostname=_host.hostname(),
            cpus=_host.cpu_count(),
            numa_nodes=_host.numa_node_count(sysfs),
            route_ip=_host.route_ipv4(),
        )
        with _lock:
            try:
                pynvml = _private_pynvml()
            except ImportError as exc:  # a broken install: report it like a missing NVML
                node.error = nvml_error(NVML_ERROR_LIBRARY_NOT_FOUND, "import pynvml", str(exc))
                return node
            node.error = self._load(pynvml, library)
            if node.error is not None:
                return node
            fresh = not self._held
            node.error = self._acquire(pynvml)
            if node.error is not None:
                return node
            _read_into(pynvml, node, self.assembler.cpulist)
            if not fresh and _dropped(node):
                # The session was dropped under us: let it go, init again, read once more.
                self._release(pynvml)
                node.gpus, node.pairs, node.driver, node.device_count = [], [], None, 0
                node.error = self._acquire(pynvml)
                if node.error is None:
                    _read_into(pynvml, node, self.assembler.cpulist)
        return node


def _read_into(pynvml: Any, node: RawNode, cpulist: Callable[[int | None], str | None]) -> None:
    """``_read_devices``, with a pynvml exception the per-device handling does not record
    as the node's error."""
    try:
        _read_devices(pynvml, node, cpulist)
    except pynvml.NVMLError as exc:
        node.error = nvml_error(exc.value, "pynvml", type(exc).__name__)


def _read_devices(pynvml: Any, node: RawNode, cpulist: Callable[[int | None], str | None]) -> None:
    try:
        node.driver = _str(_raw_bytes(pynvml.nvmlSystemGetDriverVersion)())
    except pynvml.NVMLError:
        node.driver = None
    try:
        node.device_count = int(pynvml.nvmlDeviceGetCount())
    except pynvml.NVMLError as exc:
        node.error = nvml_error(exc.value, "nvmlDeviceGetCount_v2")
        return
    reader = _Reader(pynvml, cpulist)
    gpus: list[RawGpu] = []
    handles = []
    for index in range(min(node.device_count, MAX_GPUS)):
        gpu, handle = reader.gpu(index)
        gpus.append(gpu)
        handles.append(handle)
    reader.pairs(node, handles, _match_nvlinks(gpus, reader.links))
    node.gpus.extend(gpus)
