"""The machine a fake NVML serves: GPUs, their links and MIG instances, what fails.

``Topology.render()`` writes the directive file the C library reads (``FAKE_NVML_TOPOLOGY``,
format in ``fake_nvml.c``); ``Topology.from_dict`` / ``load_topology`` read the JSON form
users write (documented in the package README and the testing guide).
"""

from __future__ import annotations

import json
import os
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from placement_native._assemble import P2P_NAMES, TOPOLOGY_LEVELS
from placement_native._model import FABRIC_STATES
from placement_native.errors import NVML_CODE_NAMES, FakeTopologyError

__all__ = [
    "FakeFabric",
    "FakeGpu",
    "FakeLink",
    "FakeMig",
    "FakeProcess",
    "Topology",
    "load_topology",
]

H100 = "NVIDIA H100 80GB HBM3"
H100_MEMORY = 85520809984

# What the C side can hold (fake_nvml.c: MAX_GPUS, MAX_MIG, MAX_LINKS, MAX_FAILS, buffers).
MAX_GPUS, MAX_MIG, MAX_LINKS, MAX_FAILS, MAX_FUNCTION = 64, 8, 36, 8, 63
U32_MAX = 2**32 - 1
U64_MAX = 2**64 - 1  # NVML_VALUE_NOT_AVAILABLE: a process's memory NVML cannot measure
MAX_PROCS = 16384  # processes of the whole node the C side holds (fake_nvml.c: MAX_PROCS)

LEVEL_VALUES = {name: value for value, name in TOPOLOGY_LEVELS.items() if name != "X"}
P2P_VALUES = {name: value for value, name in P2P_NAMES.items()}
CODE_VALUES = {name: code for code, name in NVML_CODE_NAMES.items()}
REMOTE_TYPES = {"gpu": 0, "switch": 2}  # nvmlIntNvLinkDeviceType_t
STATE_VALUES = {name: value for value, name in FABRIC_STATES.items()}
FABRIC_VERSIONS = (1, 2, 3)  # the newest nvmlGpuFabricInfo struct version a driver knows
MAX_INIT_DELAY_US = 10_000_000  # an nvmlInit of the fake costs at most 10 s


@dataclass
class FakeFabric:
    """A GPU's NVLink fabric registration, as ``nvmlDeviceGetGpuFabricInfoV`` reports it.

    Attributes:
        cluster_uuid: The fabric's cluster UUID (any form ``uuid.UUID`` reads).
        clique_id: The clique within the cluster.
        state: ``not_supported``, ``not_started``, ``in_progress`` or ``completed``.
        status: The registration's NVML return code (an int, or its name such as
            ``NVML_SUCCESS`` or ``NVML_ERROR_NOT_READY``).
        health_mask: NVML's fabric health mask.
    """

    cluster_uuid: str
    clique_id: int = 0
    state: str = "completed"
    status: int = 0
    health_mask: int = 0


@dataclass
class FakeMig:
    """One MIG instance of a GPU in MIG mode (its slot in the GPU's MIG device table)."""

    slot: int
    gpu_instance: int
    compute_instance: int
    memory: int
    uuid: str
    name: str


@dataclass
class FakeLink:
    """One NVLink of a GPU: its slot, the bus id at the far end, and what is there."""

    link: int
    remote_bus: str
    active: bool = True
    remote: Literal["gpu", "switch"] = "gpu"


@dataclass
class FakeProcess:
    """A compute process on a GPU, or on one of its MIG instances.

    Attributes:
        pid: Its process id.
        used_memory: GPU memory it uses; None answers NVML's "not available" value.
        mig_slot: The MIG slot (a ``mig_devices`` slot) it runs on; None: the GPU itself.
    """

    pid: int
    used_memory: int | None = None
    mig_slot: int | None = None


