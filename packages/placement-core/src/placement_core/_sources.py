"""Where an offline inventory comes from.

See docs/concepts/cluster-config.md#where-the-inventory-comes-from and
docs/concepts/node-snapshot.md.

Sources, highest precedence first (live discovery is placement-ray's business):

1. node snapshots: the JSON placement-native writes on each node (see
   docs/concepts/node-snapshot.md), as files or dicts;
2. the config's ``inventory:`` section (ranges of node ranks with an accelerator type,
   model and count);
3. ``accelerators_per_node`` (the CLI's ``--accelerators-per-node N``): N nvidia
   accelerators on every node no other source describes.

Each node takes its accelerators from the first source that describes it; a node that no
source describes has none. With no source at all there is nothing to plan on and
:func:`inventory_for` raises.

Snapshots map to node ranks by a ``"node_rank"`` field when they carry one, else by the
order they are given in (the first is node 0). Either every snapshot carries a
``node_rank`` or none does. Unknown snapshot keys are allowed (newer writers add fields);
missing or mistyped known ones are errors naming the file and the field.

Snapshots are read under limits (docs/reference/limits.md): a regular file of at most
:data:`~placement_core._limits.MAX_SNAPSHOT_BYTES` bytes, at most
:data:`~placement_core._limits.MAX_ACCELERATORS_PER_NODE` accelerators (as in a config).
Nothing partial passes as whole (docs/concepts/node-snapshot.md#partial-snapshots): a
snapshot that could not read its accelerators (its ``nvml_error``, no accelerators) is
refused, naming the file, the node and the error, and so is an accelerator the snapshot
marks with an ``error`` (a device that failed a query: lost, a phantom, no permission);
``accept_partial`` plans them knowingly, as a node without accelerators or without that
one, with a warning. A node the config's ``inventory:`` declares with more accelerators
than its snapshot holds, and a node planned without a snapshot
(``allow_missing_snapshots``), are warnings. Each of these is one of the inventory's
``shortfalls``, repeated in the plan's warnings and in the message of a rule that does not
fit. A snapshot JSON with a key given twice is refused.

Each accelerator's ``fabric`` (its NVLink fabric registration) gives the node its
``nvlink_domain``, ``<cluster_uuid>/<clique_id>``, when every accelerator is registered
(state ``completed``, status ``success``) and all agree; otherwise the node has none and
the inventory warns, naming the node and why (unless no accelerator reports a fabric at
all: a PCIe or HGX node). Where the config's ``inventory:`` entries name domains too,
:mod:`placement_core._domain_source` says which wins. A fabric state or health mask that
NVML's headers do not define is refused (:mod:`placement_core._fabric`).

Non-accelerator hardware always comes from ``node_groups[*].hardware``
(:func:`attach_hardware`).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import logging
import os
from collections.abc import Callable, Iterable, Mapping, Sequence, Sized
from typing import Annotated, Any, ParamSpec, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ._config import ClusterConfig
from ._domain_source import FabricDomain, fabric_domain, merge_domains
from ._errors import InventoryError, PlacementError, PlacementRuleError
from ._fabric import FABRIC_STATES, check_health_mask
from ._files import DuplicateKey, FileRefused, read_text_file, unique_keys
from ._inventory import (
    Accelerator,
    AcceleratorProcess,
    Fabric,
    HardwareDevice,
    Inventory,
    Node,
)
from ._limits import (
    MAX_ACCELERATOR_INDEX,
    MAX_ACCELERATORS_PER_NODE,
    MAX_IDENTIFIER_CHARS,
    MAX_SNAPSHOT_BYTES,
)
from ._problems import problems_from_validation_error
from ._ranks import format_rank_list, parse_rank_list
from ._scalars import is_int
from ._shown import clipped, shown
from ._vocab import AcceleratorName

__all__ = [
    "SNAPSHOT_SCHEMA",
    "SnapshotSource",
    "attach_hardware",
    "inventory_for",
    "inventory_from_config",
    "inventory_from_snapshots",
    "node_from_snapshot",
]

logger = logging.getLogger(__name__)
_E = TypeVar("_E", bound=PlacementError)
_P = ParamSpec("_P")
_R = TypeVar("_R")

SNAPSHOT_SCHEMA = 1
"""The node-snapshot schema version this placement-core reads."""

SnapshotSource = str | os.PathLike[str] | Mapping[str, Any]
"""A snapshot: a path to a JSON file, or the parsed dict."""

_Count = Annotated[int, Field(strict=True, ge=0)]
_Index = Annotated[int, Field(strict=True, ge=0, le=MAX_ACCELERATOR_INDEX)]
_Name = Annotated[str, Field(max_length=MAX_IDENTIFIER_CHARS)]
_StrictName = Annotated[str, Field(strict=True, max_length=MAX_IDENTIFIER_CHARS)]


class _Lenient(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class _SnapshotProcess(_Lenient):
    pid: _Count
    used_memory_bytes: _Count | None = None


class _SnapshotFabric(_Lenient):
    cluster_uuid: _StrictName
    clique_id: _Count
    state: _StrictName
    status: _StrictName
    health_mask: _Count = 0


class _SnapshotAccelerator(_Lenient):
    index: _Index
    type: AcceleratorName
    model: _Name | None = None
    uuid: _Name | None = None
    pci_bus_id: _Name | None = None
    memory_bytes: _Count | None = None
    numa_node: Annotated[int, Field(strict=True)] | None = None
    cpu_affinity: str | None = None
    mig: bool = False
    error: str | None = None
    # Optional (newer writers): what already runs on the accelerator.
    memory_used_bytes: _Count | None = None
    processes: tuple[_SnapshotProcess, ...] | None = None
    fabric: _SnapshotFabric | None = None


class _Snapshot(_Lenient):
    version: Annotated[int, Field(strict=True)] = Field(alias="schema")
    hostname: _Name | None = None
    ip: _Name | None = None
    cpus: _Count | None = None
    accelerators: tuple[_SnapshotAccelerator, ...]
    links: tuple[tuple[_Count, _Count, Annotated[str, Field(strict=True)]], ...] = ()
    node_rank: _Count | None = None
    nvml_error: str | None = None
    # Optional (newer writers): the node's RAM.
    host_memory_bytes: _Count | None = None


def _snapshot_error(name: str, field: str, reason: str) -> InventoryError:
    return InventoryError(reason, path=f"{name}: {field}" if field else name)


def _read_snapshot(source: SnapshotSource, position: int) -> tuple[Mapping[str, Any], str]:
    if isinstance(source, Mapping):
        return source, f"snapshot #{position}"
    name = os.fsdecode(os.fspath(source))
    try:
        text = read_text_file(source, limit=MAX_SNAPSHOT_BYTES, what="a node snapshot (JSON)")
    except FileNotFoundError:
        raise InventoryError("no such snapshot file", path=name) from None
    except IsADirectoryError:
        raise InventoryError(
            "cannot read the snapshot: it is a directory, expected a node snapshot file",
            path=name,
        ) from None
    except FileRefused as error:
        raise InventoryError(str(error), path=name) from None
    except UnicodeDecodeError as error:
        raise InventoryError(f"cannot read the snapshot: {error}", path=name) from None
    except OSError as error:
        raise InventoryError(
            f"cannot read the snapshot: {error.strerror or error}", path=name
        ) from None
    try:
        data = json.loads(text, object_pairs_hook=unique_keys)
    except json.JSONDecodeError as error:
        raise InventoryError(
            f"invalid JSON: {error.msg}", path=f"{name}:{error.lineno}:{error.colno}"
        ) from None
    except DuplicateKey as error:
        raise InventoryError(f"invalid snapshot: {error}", path=name) from None
    except ValueError:  # an integer of more than sys.get_int_max_str_digits() digits
        raise InventoryError(
            "invalid snapshot: it holds an integer too long to read (thousands of digits)",
            path=name,
        ) from None
    except RecursionError:
        raise InventoryError("invalid snapshot: its JSON nests too deeply", path=name) from None
    if not isinstance(data, Mapping):
        raise InventoryError(
            f"expected a JSON object (a node snapshot), got {type(data).__name__}", path=name
        )
    return data, name


def _parse_snapshot(data: Mapping[str, Any], name: str) -> _Snapshot:
    version = data.get("schema")
    if version is None:
        raise _snapshot_error(name, "schema", "required key is missing (not a node snapshot?)")
    if version != SNAPSHOT_SCHEMA or isinstance(version, bool):
        raise _snapshot_error(
            name,
            "schema",
            f"unsupported snapshot schema {shown(version)}: this placement-core reads schema "
            f"{SNAPSHOT_SCHEMA}",
        )
    accelerators = data.get("accelerators")
    if isinstance(accelerators, Sized) and len(accelerators) > MAX_ACCELERATORS_PER_NODE:
        raise _snapshot_error(
            name,
            "accelerators",
            f"{len(accelerators):,} accelerators, more than {MAX_ACCELERATORS_PER_NODE:,}, the "
            "limit of one node (the same as for a config's inventory: count)",
        )
    try:
        return _Snapshot.model_validate(data)
    except ValidationError as error:
        problems = problems_from_validation_error(error, _Snapshot, root="")
        first, rest = problems[0], problems[1:]
        field = first.path.lstrip(".")
        got = "" if first.value is None else f" (got {shown(first.value)})"
        more = f"; and {len(rest)} more: " + "; ".join(str(p).lstrip(".") for p in rest[:5])
        more += f"; and {len(rest) - 5} more" if len(rest) > 5 else ""
        raise _snapshot_error(name, field, first.message + got + (more if rest else "")) from None


def node_from_snapshot(
    source: SnapshotSource, *, rank: int | None = None, accept_partial: bool = False
) -> Node:
    """Build one node from a node snapshot.

    See docs/concepts/node-snapshot.md. What the snapshot leaves out, and an NVLink domain
    that cannot be told, are logged as warnings (:func:`inventory_for` and
    :func:`inventory_from_snapshots` keep them in the inventory instead).

    Args:
        source: A path to the snapshot's JSON file, or the parsed dict.
        rank: The node's rank; None takes the snapshot's ``node_rank`` field.
        accept_partial: Plan a snapshot that could not read its accelerators as a node
            without accelerators, and leave out accelerators with an ``error``, instead
            of refusing them.

    Returns:
        The node, with ``node_id`` ``node-<rank>``, and the snapshot's hostname, ip, cpus,
        accelerators and NVLink domain.

    Raises:
        InventoryError: The snapshot cannot be read or is malformed (naming the file and
            the field), no rank is known, or (unless ``accept_partial``) it could not read
            its accelerators or lists one with an error.
    """
    data, name = _read_snapshot(source, 0 if rank is None else rank)
    snapshot = _parse_snapshot(data, name)
    if rank is None:
        rank = snapshot.node_rank
    if rank is None:
        raise _snapshot_error(name, "node_rank", "the snapshot carries no node_rank; pass rank=")
    read = _node(snapshot, rank, name, accept_partial=accept_partial)
    for warning in (*read.shortfalls, *read.warnings):
        logger.warning("%s", warning)
    return read.node


_NO_FABRIC = FabricDomain(None, False)


@dataclasses.dataclass(frozen=True, slots=True)
class _ReadNode:
    """A node read from its snapshot, with what the snapshot left out and other warnings."""

    node: Node
    shortfalls: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()
    fabric: FabricDomain = _NO_FABRIC
    #: The accelerator type the snapshot lists (those with an error included), or None.
    listed: str | None = None
    name: str = ""


def _left_out(name: str, rank: int, what: str, cause: str) -> str:
    """The one wording of a snapshot that came back short, as a shortfall: what the plan
    goes without, and why (an NVML failure of the node, or a GPU entry with an error)."""
    return f"{name}: node {rank}: planned without {what} (left out): {cause}"


def _refused(name: str, field: str, rank: int, what: str, cause: str, fix: str) -> InventoryError:
    """The same, refused (without ``accept_partial``): why, the fix, and how to accept it."""
    return _snapshot_error(
        name,
        field,
        f"node {rank}: {cause}. {fix} and take the snapshot again, "
        f"or accept the snapshot knowingly (--accept-partial, accept_partial=True) to plan "
        f"node {rank} without {what}",
    )


def _nvml_failure(snapshot: _Snapshot, rank: int, name: str, accept_partial: bool) -> list[str]:
    """The snapshot's ``nvml_error`` as a shortfall; an error when it read no accelerator."""
    if not snapshot.nvml_error:
        return []
    error = clipped(snapshot.nvml_error)
    if snapshot.accelerators:
        return [
            f"{name}: node {rank}: the snapshot reports an NVML problem beside what it read: "
            f"{error}"
        ]
    cause = f"the snapshot could not read the node's accelerators ({shown(error)})"
    if not accept_partial:
        fix = "It does not describe a node without accelerators: fix the NVIDIA driver"
        raise _refused(name, "nvml_error", rank, "accelerators", cause, fix)
    return [_left_out(name, rank, "accelerators", cause)]


