"""The accelerator's fields, declared once: ``ACCELERATOR_FIELDS``.

One row per attribute of ``Accelerator``, in the record's order, says all the package does
with the field:

- the record: the attribute (also its key in the JSON snapshot), whether the JSON snapshot
  carries it and how it is written there, and the value it has where nothing was read;
- the compiled backend: the members of the C struct ``pn_nvml_gpu`` it comes from, which
  stretch of the entry they lie in (``identity``: what the GPU is, decoded only when those
  bytes change; ``state``: what it is doing), the member that says whether it was read at
  all (``guard``) and how they decode;
- the nvidia-ml-py backend: the query of its reader that fills it. Rows that name one query
  take its values in table order, and the queries run in the order the table first names
  them, which is the order of the C calls (``read_gpu`` in ``nvml_snapshot.c``);
- between backend and record: ``convert``, for the few fields whose read form is looked at
  first (``check_limits``) or shared with the MIG devices.

``RawGpu`` (one value per row), ``Assembler`` and both backends follow the table; the
record's dataclass fields and the schema file's accelerator keys are checked against it
by tests. A field that is not a plain C member (the fabric: six members, one record) is one
row all the same, with a decode that takes its members.
"""

from __future__ import annotations

import sys
import uuid as _uuid
from collections.abc import Callable
from dataclasses import dataclass
from itertools import starmap
from operator import attrgetter
from typing import TYPE_CHECKING, Any, Literal, Protocol

from . import _host
from ._parts import FABRIC_STATES, Fabric, MigInstance, Process
from .errors import NVML_CODE_NAMES, NVMLError, nvml_error

if TYPE_CHECKING:
    from ._model import Accelerator

__all__ = [
    "ACCELERATOR_FIELDS",
    "PYNVML_QUERIES",
    "Entry",
    "SnapshotField",
    "absent_values",
    "accelerator_json",
    "fabric_record",
    "position",
    "process_records",
]

_BYTEORDER = sys.byteorder


class Entry(Protocol):
    """What a decode sees beside its members: the GPU entry being decoded (the compiled
    backend's reader provides it)."""

    index: int  # the GPU's NVML index
    processes: list[tuple[int, int | None]]  # the snapshot's process table, every device

    def migs(self, count: int) -> list[Any]:
        """The GPU's first ``count`` MIG devices, as ``RawMig`` records."""
        ...


Decode = Callable[..., Any]
"""``decode(entry, *members)``: the field's value from its C members, as unpacked."""


@dataclass(frozen=True, slots=True)
class SnapshotField:
    """One field of an accelerator, declared once (see ``ACCELERATOR_FIELDS``).

    Attributes:
        name: The ``Accelerator`` attribute, which is also its key in the JSON snapshot.
        absent: Its value where nothing was read (the record's default): where a GPU
            gave no handle, and where a backend read nothing for it.
        json: Whether the JSON snapshot carries it (NVLink counts go to ``links``).
        encode: How the JSON writer writes a value that is not None (None: as it is).
        members: The members of ``pn_nvml_gpu`` it is decoded from (``a.b`` for a member
            of a nested struct); none for a field no C member holds.
        part: The stretch of the C entry those members lie in: ``identity`` (before
            ``has_handle``: what the GPU is) or ``state`` (from ``has_handle``: what it is
            doing, and what failed).
        guard: A member (of the same stretch) that is 0 where the field was not read:
            then the field has its ``absent`` value, and nothing is decoded.
        decode: ``decode(entry, *members)`` (``Entry``), the value from its members as
            ``struct`` unpacks them; None takes the one member as it is.
        pynvml: The nvidia-ml-py backend's query (a method of its reader) that fills it;
            None where the reader itself does (the index, the error).
        convert: From the value a backend reads to the record's (None: the same); applied
            when a ``RawGpu`` becomes the record, after ``check_limits`` looked at it.
    """

    name: str
    absent: Any = None
    json: bool = True
    encode: Callable[[Any], Any] | None = None
    members: tuple[str, ...] = ()
    part: Literal["identity", "state"] = "state"
    guard: str | None = None
    decode: Decode | None = None
    pynvml: str | None = None
    convert: Callable[[Any], Any] | None = None