@dataclass
class FakeGpu:
    """One fake GPU; a property left None is not supported (NVML answers NOT_SUPPORTED).

    Attributes:
        fail: NVML function name -> the return code it gives for this GPU.
        memory_used: Memory in use (``nvmlMemory_v2_t.used``; the v1 call's ``used`` adds
            ``memory_reserved``, the driver's own).
        memory_reserved: Memory the driver reserves for itself.
        processes: The compute processes on the GPU and on its MIG instances, in the order
            NVML lists them; a MIG instance's memory in use is its processes' sum.
        memory_churn: Bytes by which every ``nvmlInit`` moves the memory in use, the
            GPU's and that of each process on the GPU itself (not on a MIG instance),
            starting over from the declared values before the GPU's would pass
            ``memory``: a busy GPU whose use differs from one snapshot to the next.
        process_races: How many process-list queries after each ``nvmlInit`` find one
            process more than they offer room for (``NVML_ERROR_INSUFFICIENT_SIZE``), as
            when processes start between two calls.
        fabric: The GPU's NVLink fabric; None: fabric info is NOT_SUPPORTED.
    """

    name: str = H100
    uuid: str = ""
    bus: str = ""
    memory: int = H100_MEMORY
    numa: int | None = None
    cpus: str | None = None
    compute_capability: tuple[int, int] = (9, 0)
    mig: bool | None = False
    mig_slots: int = 0
    mig_devices: list[FakeMig] = field(default_factory=list)
    nvlink_slots: int = 0
    nvlinks: list[FakeLink] = field(default_factory=list)
    fail: dict[str, int] = field(default_factory=dict)
    memory_used: int = 0
    memory_reserved: int = 0
    processes: list[FakeProcess] = field(default_factory=list)
    memory_churn: int = 0
    process_races: int = 0
    fabric: FakeFabric | None = None