def _accelerators(
    snapshot: _Snapshot, rank: int, name: str, accept_partial: bool, shortfalls: list[str]
) -> list[Accelerator]:
    seen: set[int] = set()
    accelerators = []
    for i, entry in enumerate(snapshot.accelerators):
        if entry.index in seen:
            raise _snapshot_error(
                name, f"accelerators[{i}].index", f"index {entry.index} appears twice"
            )
        seen.add(entry.index)
        if entry.error is not None:
            what = f"accelerator {entry.index}"
            cause = f"{what} failed a query when the snapshot was taken ({shown(entry.error)})"
            if not accept_partial:
                fix = "It is never planned on: fix the device (or its permissions)"
                raise _refused(name, f"accelerators[{i}].error", rank, what, cause, fix)
            shortfalls.append(_left_out(name, rank, what, cause))
            continue
        accelerators.append(_accelerator(entry, name, i))
    return accelerators


def _accelerator(entry: _SnapshotAccelerator, name: str, i: int) -> Accelerator:
    fabric = entry.fabric
    if fabric is not None:
        _check_fabric(fabric, name, f"accelerators[{i}].fabric")
    return Accelerator(
        index=entry.index,
        type=entry.type,
        model=entry.model,
        uuid=entry.uuid,
        pci_bus_id=entry.pci_bus_id,
        memory_bytes=entry.memory_bytes,
        numa_node=entry.numa_node,
        cpu_affinity=_cpu_list(entry.cpu_affinity, name, f"accelerators[{i}].cpu_affinity"),
        memory_used_bytes=entry.memory_used_bytes,
        processes=tuple(
            AcceleratorProcess(p.pid, p.used_memory_bytes) for p in entry.processes or ()
        ),
        fabric=None
        if fabric is None
        else Fabric(
            fabric.cluster_uuid, fabric.clique_id, fabric.state, fabric.status, fabric.health_mask
        ),
    )