# JSON encoders.


def _cc_json(cc: tuple[int, int]) -> str:
    return f"{cc[0]}.{cc[1]}"


def _records_json(records: tuple[Any, ...]) -> list[dict[str, Any]]:
    return [r.to_dict() for r in records]


def _fabric_json(fabric: Fabric) -> dict[str, Any]:
    return fabric.to_dict()


# Decodes of C members (the compiled backend). Text is cut at its NUL; bytes that are not
# UTF-8 become U+FFFD, as the nvidia-ml-py backend has them.


def _text(entry: Entry, raw: bytes) -> str | None:
    return raw.partition(b"\0")[0].decode("utf-8", "replace") or None


def _unless_negative(entry: Entry, value: int) -> int | None:
    return value if value >= 0 else None


def _cpulist(entry: Entry, words: bytes) -> str | None:
    return _host.cpulist_from_mask(int.from_bytes(words, _BYTEORDER)) or None


def _capability(entry: Entry, major: int, minor: int) -> tuple[int, int] | None:
    return (major, minor) if major >= 0 else None


def _flag(entry: Entry, value: int) -> bool:
    return bool(value)


def _mig_table(entry: Entry, count: int) -> list[Any]:
    return entry.migs(count)


def _peers(entry: Entry, links: bytes) -> tuple[tuple[int, int], ...]:
    """Direct NVLinks per peer GPU, ascending by index, from the GPU's ``nvlink_to``."""
    if not any(links):
        return ()
    return tuple((j, n) for j, n in enumerate(memoryview(links).cast("I")) if n)


def _failure(entry: Entry, code: int, function: bytes) -> NVMLError:
    name = function.partition(b"\0")[0].decode("utf-8", "replace") or "?"
    return nvml_error(code, name, f"GPU {entry.index}")


def _listed(entry: Entry, first: int, count: int) -> list[tuple[int, int | None]]:
    return entry.processes[first : first + count]


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


def _fabric(
    entry: Entry, cluster_uuid: bytes, status: int, clique_id: int, state: int, health_mask: int
) -> Fabric:
    return fabric_record(cluster_uuid, clique_id, state, status, health_mask)


# Conversions from what a backend read to the record's value.


def _make_process(
    pid: int,
    used_memory_bytes: int | None,
    new: Any = object.__new__,
    set_pid: Any = Process.__dict__["pid"].__set__,
    set_used: Any = Process.__dict__["used_memory_bytes"].__set__,
) -> Process:
    """A ``Process`` record with its two slots set directly: a snapshot of a busy node
    makes dozens, and ``record_maker``'s two calls per record cost a third more."""
    made: Process = new(Process)
    set_pid(made, pid)
    set_used(made, used_memory_bytes)
    return made


def process_records(listed: list[tuple[int, int | None]] | None) -> tuple[Process, ...] | None:
    """The Process records of a device's (pid, used memory) list; None stays None."""
    if listed is None:
        return None
    return tuple(starmap(_make_process, listed))


def _error_text(error: NVMLError | None) -> str | None:
    return None if error is None else str(error)


def _mig_records(migs: Any) -> tuple[MigInstance, ...]:
    """The MigInstance records of a GPU's ``RawMig`` devices."""
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
        for m in migs
    )


_FABRIC_MEMBERS = (
    "fabric_cluster_uuid",
    "fabric_status",
    "fabric_clique_id",
    "fabric_state",
    "fabric_health_mask",
)