@dataclass
class Topology:
    """A fake node: what its NVML answers.

    Attributes:
        gpus: The GPUs, by NVML index.
        driver: The driver version string.
        init_error: ``nvmlInit``'s return code (0: it succeeds).
        levels: PCIe level of GPU pairs ``(a, b)``: ``PIX``, ``PXB``, ``PHB``, ``NODE`` or
            ``SYS`` (pairs left out are ``SYS``).
        p2p: P2P status of GPU pairs: ``OK``, ``CNS``, ``GNS``, ``TNS``, ``DIS``, ``NS``,
            ``U`` (pairs left out are ``NS``).
        old_driver: Serve the library without the symbols newer drivers add (NUMA node id,
            memory and scoped CPU affinity, MIG, NVLink remote device type).
        numa_nodes: NUMA nodes of the fake host's sysfs; None counts those the GPUs name.
        count: The device count NVML answers whatever GPUs are described (handles past
            the described ones are INVALID_ARGUMENT); None: the number of GPUs.
        shutdown_error: ``nvmlShutdown``'s return code.
        fabric_version: The newest ``nvmlGpuFabricInfo`` struct version the driver knows
            (3; 2: a v3 request is a version mismatch; 1: every versioned request is, and
            only the legacy call answers). An ``old_driver`` has no fabric call at all.
        init_delay_us: What every ``nvmlInit`` costs, in microseconds spent busy (0; a
            real driver's init and shutdown cost about 10,000).

    Text may hold lone surrogates (``"\\udcff"``): they are written as the bytes they stand
    for, so the library serves strings that are not valid UTF-8. Text longer than NVML's
    buffers is cut as the real library's buffers would cut it.
    """

    gpus: list[FakeGpu] = field(default_factory=list)
    driver: str = "550.54.15"
    init_error: int = 0
    levels: dict[tuple[int, int], str] = field(default_factory=dict)
    p2p: dict[tuple[int, int], str] = field(default_factory=dict)
    old_driver: bool = False
    numa_nodes: int | None = None
    count: int | None = None
    shutdown_error: int = 0
    fabric_version: int = 3
    init_delay_us: int = 0

    def host_numa_nodes(self) -> int:
        """NUMA nodes the fake host reports: ``numa_nodes``, else those the GPUs name."""
        if self.numa_nodes is not None:
            return self.numa_nodes
        return max((g.numa for g in self.gpus if g.numa is not None), default=0) + 1

    def validate(self) -> None:
        """Check that the C library can serve this machine exactly as described.

        Raises:
            FakeTopologyError: naming the field, its value and what was expected.
        """
        _typed(self, "")
        _check(len(self.gpus) <= MAX_GPUS, "gpus", len(self.gpus), f"at most {MAX_GPUS} GPUs")
        processes = sum(len(g.processes) for g in self.gpus)
        _check(processes <= MAX_PROCS, "gpus", processes, f"at most {MAX_PROCS} processes in all")
        _text(self.driver, "driver", spaces=False)
        if self.count is not None:
            _check(0 <= self.count <= U32_MAX, "count", self.count, f"0..{U32_MAX}")
        for i, gpu in enumerate(self.gpus):
            _gpu_checks(gpu, f"gpus[{i}]")
        for name, pairs, known in (
            ("levels", self.levels, LEVEL_VALUES),
            ("p2p", self.p2p, P2P_VALUES),
        ):
            for (a, b), value in pairs.items():
                where = f"{name}[{a}, {b}]"
                for end in (a, b):
                    _check(
                        0 <= end < len(self.gpus),
                        where,
                        end,
                        f"GPU indexes 0..{len(self.gpus) - 1}",
                    )
                _check(value in known, where, value, f"one of {', '.join(known)}")
        if self.numa_nodes is not None:
            _check(self.numa_nodes >= 1, "numa_nodes", self.numa_nodes, "an int >= 1")
        _check(
            self.fabric_version in FABRIC_VERSIONS,
            "fabric_version",
            self.fabric_version,
            "1, 2 or 3",
        )
        _check(
            0 <= self.init_delay_us <= MAX_INIT_DELAY_US,
            "init_delay_us",
            self.init_delay_us,
            f"0..{MAX_INIT_DELAY_US} microseconds",
        )

    def render(self) -> str:
        """The directive file ``fake_nvml.c`` reads."""
        lines = [f"driver {self.driver}", f"init {self.init_error}"]
        lines.append(f"shutdown {self.shutdown_error}")
        lines.append(f"fabric_version {self.fabric_version}")
        if self.init_delay_us:
            lines.append(f"init_delay_us {self.init_delay_us}")
        if self.count is not None:
            lines.append(f"count {self.count}")
        for i, g in enumerate(self.gpus):
            lines += [f"gpu {i} name {g.name}", f"gpu {i} uuid {g.uuid}", f"gpu {i} bus {g.bus}"]
            cc = g.compute_capability
            lines += [f"gpu {i} mem {g.memory}", f"gpu {i} cc {cc[0]} {cc[1]}"]
            if g.numa is not None:
                lines.append(f"gpu {i} numa {g.numa}")
            if g.cpus is not None:
                lines.append(f"gpu {i} cpus {g.cpus}")
            if g.mig is not None:
                lines += [f"gpu {i} mig {int(g.mig)}", f"gpu {i} migslots {g.mig_slots}"]
            for m in g.mig_devices:
                lines.append(
                    f"gpu {i} migdev {m.slot} {m.gpu_instance} {m.compute_instance} "
                    f"{m.memory} {m.uuid} {m.name}"
                )
            if g.nvlink_slots:
                lines.append(f"gpu {i} links {g.nvlink_slots}")
            for k in g.nvlinks:
                kind = REMOTE_TYPES[k.remote]
                lines.append(f"gpu {i} nvlink {k.link} {int(k.active)} {kind} {k.remote_bus}")
            for function, code in g.fail.items():
                lines.append(f"gpu {i} fail {function} {code}")
            lines.append(f"gpu {i} used {g.memory_used} {g.memory_reserved}")
            for p in g.processes:
                used = "na" if p.used_memory is None else p.used_memory
                slot = "" if p.mig_slot is None else f" {p.mig_slot}"
                lines.append(f"gpu {i} proc {p.pid} {used}{slot}")
            if g.memory_churn:
                lines.append(f"gpu {i} churn {g.memory_churn}")
            if g.process_races:
                lines.append(f"gpu {i} procrace {g.process_races}")
            f = g.fabric
            if f is not None:
                lines.append(
                    f"gpu {i} fabric {uuid.UUID(f.cluster_uuid).hex} {f.clique_id} "
                    f"{STATE_VALUES[f.state]} {f.status} {f.health_mask}"
                )
        for (a, b), level in sorted(self.levels.items()):
            lines.append(f"topo {a} {b} {LEVEL_VALUES[level]}")
        for (a, b), status in sorted(self.p2p.items()):
            lines.append(f"p2p {a} {b} {P2P_VALUES[status]}")
        return "\n".join(lines) + "\n"

    def write(self, path: Path) -> Path:
        """Validate, then write the directive file to ``path``; returns ``path``."""
        self.validate()
        path.write_text(self.render(), encoding="utf-8", errors="surrogateescape")
        return path

    @classmethod
    def from_dict(cls, data: Any, *, source: str = "topology") -> Topology:
        """A topology from its JSON form (see the package README for the format).

        Args:
            data: The decoded JSON object.
            source: Names the input in error messages (a file path).

        Raises:
            FakeTopologyError: a field is unknown, missing, or of the wrong type or value.
        """
        try:
            return cls._from_dict(data)
        except FakeTopologyError as error:
            raise FakeTopologyError(f"{source}: {error}", field=error.field) from None

    @classmethod
    def _from_dict(cls, data: Any) -> Topology:
        top = _Reader(data, "")
        top.keys(
            {"gpus"},
            {
                "driver",
                "init_error",
                "shutdown_error",
                "count",
                "old_driver",
                "numa_nodes",
                "levels",
                "p2p",
                "fabric_version",
                "init_delay_us",
            },
        )
        gpus = [_gpu_from(item, index) for index, item in enumerate(top.list("gpus"))]
        topology = cls(
            gpus=gpus,
            driver=top.get("driver", str, "550.54.15"),
            init_error=_code(top.get("init_error", (int, str), 0), "init_error"),
            shutdown_error=_code(top.get("shutdown_error", (int, str), 0), "shutdown_error"),
            count=top.get("count", (int, type(None)), None),
            levels=_pairs(top, "levels"),
            p2p=_pairs(top, "p2p"),
            old_driver=top.get("old_driver", bool, False),
            numa_nodes=top.get("numa_nodes", (int, type(None)), None),
            fabric_version=top.get("fabric_version", int, 3),
            init_delay_us=top.get("init_delay_us", int, 0),
        )
        topology.validate()
        return topology