def _check_fabric(fabric: _SnapshotFabric, name: str, field: str) -> None:
    """Refuse a fabric state or health mask that NVML's headers do not define."""
    if fabric.state not in FABRIC_STATES:
        raise _snapshot_error(
            name,
            f"{field}.state",
            f"unknown fabric state {shown(fabric.state)}: expected one of "
            f"{', '.join(FABRIC_STATES)}",
        )
    unknown = check_health_mask(fabric.health_mask)
    if unknown is not None:
        raise _snapshot_error(name, f"{field}.health_mask", unknown)


def _node(snapshot: _Snapshot, rank: int, name: str, *, accept_partial: bool) -> _ReadNode:
    shortfalls = _nvml_failure(snapshot, rank, name, accept_partial)
    types = {a.type for a in snapshot.accelerators}
    if len(types) > 1:
        raise _snapshot_error(
            name, "accelerators", f"one node may hold one accelerator type, got {sorted(types)}"
        )
    accelerators = _accelerators(snapshot, rank, name, accept_partial, shortfalls)
    found = fabric_domain(accelerators)
    warning = (
        None if found.why is None else f"{name}: node {rank} has no NVLink domain: {found.why}"
    )
    node = Node(
        rank=rank,
        node_id=f"node-{rank}",
        hostname=snapshot.hostname,
        ip=snapshot.ip,
        cpus=snapshot.cpus,
        accelerators=tuple(sorted(accelerators, key=lambda a: a.index)),
        links=_kept_links(
            _links(snapshot.links, {a.index for a in snapshot.accelerators}, name),
            {a.index for a in accelerators},
        ),
        nvlink_domain=found.domain,
        host_memory_bytes=snapshot.host_memory_bytes,
    )
    mig = [a.index for a in snapshot.accelerators if a.mig and a.error is None]
    warnings: tuple[str, ...] = () if warning is None else (warning,)
    if mig:
        warnings += (
            f"{name}: node {rank}: accelerator(s) {format_rank_list(mig)} in MIG mode are "
            "planned as whole GPUs: placement does not plan MIG instances (a process given "
            "such a GPU sees its instances only by their MIG UUIDs); disable MIG there, or "
            "leave those GPUs out of the rules",
        )
    return _ReadNode(
        node,
        tuple(shortfalls),
        warnings,
        fabric=found,
        listed=next(iter(types), None),
        name=name,
    )


