"""Accelerators a plan uses that already run someone's processes.

Node snapshots list, per accelerator, the compute processes running on it (pid and
memory). A plan made from such snapshots warns for every accelerator it places a process
on that is busy; placement-ray's ``launch`` refuses them unless told ``allow_busy=True``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ._inventory import Accelerator, AcceleratorProcess, Inventory
from ._records import Placement

__all__ = ["BusyAccelerator", "busy_accelerators"]


@dataclass(frozen=True, slots=True)
class BusyAccelerator:
    """An accelerator that a plan uses while other processes run on it.

    Attributes:
        node_rank: The node.
        hostname: The node's hostname, when known.
        index: The accelerator's node-local index.
        processes: What runs on it, as the snapshot saw it.
        components: The plan's components placed on it, in config order.
        memory_used_bytes: Memory in use on it, when known.
    """

    node_rank: int
    hostname: str | None
    index: int
    processes: tuple[AcceleratorProcess, ...]
    components: tuple[str, ...]
    memory_used_bytes: int | None = None

    def describe(self) -> str:
        """One line naming the node, the accelerator, the pids and their memory."""
        host = f" ({self.hostname})" if self.hostname else ""
        pids = ", ".join(
            f"pid {p.pid}"
            + ("" if p.used_memory_bytes is None else f" ({_size(p.used_memory_bytes)})")
            for p in self.processes
        )
        used = "" if self.memory_used_bytes is None else f"; {_size(self.memory_used_bytes)} in use"
        return (
            f"node {self.node_rank}{host} accelerator {self.index} already runs "
            f"{len(self.processes)} process{'es' if len(self.processes) != 1 else ''}: "
            f"{pids}{used} (planned for {', '.join(self.components)})"
        )


def _size(count: int) -> str:
    value = float(count)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")  # pragma: no cover


def busy_accelerators(
    inventory: Inventory, components: Mapping[str, Sequence[Placement]]
) -> tuple[BusyAccelerator, ...]:
    """Every accelerator some placement holds that already runs processes, by node and index.

    Only accelerators a process is placed on count; those a node-placed process merely
    sees do not.
    """
    idle: set[int] = set()  # ids of accelerator tuples with nothing running (shared often)
    busy: dict[tuple[int, int], Accelerator] = {}
    for node in inventory.nodes:
        if id(node.accelerators) in idle:
            continue
        found = [a for a in node.accelerators if a.processes]
        if not found:
            idle.add(id(node.accelerators))
        busy.update(((node.rank, a.index), a) for a in found)
    if not busy:
        return ()
    users: dict[tuple[int, int], list[str]] = {}
    for name, placements in components.items():
        for p in placements:
            if p.hardware_type is not None:
                continue
            for index in p.hardware_ranks:
                key = (p.node_rank, index)
                if key in busy:
                    names = users.setdefault(key, [])
                    if name not in names:
                        names.append(name)
    return tuple(
        BusyAccelerator(
            node_rank,
            inventory.nodes[node_rank].hostname,
            index,
            busy[(node_rank, index)].processes,
            tuple(names),
            busy[(node_rank, index)].memory_used_bytes,
        )
        for (node_rank, index), names in sorted(users.items())
    )
