"""The concrete nodes a plan is made for: their ranks, accelerators and hardware.

See docs/concepts/cluster-config.md#where-the-inventory-comes-from.

An inventory is plain frozen data. It is declared offline (``Inventory.uniform``, the
config's ``inventory:`` section, node-snapshot JSON files) or discovered live by
placement-ray; the planner does not care which.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ._errors import InventoryError
from ._limits import MAX_ACCELERATOR_INDEX, MAX_ACCELERATORS_PER_NODE, MAX_NODES
from ._scalars import is_int
from ._shown import shown

__all__ = [
    "MAX_ACCELERATORS_PER_NODE",
    "MAX_NODES",
    "Accelerator",
    "AcceleratorProcess",
    "Fabric",
    "HardwareDevice",
    "Inventory",
    "Node",
]

# Sanity bounds (re-exported from _limits, where every limit lives): far beyond any real
# cluster, low enough that a typo is an error rather than billions of records.


@dataclass(frozen=True, slots=True)
class AcceleratorProcess:
    """A compute process the node snapshot found running on an accelerator.

    Attributes:
        pid: Its process id on the node.
        used_memory_bytes: Accelerator memory it holds, or None where the driver does not
            say.
    """

    pid: int
    used_memory_bytes: int | None = None


@dataclass(frozen=True, slots=True)
class Fabric:
    """The NVLink fabric an accelerator is registered with, as its node snapshot reports it
    (rack-scale NVLink, e.g. GB200 NVL72; docs/concepts/node-snapshot.md).

    Attributes:
        cluster_uuid: The fabric's cluster UUID.
        clique_id: The clique (NVLink partition) within the cluster.
        state: ``not_supported``, ``not_started``, ``in_progress`` or ``completed``.
        status: The registration's NVML return code by name (``success``, ``not_ready``, ...).
        health_mask: NVML's fabric health mask.
    """

    cluster_uuid: str
    clique_id: int
    state: str
    status: str
    health_mask: int

    @property
    def registered(self) -> bool:
        """Whether registration finished: state ``completed`` with status ``success``."""
        return self.state == "completed" and self.status == "success"

    @property
    def domain(self) -> str:
        """The NVLink domain it names: ``<cluster_uuid>/<clique_id>``."""
        return f"{self.cluster_uuid}/{self.clique_id}"


@dataclass(frozen=True, slots=True)
class Accelerator:
    """One accelerator of a node, identified by its node-local physical ``index``.

    ``numa_node`` and ``cpu_affinity`` (a Linux CPU list such as ``0-23,96-119``) say
    which CPUs are close to it; ``memory_used_bytes`` and ``processes`` what already
    runs on it; ``fabric`` the NVLink fabric it is registered with. All come from node
    snapshots; None / empty when unknown.
    """

    index: int
    type: str = "nvidia"
    model: str | None = None
    uuid: str | None = None
    pci_bus_id: str | None = None
    memory_bytes: int | None = None
    numa_node: int | None = None
    cpu_affinity: str | None = None
    memory_used_bytes: int | None = None
    processes: tuple[AcceleratorProcess, ...] = ()
    fabric: Fabric | None = None


@dataclass(frozen=True, slots=True)
class HardwareDevice:
    """One piece of non-accelerator hardware (a robot arm, ...) attached to a node.

    ``index`` is node-local: the device's position among this node's devices of the same
    ``type``, in config order. ``config`` is the device's config entry as declared.
    """

    type: str
    index: int
    config: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Node:
    """One machine of the cluster.

    ``links`` holds ``(a, b, label)`` for pairs of accelerator indices ``a < b``: how the
    two reach each other (``NV18``, ``PIX``, ``PXB``, ``PHB``, ``NODE``, ``SYS``, as
    ``nvidia-smi topo -m`` names it); empty when unknown (inventories declared without
    node snapshots).

    ``nvlink_domain`` names the rack-scale NVLink domain the node's GPUs belong to
    (``"<cluster_uuid>/<clique_id>"`` from a snapshot's fabric info, or the name an
    ``inventory:`` entry declares); None when the node has none, in which case it forms
    a domain of its own. See docs/concepts/nvlink-domains.md.

    ``host_memory_bytes`` is the node's RAM (a snapshot's ``MemTotal``, or what an
    ``inventory:`` entry declares); None when unknown.
    """

    rank: int
    node_id: str
    hostname: str | None = None
    ip: str | None = None
    cpus: int | None = None
    accelerators: tuple[Accelerator, ...] = ()
    hardware: tuple[HardwareDevice, ...] = ()
    links: tuple[tuple[int, int, str], ...] = ()
    nvlink_domain: str | None = None
    host_memory_bytes: int | None = None

    @property
    def accelerator_type(self) -> str | None:
        """The type of this node's accelerators, or None for a node without any."""
        return self.accelerators[0].type if self.accelerators else None

    @property
    def accelerator_ids(self) -> tuple[int, ...]:
        """Physical indices of this node's accelerators, ascending."""
        return tuple(a.index for a in self.accelerators)

    @property
    def address(self) -> str:
        """How other nodes reach this one (``MASTER_ADDR``): its IP, else hostname, else id."""
        return self.ip or self.hostname or self.node_id

    @property
    def has_topology(self) -> bool:
        """Whether anything is known about links or CPU locality of the accelerators."""
        return bool(self.links) or any(
            a.numa_node is not None or a.cpu_affinity is not None for a in self.accelerators
        )