def _cpu_list(text: str | None, name: str, field: str) -> str | None:
    """A snapshot's CPU list, checked to parse (``0-23,96-119``)."""
    if text is None or not text.strip():
        return None
    try:
        parse_rank_list(text)
    except PlacementError as error:
        raise _snapshot_error(
            name, field, f"expected a CPU list such as '0-23,96-119', got {shown(text)}"
        ) from error
    return text.strip()


def _links(
    links: Sequence[tuple[int, int, str]], indices: set[int], name: str
) -> tuple[tuple[int, int, str], ...]:
    """The snapshot's ``links``, checked to name pairs ``a < b`` of its accelerators."""
    seen: set[tuple[int, int]] = set()
    for i, (a, b, _) in enumerate(links):
        if a >= b:
            raise _snapshot_error(name, f"links[{i}]", f"expected a pair a < b, got [{a}, {b}]")
        missing = [x for x in (a, b) if x not in indices]
        if missing:
            raise _snapshot_error(
                name,
                f"links[{i}]",
                f"accelerator {missing[0]} is not in the snapshot's accelerators",
            )
        if (a, b) in seen:
            raise _snapshot_error(name, f"links[{i}]", f"pair [{a}, {b}] appears twice")
        seen.add((a, b))
    return tuple(links)


def _kept_links(
    links: tuple[tuple[int, int, str], ...], kept: set[int]
) -> tuple[tuple[int, int, str], ...]:
    """The links between accelerators that were kept (all of them, unless some were left
    out for their error)."""
    if all(a in kept and b in kept for a, b, _ in links):
        return links
    return tuple(link for link in links if link[0] in kept and link[1] in kept)