def load_topology(path: str | os.PathLike[str]) -> Topology:
    """Read a topology from a JSON file.

    Raises:
        FakeTopologyError: the file cannot be read, is not JSON, or describes no valid node.
    """
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise FakeTopologyError(f"cannot read topology file {path}: {exc}", field="") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise FakeTopologyError(
            f"topology file {path} is not JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})",
            field="",
        ) from None
    return Topology.from_dict(data, source=str(path))


# ------------------------------------------------------------------------------ checks


def _check(ok: bool, where: str, value: object, expected: str) -> None:
    if not ok:
        raise FakeTopologyError(f"{where}: expected {expected}, got {value!r}", field=where)


# The fields of each record by type: a Topology built in Python is checked for them before
# anything compares or writes its values (the JSON reader checks them as it reads).
_NONE, _TEXT, _INT = type(None), (str,), (int,)
_FIELD_TYPES: dict[type, tuple[tuple[str, tuple[type, ...], str], ...]] = {
    Topology: (
        ("driver", _TEXT, "text"),
        ("init_error", _INT, "an int"),
        ("shutdown_error", _INT, "an int"),
        ("count", (int, _NONE), "an int or None"),
        ("numa_nodes", (int, _NONE), "an int or None"),
        ("fabric_version", _INT, "an int"),
        ("init_delay_us", _INT, "an int"),
    ),
    FakeGpu: (
        ("name", _TEXT, "text"),
        ("uuid", _TEXT, "text"),
        ("bus", _TEXT, "text"),
        ("memory", _INT, "an int"),
        ("numa", (int, _NONE), "an int or None"),
        ("cpus", (str, _NONE), "text or None"),
        ("mig_slots", _INT, "an int"),
        ("nvlink_slots", _INT, "an int"),
        ("memory_used", _INT, "an int"),
        ("memory_reserved", _INT, "an int"),
        ("memory_churn", _INT, "an int"),
        ("process_races", _INT, "an int"),
        ("fabric", (FakeFabric, _NONE), "a FakeFabric or None"),
    ),
    FakeMig: (
        ("slot", _INT, "an int"),
        ("gpu_instance", _INT, "an int"),
        ("compute_instance", _INT, "an int"),
        ("memory", _INT, "an int"),
        ("uuid", _TEXT, "text"),
        ("name", _TEXT, "text"),
    ),
    FakeLink: (("link", _INT, "an int"), ("remote_bus", _TEXT, "text")),
    FakeFabric: (
        ("cluster_uuid", _TEXT, "text"),
        ("clique_id", _INT, "an int"),
        ("state", _TEXT, "text"),
        ("status", _INT, "an int"),
        ("health_mask", _INT, "an int"),
    ),
    FakeProcess: (
        ("pid", _INT, "an int"),
        ("used_memory", (int, _NONE), "an int or None"),
        ("mig_slot", (int, _NONE), "an int or None"),
    ),
}


