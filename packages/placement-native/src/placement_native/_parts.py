"""The node snapshot's small records: a process, a MIG instance, a GPU's fabric.

They are leaves: the field table (``_fields``) builds them, and ``_model``'s
``Accelerator`` holds them; both import this module, which imports neither.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields, make_dataclass
from typing import Any, TypeVar

__all__ = ["FABRIC_STATES", "Fabric", "MigInstance", "Process", "record_maker"]

_T = TypeVar("_T")


@dataclass(frozen=True, slots=True)
class Process:
    """A compute process (a CUDA context) running on an accelerator, as NVML lists it.

    Attributes:
        pid: Its process id, in the PID namespace of the NVIDIA driver (the host's, for a
            process in a container).
        used_memory_bytes: The GPU memory it uses; None where NVML cannot tell.
    """

    pid: int
    used_memory_bytes: int | None = None

    def to_dict(self) -> dict[str, Any]:
        """The process as a JSON-ready dict."""
        return {"pid": self.pid, "used_memory_bytes": self.used_memory_bytes}


def _processes_dict(processes: tuple[Process, ...] | None) -> list[dict[str, Any]] | None:
    return None if processes is None else [p.to_dict() for p in processes]


@dataclass(frozen=True, slots=True)
class MigInstance:
    """One MIG device of a MIG-enabled GPU: its own schedulable accelerator.

    Attributes:
        index: The MIG device's index on its parent GPU.
        uuid: ``MIG-...``; what ``CUDA_VISIBLE_DEVICES`` takes to select it.
        model: NVML's name for it, e.g. ``NVIDIA A100-SXM4-40GB MIG 1g.5gb``.
        memory_bytes: Memory of the instance.
        gpu_instance_id: NVML GPU instance id, or None where unsupported.
        compute_instance_id: NVML compute instance id, or None where unsupported.
        error: Why a query of this instance failed, or None.
        memory_used_bytes: Memory of the instance in use, or None where unknown.
        processes: The compute processes running on the instance; None where NVML did
            not list them.
    """

    index: int
    uuid: str | None = None
    model: str | None = None
    memory_bytes: int | None = None
    gpu_instance_id: int | None = None
    compute_instance_id: int | None = None
    error: str | None = None
    memory_used_bytes: int | None = None
    processes: tuple[Process, ...] | None = None

    def to_dict(self) -> dict[str, Any]:
        """The instance as a JSON-ready dict."""
        return {
            "index": self.index,
            "uuid": self.uuid,
            "model": self.model,
            "memory_bytes": self.memory_bytes,
            "gpu_instance_id": self.gpu_instance_id,
            "compute_instance_id": self.compute_instance_id,
            "memory_used_bytes": self.memory_used_bytes,
            "processes": _processes_dict(self.processes),
            "error": self.error,
        }


# nvmlGpuFabricState_t -> the names the snapshot gives.
FABRIC_STATES = {0: "not_supported", 1: "not_started", 2: "in_progress", 3: "completed"}


@dataclass(frozen=True, slots=True)
class Fabric:
    """The NVLink fabric a GPU is registered with (rack-scale NVLink, e.g. GB200 NVL72).

    GPUs that share ``cluster_uuid`` and ``clique_id`` reach each other over NVLink, across
    trays; a GPU whose registration is not ``completed`` with status ``success`` is not
    (yet) part of its domain.

    Attributes:
        cluster_uuid: The fabric's cluster UUID, canonical form
            (``8-4-4-4-12`` lowercase hex digits).
        clique_id: The clique (NVLink partition) within the cluster.
        state: ``not_supported``, ``not_started``, ``in_progress`` or ``completed``
            (``state_<n>`` for a value newer than this package).
        status: The registration's NVML return code by name, lowercased without its
            ``NVML_ERROR_`` / ``NVML_`` prefix (``success``, ``not_ready``, ...).
        health_mask: NVML's fabric health mask (0 where the driver has only the legacy
            call, which reports none).
    """

    cluster_uuid: str
    clique_id: int
    state: str
    status: str
    health_mask: int = 0

    @property
    def registered(self) -> bool:
        """Whether the GPU is registered: state ``completed`` with status ``success``."""
        return self.state == "completed" and self.status == "success"

    def to_dict(self) -> dict[str, Any]:
        """The fabric as a JSON-ready dict."""
        return {
            "cluster_uuid": self.cluster_uuid,
            "clique_id": self.clique_id,
            "state": self.state,
            "status": self.status,
            "health_mask": self.health_mask,
        }


def record_maker(cls: type[_T]) -> Callable[..., _T]:
    """A positional constructor for a frozen slotted dataclass that fills the slots directly.

    A frozen dataclass's ``__init__`` assigns every field through ``object.__setattr__``;
    a snapshot builds dozens of records, and that alone cost more than the whole C call.
    The maker takes every field in declaration order (no defaults) and produces the same
    object, still frozen: it is a plain (not frozen) slotted dataclass with the same fields,
    whose ``__init__`` stores each slot directly, and whose ``__post_init__`` makes the new
    object a ``cls`` by assigning ``__class__``, which CPython allows between classes of one
    layout.
    """

    def become(self: Any) -> None:
        self.__class__ = cls

    maker: Callable[..., _T] = make_dataclass(
        f"_{cls.__name__}Maker",
        [(f.name, Any) for f in fields(cls)],  # type: ignore[arg-type]
        namespace={"__post_init__": become},
        slots=True,
        eq=False,
        repr=False,
    )
    return maker