def _snapshot_nodes(
    snapshots: Sequence[SnapshotSource],
    num_nodes: int | None,
    *,
    accept_partial: bool,
    non_nvml: frozenset[int] = frozenset(),
) -> dict[int, _ReadNode]:
    parsed = []
    for position, source in enumerate(snapshots):
        data, name = _read_snapshot(source, position)
        parsed.append((_parse_snapshot(data, name), name))
    ranked = [name for snapshot, name in parsed if snapshot.node_rank is not None]
    if ranked and len(ranked) != len(parsed):
        unranked = [name for snapshot, name in parsed if snapshot.node_rank is None]
        raise InventoryError(
            f"some snapshots carry a node_rank ({', '.join(ranked)}) and some do not "
            f"({', '.join(unranked)}): give every snapshot a node_rank, or none and rely on "
            "their order",
            path="inventory",
        )
    nodes: dict[int, _ReadNode] = {}
    owner: dict[int, str] = {}
    for position, (snapshot, name) in enumerate(parsed):
        rank = snapshot.node_rank if snapshot.node_rank is not None else position
        if num_nodes is not None and rank >= num_nodes:
            what = f"node_rank {rank}" if ranked else f"snapshot #{position} (node {rank})"
            raise _snapshot_error(
                name,
                "node_rank" if ranked else "",
                f"{what} is out of range: the config has {num_nodes} node(s), ranks "
                f"0-{num_nodes - 1}",
            )
        if rank in owner:
            raise _snapshot_error(
                name, "node_rank", f"node {rank} already comes from snapshot {owner[rank]}"
            )
        owner[rank] = name
        # A node the config declares non-NVIDIA may fail NVML; one whose snapshot does
        # list devices is read as strictly as any other.
        lenient = rank in non_nvml and not snapshot.accelerators
        nodes[rank] = _node(snapshot, rank, name, accept_partial=accept_partial or lenient)
    _check_distinct_machines(nodes, owner)
    return nodes


def _check_distinct_machines(nodes: Mapping[int, _ReadNode], owner: Mapping[int, str]) -> None:
    """Refuse one accelerator (by its UUID) in two nodes: one machine's snapshot given
    twice (``-i a.json a.json``) would plan it as two nodes."""
    seen: dict[str, tuple[int, int]] = {}
    for rank, read in nodes.items():
        for accelerator in read.node.accelerators:
            if not accelerator.uuid:
                continue
            first = seen.setdefault(accelerator.uuid, (rank, accelerator.index))
            if first == (rank, accelerator.index):
                continue
            if first[0] == rank:
                raise _snapshot_error(
                    owner[rank],
                    f"accelerators[{accelerator.index}].uuid",
                    f"node {rank}'s accelerators {first[1]} and {accelerator.index} both have "
                    f"uuid {shown(accelerator.uuid)}: expected one UUID per device",
                )
            if first[0] != rank:
                raise _snapshot_error(
                    owner[rank],
                    f"accelerators[{accelerator.index}].uuid",
                    f"node {rank}'s {shown(accelerator.uuid)} is also node {first[0]}'s "
                    f"accelerator "
                    f"{first[1]} (snapshot {owner[first[0]]}): one machine's snapshot given "
                    "twice? expected one snapshot per machine",
                )