def _typed(record: object, where: str) -> None:
    """Each field of ``record`` is of its type (a bool is no int here)."""
    for name, kinds, expected in _FIELD_TYPES[type(record)]:
        value = getattr(record, name)
        ok = isinstance(value, kinds) and not isinstance(value, bool)
        _check(ok, f"{where}.{name}" if where else name, value, expected)


def _text(value: str, where: str, *, spaces: bool = True) -> None:
    bad = "\n\r" if spaces else "\n\r \t"
    _check(
        not any(c in value for c in bad),
        where,
        value,
        "text on one line" + ("" if spaces else ", without spaces"),
    )


def _gpu_checks(gpu: FakeGpu, where: str) -> None:
    _typed(gpu, where)
    for name in ("mig_devices", "nvlinks", "processes"):
        for k, record in enumerate(getattr(gpu, name)):
            _typed(record, f"{where}.{name}[{k}]")
    _text(gpu.name, f"{where}.name")
    _text(gpu.uuid, f"{where}.uuid", spaces=False)
    _text(gpu.bus, f"{where}.bus", spaces=False)
    _check(gpu.memory >= 0, f"{where}.memory", gpu.memory, "bytes >= 0")
    if gpu.cpus is not None:
        _text(gpu.cpus, f"{where}.cpus", spaces=False)
    _check(0 <= gpu.mig_slots <= U32_MAX, f"{where}.mig_slots", gpu.mig_slots, f"0..{U32_MAX}")
    for k, mig in enumerate(gpu.mig_devices):
        at = f"{where}.mig_devices[{k}]"
        top = min(gpu.mig_slots, MAX_MIG)
        _check(
            0 <= mig.slot < top, f"{at}.slot", mig.slot, f"a slot < {top} (mig_slots, at most 8)"
        )
        _text(mig.uuid, f"{at}.uuid", spaces=False)
        _text(mig.name, f"{at}.name")
    slots = gpu.nvlink_slots
    _check(0 <= slots <= MAX_LINKS, f"{where}.nvlink_slots", slots, f"0..{MAX_LINKS}")
    for k, link in enumerate(gpu.nvlinks):
        at = f"{where}.nvlinks[{k}]"
        _check(0 <= link.link < slots, f"{at}.link", link.link, f"a link slot < {slots}")
        _check(link.remote in REMOTE_TYPES, f"{at}.remote", link.remote, "'gpu' or 'switch'")
        _text(link.remote_bus, f"{at}.remote_bus", spaces=False)
    if gpu.fabric is not None:
        _fabric_checks(gpu.fabric, f"{where}.fabric")
    _check(len(gpu.fail) <= MAX_FAILS, f"{where}.fail", len(gpu.fail), f"<= {MAX_FAILS} entries")
    _memory_checks(gpu, where)
    for function in gpu.fail:
        _check(
            len(function) <= MAX_FUNCTION and function.isidentifier(),
            f"{where}.fail",
            function,
            "an NVML function name",
        )


def _fabric_checks(fabric: FakeFabric, where: str) -> None:
    _typed(fabric, where)
    try:
        uuid.UUID(fabric.cluster_uuid)
    except ValueError:
        _check(False, f"{where}.cluster_uuid", fabric.cluster_uuid, "a UUID")
    _check(
        0 <= fabric.clique_id <= U32_MAX, f"{where}.clique_id", fabric.clique_id, f"0..{U32_MAX}"
    )
    _check(
        fabric.state in STATE_VALUES,
        f"{where}.state",
        fabric.state,
        f"one of {', '.join(STATE_VALUES)}",
    )
    _check(
        -(2**31) <= fabric.status < 2**31, f"{where}.status", fabric.status, "an NVML return code"
    )
    _check(
        0 <= fabric.health_mask <= U32_MAX,
        f"{where}.health_mask",
        fabric.health_mask,
        f"0..{U32_MAX}",
    )