@dataclass(frozen=True, slots=True)
class Inventory:
    """Every node of the cluster, ordered by node rank (``0 .. num_nodes-1``).

    Nodes may be given in any order; they are sorted by rank, which must run exactly
    ``0 .. n-1``. Accelerators of a node are sorted by physical index.

    >>> inv = Inventory.uniform(2, 8)
    >>> inv.num_nodes, len(inv.nodes[1].accelerators)
    (2, 8)

    ``shortfalls`` says what the inventory lacks against the machines or the config (a
    snapshot that could not read its accelerators, a GPU entry left out for its error, a
    node with fewer accelerators than the config declares, a node without a snapshot);
    ``warnings`` other things its sources reported (an NVLink domain that could not be
    told). A plan on the inventory repeats both among its warnings.
    """

    nodes: tuple[Node, ...]
    warnings: tuple[str, ...] = ()
    shortfalls: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        nodes = tuple(sorted(self.nodes, key=lambda n: n.rank))
        ranks = [n.rank for n in nodes]
        if ranks != list(range(len(nodes))):
            raise InventoryError(
                f"node ranks must be exactly 0..{len(nodes) - 1} with no gaps or repeats, "
                f"got {shown(ranks)}",
                path="inventory",
            )
        # Nodes of a uniform inventory share one accelerators tuple: check it once, not
        # once per node (100,000 nodes x 1,024 accelerators would take seconds).
        checked: dict[int, tuple[Accelerator, ...]] = {}
        for node in nodes:
            done = checked.get(id(node.accelerators))
            if done is None:
                key = id(node.accelerators)
                _check_node(node)
                checked[key] = node.accelerators
            elif done is not node.accelerators:
                object.__setattr__(node, "accelerators", done)
        object.__setattr__(self, "nodes", nodes)

    @property
    def num_nodes(self) -> int:
        return len(self.nodes)

    def node(self, rank: int) -> Node:
        """The node of the given rank."""
        if not 0 <= rank < len(self.nodes):
            raise InventoryError(
                f"node rank {rank} is out of range: valid ranks are 0..{len(self.nodes) - 1}",
                path="node_rank",
            )
        return self.nodes[rank]

    @classmethod
    def uniform(
        cls,
        num_nodes: int,
        accelerators_per_node: int,
        *,
        accelerator_type: str = "nvidia",
        model: str | None = None,
    ) -> Inventory:
        """``num_nodes`` identical nodes with ``accelerators_per_node`` accelerators each."""
        if not is_int(num_nodes) or not 1 <= num_nodes <= MAX_NODES:
            raise InventoryError(
                f"expected an int from 1 to {MAX_NODES}, got {shown(num_nodes)}", path="num_nodes"
            )
        if (
            not is_int(accelerators_per_node)
            or not 0 <= accelerators_per_node <= MAX_ACCELERATORS_PER_NODE
        ):
            raise InventoryError(
                f"expected an int from 0 to {MAX_ACCELERATORS_PER_NODE}, "
                f"got {shown(accelerators_per_node)}",
                path="accelerators_per_node",
            )
        shared = tuple(
            Accelerator(index=i, type=accelerator_type, model=model)
            for i in range(accelerators_per_node)
        )
        return cls(
            tuple(Node(rank=r, node_id=f"node-{r}", accelerators=shared) for r in range(num_nodes))
        )

    def replace_nodes(self, nodes: Iterable[Node]) -> Inventory:
        """A new inventory with the given nodes substituted by rank."""
        by_rank = {n.rank: n for n in self.nodes}
        for node in nodes:
            by_rank[node.rank] = node
        return Inventory(
            tuple(by_rank.values()), warnings=self.warnings, shortfalls=self.shortfalls
        )


def _check_node(node: Node) -> None:
    where = f"inventory.nodes[{node.rank}]"
    indices = [a.index for a in node.accelerators]
    if len(set(indices)) != len(indices):
        raise InventoryError(
            f"accelerator indices repeat: {shown(indices)}", path=f"{where}.accelerators"
        )
    if indices and not (
        is_int(min(indices)) and 0 <= min(indices) <= max(indices) <= (MAX_ACCELERATOR_INDEX)
    ):
        raise InventoryError(
            f"accelerator indices run from 0 to {MAX_ACCELERATOR_INDEX:,}, got {shown(indices)}",
            path=f"{where}.accelerators",
        )
    if indices != sorted(indices):
        object.__setattr__(
            node, "accelerators", tuple(sorted(node.accelerators, key=lambda a: a.index))
        )
    types = {a.type for a in node.accelerators}
    if len(types) > 1:
        raise InventoryError(
            f"one node may hold accelerators of one type only, got {shown(sorted(types))}",
            path=f"{where}.accelerators",
        )