def inventory_from_snapshots(
    snapshots: Sequence[SnapshotSource],
    *,
    num_nodes: int | None = None,
    accept_partial: bool = False,
) -> Inventory:
    """An inventory made of node snapshots only.

    Args:
        snapshots: Paths to snapshot JSON files or parsed dicts, one per node.
        num_nodes: The cluster's node count; default: one node per snapshot.
        accept_partial: Plan snapshots that could not read their accelerators, or list one
            with an error, without them (each a shortfall of the inventory) instead of
            refusing them.

    Raises:
        InventoryError: A snapshot is malformed, two claim one rank, the snapshots do not
            cover exactly ``num_nodes`` nodes, or (unless ``accept_partial``) a snapshot
            could not read its accelerators or lists one with an error.
    """
    if not snapshots:
        raise InventoryError("expected at least one node snapshot", path="inventory")
    nodes = _snapshot_nodes(snapshots, num_nodes, accept_partial=accept_partial)
    expected = len(snapshots) if num_nodes is None else num_nodes
    missing = [r for r in range(expected) if r not in nodes]
    if missing:
        raise InventoryError(
            f"no snapshot for node(s) {', '.join(map(str, missing))}: expected one snapshot "
            f"per node 0-{expected - 1}",
            path="inventory",
        )
    return Inventory(
        tuple(read.node for read in nodes.values()),
        warnings=tuple(w for read in nodes.values() for w in read.warnings),
        shortfalls=tuple(s for read in nodes.values() for s in read.shortfalls),
    )


def _config_accelerators(config: ClusterConfig) -> dict[int, tuple[Accelerator, ...]]:
    by_rank: dict[int, tuple[Accelerator, ...]] = {}
    for entry in config.inventory:
        spec = entry.accelerators
        shared = tuple(
            Accelerator(index=i, type=spec.type, model=spec.model, memory_bytes=spec.memory_bytes)
            for i in range(spec.count)
        )
        for rank in entry.node_ranks:
            by_rank[rank] = shared
    return by_rank


def _config_domains(config: ClusterConfig) -> dict[int, str]:
    return {
        rank: entry.nvlink_domain
        for entry in config.inventory
        if entry.nvlink_domain is not None
        for rank in entry.node_ranks
    }


def _config_host_memory(config: ClusterConfig) -> dict[int, int]:
    return {
        rank: entry.host_memory_bytes
        for entry in config.inventory
        if entry.host_memory_bytes is not None
        for rank in entry.node_ranks
    }


def inventory_from_config(config: ClusterConfig) -> Inventory | None:
    """The inventory the config's ``inventory:`` section declares, or None without one.

    Nodes the section does not list have no accelerators.
    """
    if not config.inventory:
        return None
    return inventory_for(config)


def _check_count(value: object) -> int | None:
    if value is None:
        return None
    if not is_int(value) or not 0 <= value <= MAX_ACCELERATORS_PER_NODE:
        raise InventoryError(
            f"expected an integer from 0 to {MAX_ACCELERATORS_PER_NODE}, got {shown(value)}",
            path="accelerators_per_node",
        )
    return value