def _memory_checks(gpu: FakeGpu, where: str) -> None:
    in_use = gpu.memory_used + gpu.memory_reserved
    for name, value in (("memory_used", gpu.memory_used), ("memory_reserved", gpu.memory_reserved)):
        _check(value >= 0, f"{where}.{name}", value, "bytes >= 0")
    _check(
        in_use <= gpu.memory,
        f"{where}.memory_used",
        gpu.memory_used,
        f"with memory_reserved at most memory ({gpu.memory} bytes)",
    )
    slots = {m.slot for m in gpu.mig_devices}
    for k, process in enumerate(gpu.processes):
        at = f"{where}.processes[{k}]"
        _check(0 <= process.pid <= U32_MAX, f"{at}.pid", process.pid, f"0..{U32_MAX}")
        used = process.used_memory
        _check(
            used is None or 0 <= used < U64_MAX,
            f"{at}.used_memory",
            used,
            f"bytes 0..{U64_MAX - 1}, or null for not available",
        )
        _check(
            process.mig_slot is None or process.mig_slot in slots,
            f"{at}.mig_slot",
            process.mig_slot,
            f"a slot of mig_devices ({sorted(slots)})" if slots else "null (no mig_devices)",
        )
    churn = gpu.memory_churn
    _check(0 <= churn <= gpu.memory, f"{where}.memory_churn", churn, "bytes from 0 to memory")
    for k, process in enumerate(gpu.processes):
        # A process's memory moves with the GPU's; it must not reach "not available".
        used = process.used_memory
        _check(
            not churn or used is None or used < U64_MAX - gpu.memory,
            f"{where}.processes[{k}].used_memory",
            used,
            f"bytes below {U64_MAX - gpu.memory} (2**64 - 1 - memory) with memory_churn",
        )
    _check(
        0 <= gpu.process_races <= 2**31 - 1,
        f"{where}.process_races",
        gpu.process_races,
        f"0..{2**31 - 1}",
    )


class _Reader:
    """Typed access to one JSON object, with errors that name the field."""

    def __init__(self, data: Any, where: str) -> None:
        if not isinstance(data, dict):
            raise FakeTopologyError(
                f"{where or 'top level'}: expected an object, got {type(data).__name__}",
                field=where,
            )
        self.data: dict[str, Any] = data
        self.where = where

    def at(self, key: str) -> str:
        return f"{self.where}.{key}" if self.where else key

    def keys(self, required: set[str], optional: set[str]) -> None:
        unknown = sorted(set(self.data) - required - optional)
        if unknown:
            raise FakeTopologyError(
                f"{self.where or 'top level'}: unknown field {unknown[0]!r} "
                f"(known: {', '.join(sorted(required | optional))})",
                field=self.at(unknown[0]),
            )
        missing = sorted(required - set(self.data))
        if missing:
            raise FakeTopologyError(
                f"{self.where or 'top level'}: missing field {missing[0]!r}",
                field=self.at(missing[0]),
            )

    def get(self, key: str, kind: type | tuple[type, ...], default: Any) -> Any:
        if key not in self.data:
            return default
        value = self.data[key]
        kinds = kind if isinstance(kind, tuple) else (kind,)
        wrong_bool = isinstance(value, bool) and bool not in kinds
        if wrong_bool or not isinstance(value, kinds):
            names = " or ".join(k.__name__ for k in kinds)
            raise FakeTopologyError(
                f"{self.at(key)}: expected {names}, got {value!r}", field=self.at(key)
            )
        return value

    def list(self, key: str) -> list[Any]:
        value: list[Any] = self.get(key, list, [])
        return value


def _code(value: object, where: str) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str):
        if value not in CODE_VALUES:
            raise FakeTopologyError(
                f"{where}: expected an NVML return code or name like "
                f"'NVML_ERROR_NO_PERMISSION', got {value!r}",
                field=where,
            )
        return CODE_VALUES[value]
    raise FakeTopologyError(
        f"{where}: expected an NVML return code (int) or its name, got {value!r}", field=where
    )


def _pairs(top: _Reader, key: str) -> dict[tuple[int, int], str]:
    pairs: dict[tuple[int, int], str] = {}
    for k, item in enumerate(top.list(key)):
        where = f"{top.at(key)}[{k}]"
        ok = (
            isinstance(item, list)
            and len(item) == 3
            and all(isinstance(x, int) and not isinstance(x, bool) for x in item[:2])
            and isinstance(item[2], str)
        )
        _check(ok, where, item, '[gpu_a, gpu_b, "NAME"]')
        pairs[(min(item[0], item[1]), max(item[0], item[1]))] = item[2]
    return pairs