ACCELERATOR_FIELDS: tuple[SnapshotField, ...] = (
    SnapshotField("index", absent=0, members=("index",), part="identity"),
    SnapshotField("type", absent="nvidia"),
    SnapshotField("model", members=("name",), part="identity", decode=_text, pynvml="name"),
    SnapshotField("uuid", members=("uuid",), part="identity", decode=_text, pynvml="uuid"),
    SnapshotField(
        "pci_bus_id", members=("pci_bus_id",), part="identity", decode=_text, pynvml="pci_bus_id"
    ),
    SnapshotField("memory_bytes", members=("memory_total",), guard="has_memory", pynvml="memory"),
    SnapshotField(
        "numa_node",
        members=("numa_node",),
        part="identity",
        decode=_unless_negative,
        pynvml="numa_and_cpus",
    ),
    SnapshotField(
        "cpu_affinity",
        members=("cpu_affinity",),
        part="identity",
        guard="has_cpu_affinity",
        decode=_cpulist,
        pynvml="numa_and_cpus",
    ),
    SnapshotField(
        "compute_capability",
        encode=_cc_json,
        members=("cc_major", "cc_minor"),
        part="identity",
        decode=_capability,
        pynvml="compute_capability",
    ),
    SnapshotField(
        "mig",
        absent=False,
        members=("mig_mode",),
        part="identity",
        decode=_flag,
        pynvml="mig_and_processes",
    ),
    SnapshotField(
        "mig_instances",
        absent=(),
        encode=_records_json,
        members=("mig_count",),
        guard="mig_count",
        decode=_mig_table,
        pynvml="mig_and_processes",
        convert=_mig_records,
    ),
    SnapshotField(
        "nvlink_peers",
        absent=(),
        json=False,
        members=("nvlink_to",),
        part="identity",
        decode=_peers,
        pynvml="nvlinks",
    ),
    SnapshotField(
        "nvswitch_links",
        absent=0,
        json=False,
        members=("nvswitch_links",),
        part="identity",
        pynvml="nvlinks",
    ),
    SnapshotField(
        "error",
        members=("error.code", "error.function"),
        guard="error.code",
        decode=_failure,
        convert=_error_text,
    ),
    SnapshotField(
        "memory_used_bytes",
        members=("memory_used",),
        guard="has_memory",
        pynvml="memory",
    ),
    SnapshotField(
        "processes",
        encode=_records_json,
        members=("procs.first", "procs.count"),
        guard="procs.read",
        decode=_listed,
        pynvml="mig_and_processes",
        convert=process_records,
    ),
    SnapshotField(
        "fabric",
        encode=_fabric_json,
        members=_FABRIC_MEMBERS,
        part="identity",
        guard="has_fabric",
        decode=_fabric,
        pynvml="fabric",
    ),
)
"""The accelerator's fields in ``Accelerator``'s order: the record (its dataclass fields,
positional constructor included, are these, as a test checks), the JSON writer
(``Accelerator.to_dict``), the snapshot schema file (``snapshot.schema.json``, whose
accelerator keys are the ``json`` ones, as a test checks), ``RawGpu`` and both backends
follow this table."""


def position(name: str) -> int:
    """The row of field ``name`` in ``ACCELERATOR_FIELDS`` (its place in ``RawGpu.values``
    and in ``Accelerator``'s positional constructor)."""
    return _POSITIONS[name]


def absent_values() -> list[Any]:
    """Every field's ``absent`` value, in table order (a fresh list)."""
    return list(_ABSENT)


def _queries() -> tuple[tuple[str, tuple[int, ...]], ...]:
    order: dict[str, list[int]] = {}
    for k, f in enumerate(ACCELERATOR_FIELDS):
        if f.pynvml is not None:
            order.setdefault(f.pynvml, []).append(k)
    return tuple((name, tuple(rows)) for name, rows in order.items())


PYNVML_QUERIES = _queries()
"""(nvidia-ml-py query, the rows it fills) in the order the table first names each."""

_ABSENT = tuple(f.absent for f in ACCELERATOR_FIELDS)
_POSITIONS = {f.name: k for k, f in enumerate(ACCELERATOR_FIELDS)}
_JSON_NAMES = tuple(f.name for f in ACCELERATOR_FIELDS if f.json)
_JSON_ENCODERS = tuple(f.encode for f in ACCELERATOR_FIELDS if f.json)
_json_attributes = attrgetter(*_JSON_NAMES)


def accelerator_json(accelerator: Accelerator) -> dict[str, Any]:
    """The accelerator's JSON snapshot entry: its ``json`` fields, each as its row writes it."""
    return {
        name: value if value is None or encode is None else encode(value)
        for name, value, encode in zip(
            _JSON_NAMES, _json_attributes(accelerator), _JSON_ENCODERS, strict=True
        )
    }