def inventory_for(
    config: ClusterConfig,
    *,
    snapshots: Sequence[SnapshotSource] = (),
    accelerators_per_node: int | None = None,
    allow_missing_snapshots: bool = False,
    accept_partial: bool = False,
) -> Inventory:
    """The inventory to plan ``config`` on, from every offline source.

    See docs/concepts/cluster-config.md#where-the-inventory-comes-from.

    Each node takes its accelerators from the first source that describes it: its
    snapshot (when it lists any: a snapshot sees NVML devices only, so an Ascend or Gaudi
    node's lists none), then the ``inventory:`` entry listing it, then
    ``accelerators_per_node``;
    a node no source describes has none. Its NVLink domain is its snapshot's, else the
    one its ``inventory:`` entry declares, else None. When snapshots are given, a node that has none
    and that no other source describes is an error (a forgotten snapshot would otherwise
    plan as a node without accelerators), unless ``allow_missing_snapshots``. Hardware
    is not attached here (see :func:`attach_hardware`).

    Args:
        config: The cluster config; the inventory has ``config.num_nodes`` nodes.
        snapshots: Node snapshots (paths or dicts), mapped to ranks as the module
            docstring describes.
        accelerators_per_node: nvidia accelerators for every node no other source
            describes (``--accelerators-per-node``).
        allow_missing_snapshots: Plan nodes that no source describes as nodes without
            accelerators even though snapshots were given
            (``--allow-missing-snapshots``); each is a shortfall of the inventory.
        accept_partial: Plan a snapshot that could not read its accelerators as a node
            without accelerators, and leave out accelerators a snapshot lists with an
            error, instead of refusing them (``--accept-partial``); each is a shortfall
            of the inventory.

    Returns:
        The inventory, whose ``shortfalls`` say what it lacks against the machines or the
        config (also a node the config's ``inventory:`` declares with more accelerators
        than its snapshot holds) and whose ``warnings`` name nodes whose NVLink domain
        cannot be told.

    Raises:
        InventoryError: No source was given at all, a snapshot is malformed or out of
            range, a node has no snapshot and nothing else describes it (unless
            ``allow_missing_snapshots``), ``accelerators_per_node`` is not an int
            >= 0, or (unless ``accept_partial``) a snapshot could not read its
            accelerators or lists one with an error.
    """
    per_node = _check_count(accelerators_per_node)
    if isinstance(snapshots, str | os.PathLike):
        snapshots = [snapshots]
    if not snapshots and not config.inventory and per_node is None:
        raise InventoryError(
            "nothing says which accelerators the nodes have: add an `inventory:` section to "
            "the config, pass node snapshots (placement plan --inventory node*.json) or "
            "--accelerators-per-node N (0 for CPU-only nodes)",
            path="inventory",
        )
    from_config = _config_accelerators(config)
    # NVML sees NVIDIA devices only: a node the config declares with others (Ascend, Gaudi,
    # ...) or with none (`count: 0`, a CPU-only node, which may have no NVIDIA driver at
    # all) has a snapshot that lists none, and maybe an nvml_error; both are expected.
    non_nvml = frozenset(
        r for r, accs in from_config.items() if not accs or accs[0].type != "nvidia"
    )
    read = (
        _snapshot_nodes(
            snapshots, config.num_nodes, accept_partial=accept_partial, non_nvml=non_nvml
        )
        if snapshots
        else {}
    )
    if snapshots and per_node is None and not allow_missing_snapshots:
        _check_described(config.num_nodes, read, from_config)
    fallback = tuple(Accelerator(index=i) for i in range(per_node or 0))
    domains = _config_domains(config)
    host_memory = _config_host_memory(config)
    nodes = []
    # An NVML failure on a node the config declares non-NVIDIA is no shortfall, unless the
    # snapshot does list devices: then it describes the node, and what it lost counts.
    conflicts = _vendor_conflicts(read, from_config)
    shortfalls = [
        s
        for rank, r in read.items()
        if rank not in non_nvml or r.listed is not None
        for s in r.shortfalls
    ]
    for rank in range(config.num_nodes):
        node = read[rank].node if rank in read else None
        domain = domains.get(rank)
        if node is None:
            node = Node(
                rank=rank,
                node_id=f"node-{rank}",
                accelerators=from_config.get(rank, fallback),
                nvlink_domain=domain,
                host_memory_bytes=host_memory.get(rank),
            )
        else:
            if not node.accelerators and rank in non_nvml and read[rank].listed is None:
                node = dataclasses.replace(node, accelerators=from_config[rank], links=())
            if node.host_memory_bytes is None and rank in host_memory:
                node = dataclasses.replace(node, host_memory_bytes=host_memory[rank])
        nodes.append(node)
    nodes, disagreements = merge_domains(nodes, {r: n.fabric for r, n in read.items()}, domains)
    shortfalls += _fewer_than_declared(read, from_config)
    if snapshots and per_node is None:
        shortfalls += _undescribed(config.num_nodes, read, from_config)
    return Inventory(
        tuple(nodes),
        warnings=(*conflicts, *(w for r in read.values() for w in r.warnings), *disagreements),
        shortfalls=tuple(shortfalls),
    )


def _vendor_conflicts(
    read: Mapping[int, _ReadNode], from_config: Mapping[int, tuple[Accelerator, ...]]
) -> list[str]:
    """A warning per node whose snapshot lists accelerators of another type than the
    config's ``inventory:`` entry declares (the snapshot wins)."""
    found = []
    for rank, declared in sorted(from_config.items()):
        listed = read[rank].listed if rank in read else None
        if not declared or listed is None or listed == declared[0].type:
            continue
        found.append(
            f"node {rank}: the config's inventory: section declares {declared[0].type} "
            f"accelerators, its snapshot ({read[rank].name}) lists {listed}: planned with "
            f"the snapshot's {listed} (is the snapshot of another machine, or the "
            "inventory: entry out of date?)"
        )
    return found


def _fewer_than_declared(
    read: Mapping[int, _ReadNode], from_config: Mapping[int, tuple[Accelerator, ...]]
) -> list[str]:
    """A shortfall for each node whose snapshot holds fewer accelerators than the config's
    ``inventory:`` section declares for it (the snapshot wins; this says what it lacks)."""
    found = []
    for rank, declared in sorted(from_config.items()):
        if rank not in read or len(read[rank].node.accelerators) >= len(declared):
            continue
        if declared[0].type != "nvidia":
            continue  # NVML cannot see them: the config's entry describes the node
        held = len(read[rank].node.accelerators)
        why = "; ".join(read[rank].shortfalls)
        found.append(
            f"node {rank}: the config's inventory: section declares {len(declared)} "
            f"{declared[0].type} accelerator(s), its snapshot holds {held}"
            + (f" ({why})" if why else "")
            + f": planned with the {held} the snapshot holds"
        )
    return found