def _gpu_from(item: Any, index: int) -> FakeGpu:
    gpu = _Reader(item, f"gpus[{index}]")
    gpu.keys(
        set(),
        {
            "name",
            "uuid",
            "bus",
            "memory",
            "numa",
            "cpus",
            "compute_capability",
            "mig",
            "mig_slots",
            "mig_devices",
            "nvlink_slots",
            "nvlinks",
            "fail",
            "memory_used",
            "memory_reserved",
            "processes",
            "memory_churn",
            "process_races",
            "fabric",
        },
    )
    cc = gpu.get("compute_capability", list, [9, 0])
    _check(
        len(cc) == 2 and all(isinstance(x, int) and not isinstance(x, bool) for x in cc),
        f"gpus[{index}].compute_capability",
        cc,
        "[major, minor]",
    )
    migs, links, processes = (
        _migs_from(gpu, index),
        _links_from(gpu, index),
        _processes_from(gpu, index),
    )
    fail_where = f"gpus[{index}].fail"
    fail = {
        str(function): _code(code, f"{fail_where}.{function}")
        for function, code in _Reader(gpu.get("fail", dict, {}), fail_where).data.items()
    }
    return FakeGpu(
        name=gpu.get("name", str, H100),
        uuid=gpu.get("uuid", str, f"GPU-{index:08x}-0000-4000-8000-{index:012x}"),
        bus=gpu.get("bus", str, f"00000000:{0x18 + index:02X}:00.0"),
        memory=gpu.get("memory", int, H100_MEMORY),
        numa=gpu.get("numa", (int, type(None)), None),
        cpus=gpu.get("cpus", (str, type(None)), None),
        compute_capability=(cc[0], cc[1]),
        mig=gpu.get("mig", (bool, type(None)), False),
        mig_slots=gpu.get("mig_slots", int, 0),
        mig_devices=migs,
        nvlink_slots=gpu.get("nvlink_slots", int, 0),
        nvlinks=links,
        fail=fail,
        memory_used=gpu.get("memory_used", int, 0),
        memory_reserved=gpu.get("memory_reserved", int, 0),
        processes=processes,
        memory_churn=gpu.get("memory_churn", int, 0),
        process_races=gpu.get("process_races", int, 0),
        fabric=_fabric_from(gpu.get("fabric", (dict, type(None)), None), f"gpus[{index}].fabric"),
    )


def _fabric_from(data: dict[str, Any] | None, where: str) -> FakeFabric | None:
    if data is None:
        return None
    f = _Reader(data, where)
    f.keys({"cluster_uuid"}, {"clique_id", "state", "status", "health_mask"})
    return FakeFabric(
        cluster_uuid=f.get("cluster_uuid", str, ""),
        clique_id=f.get("clique_id", int, 0),
        state=f.get("state", str, "completed"),
        status=_code(f.get("status", (int, str), 0), f"{where}.status"),
        health_mask=f.get("health_mask", int, 0),
    )


def _migs_from(gpu: _Reader, index: int) -> list[FakeMig]:
    migs = []
    for k, raw in enumerate(gpu.list("mig_devices")):
        m = _Reader(raw, f"gpus[{index}].mig_devices[{k}]")
        fields = {"slot", "gpu_instance", "compute_instance", "memory", "uuid", "name"}
        m.keys(fields, set())
        migs.append(
            FakeMig(
                slot=m.get("slot", int, 0),
                gpu_instance=m.get("gpu_instance", int, 0),
                compute_instance=m.get("compute_instance", int, 0),
                memory=m.get("memory", int, 0),
                uuid=m.get("uuid", str, ""),
                name=m.get("name", str, ""),
            )
        )
    return migs


def _links_from(gpu: _Reader, index: int) -> list[FakeLink]:
    links = []
    for k, raw in enumerate(gpu.list("nvlinks")):
        n = _Reader(raw, f"gpus[{index}].nvlinks[{k}]")
        n.keys({"link", "remote_bus"}, {"active", "remote"})
        links.append(
            FakeLink(
                link=n.get("link", int, 0),
                remote_bus=n.get("remote_bus", str, ""),
                active=n.get("active", bool, True),
                remote=n.get("remote", str, "gpu"),
            )
        )
    return links


def _processes_from(gpu: _Reader, index: int) -> list[FakeProcess]:
    processes = []
    for k, raw in enumerate(gpu.list("processes")):
        p = _Reader(raw, f"gpus[{index}].processes[{k}]")
        p.keys({"pid"}, {"used_memory", "mig_slot"})
        processes.append(
            FakeProcess(
                pid=p.get("pid", int, 0),
                used_memory=p.get("used_memory", (int, type(None)), None),
                mig_slot=p.get("mig_slot", (int, type(None)), None),
            )
        )
    return processes