def _undescribed(
    num_nodes: int, read: Mapping[int, _ReadNode], from_config: Mapping[int, object]
) -> list[str]:
    """The shortfall of nodes planned without accelerators because no snapshot or config
    entry describes them (allowed by ``allow_missing_snapshots``)."""
    missing = [r for r in range(num_nodes) if r not in read and r not in from_config]
    if not missing:
        return []
    return [
        f"{len(read)} snapshot(s) for {num_nodes} nodes: node(s) {format_rank_list(missing)} "
        "have no snapshot and no inventory: entry: planned without accelerators"
    ]


def _check_described(
    num_nodes: int, from_snapshots: Mapping[int, object], from_config: Mapping[int, object]
) -> None:
    missing = [r for r in range(num_nodes) if r not in from_snapshots and r not in from_config]
    if missing:
        count = f"{len(from_snapshots)} snapshot(s) for {num_nodes} nodes"
        raise InventoryError(
            f"{count}: no snapshot for node(s) {format_rank_list(missing)}, and neither the "
            "config's inventory: section nor --accelerators-per-node describes them; pass "
            "one snapshot per node, or --allow-missing-snapshots to plan them without "
            "accelerators",
            path="inventory",
        )


def explains_shortfalls(function: Callable[_P, _R]) -> Callable[_P, _R]:
    """``plan`` whose rule that does not fit (a ``PlacementRuleError``) says what the
    inventory it was given lacks (its ``shortfalls``), when it lacks anything: the rule may
    break because a snapshot holds fewer accelerators."""

    @functools.wraps(function)
    def explained(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        try:
            return function(*args, **kwargs)
        except PlacementRuleError as error:
            inventory = kwargs.get("inventory", args[1] if len(args) > 1 else None)
            if not isinstance(inventory, Inventory) or not inventory.shortfalls:
                raise
            note = "; ".join(inventory.shortfalls)
            reason = f"{error.reason} (the inventory is short of what was expected: {note})"
            raise _rebuilt(error, reason) from error

    return explained


def _rebuilt(error: _E, reason: str) -> _E:
    copy = error.with_path(error.path)
    copy.reason = reason
    Exception.__init__(copy, copy._render())
    return copy


def attach_hardware(inventory: Inventory, config: ClusterConfig) -> Inventory:
    """Fill each node's ``hardware`` from the config's ``node_groups[*].hardware``.

    A device's node-local ``index`` is its position among the devices of its type on that
    node, in config order; ``config`` holds the device's settings (``HardwareConfig.entry()``).
    Devices of types the config declares replace any the inventory already had; other
    hardware is kept. Attaching twice gives the same inventory.

    Raises:
        InventoryError: A device names a node the inventory does not have.
    """
    devices: dict[int, list[HardwareDevice]] = {}
    declared: set[str] = set()
    counts: dict[tuple[int, str], int] = {}
    for g, group in enumerate(config.node_groups):
        if group.hardware is None:
            continue
        kind = group.hardware.type
        declared.add(kind)
        for c, device in enumerate(group.hardware.configs):
            rank = device.node_rank
            if not 0 <= rank < inventory.num_nodes:
                raise InventoryError(
                    f"node {rank} is not in the inventory (nodes 0-{inventory.num_nodes - 1})",
                    path=f"cluster.node_groups[{g}].hardware.configs[{c}].node_rank",
                )
            index = counts.get((rank, kind), 0)
            counts[(rank, kind)] = index + 1
            devices.setdefault(rank, []).append(
                HardwareDevice(type=kind, index=index, config=device.entry())
            )
    if not declared:
        return inventory
    changed = _replace_hardware(inventory.nodes, devices, declared)
    return inventory.replace_nodes(changed) if changed else inventory


def _replace_hardware(
    nodes: Iterable[Node], devices: Mapping[int, list[HardwareDevice]], declared: set[str]
) -> list[Node]:
    changed = []
    for node in nodes:
        kept = tuple(d for d in node.hardware if d.type not in declared)
        hardware = kept + tuple(devices.get(node.rank, ()))
        if hardware != node.hardware:
            changed.append(dataclasses.replace(node, hardware=hardware))
    return changed
