"""The ``json`` view: the plan as ``{"schema": 1, "nodes", "components", "warnings"}``."""

from __future__ import annotations

import io
import json
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, TextIO

from placement_core._inventory import Accelerator, Node
from placement_core._records import Placement
from placement_core._topology_plan import inventory_has_topology

if TYPE_CHECKING:
    from placement_core._plan import Plan

__all__ = ["JSON_SCHEMA_VERSION", "plan_to_dict", "render_json", "write_json"]

JSON_SCHEMA_VERSION = 1


def _accelerator(a: Accelerator, topology: bool) -> dict[str, Any]:
    out: dict[str, Any] = {
        "index": a.index,
        "type": a.type,
        "model": a.model,
        "uuid": a.uuid,
        "pci_bus_id": a.pci_bus_id,
        "memory_bytes": a.memory_bytes,
        "numa_node": a.numa_node,
        "cpu_affinity": a.cpu_affinity,
    }
    if topology:
        out["memory_used_bytes"] = a.memory_used_bytes
        out["processes"] = [
            {"pid": p.pid, "used_memory_bytes": p.used_memory_bytes} for p in a.processes
        ]
    return out


def _node(node: Node, topology: bool, domains: bool) -> dict[str, Any]:
    out: dict[str, Any] = {
        "node_rank": node.rank,
        "node_id": node.node_id,
        "hostname": node.hostname,
        "ip": node.ip,
        "cpus": node.cpus,
        "accelerators": [_accelerator(a, topology) for a in node.accelerators],
        "hardware": [
            {"type": d.type, "index": d.index, "config": dict(d.config)} for d in node.hardware
        ],
    }
    if topology:
        out["links"] = [list(link) for link in node.links]
    if domains:
        out["nvlink_domain"] = node.nvlink_domain
    return out


def plan_to_dict(plan: Plan, *, env: bool = True) -> dict[str, Any]:
    """The plan as plain JSON-ready data.

    Each component maps to its placements in rank order, each with exactly the keys
    ``rank, node_rank, node_id, placement_node_rank, local_rank, local_world_size,
    hardware_ranks, visible_accelerators, local_accelerator_rank, accelerator_type,
    node_group, isolate_accelerator, interpreter, env`` (``interpreter``: the node
    group's python on that node, or None); plus ``link, numa_node, cpus`` when the
    inventory carries topology (node snapshots), when nodes also list their ``links``
    and accelerators their ``memory_used_bytes`` and ``processes``; plus
    ``nvlink_domain`` (the node's NVLink domain, or None) on each placement and node
    when any node has a domain. A config with ``spare_nodes`` adds ``spares`` (``nodes``:
    each spare's ``node_rank`` and the used nodes it ``replaces``; ``uncovered``: used
    nodes no spare can replace and what one would need); a plan from
    :func:`~placement_core.replan` adds ``lost`` (``nodes`` and the ``moves``: ``lost``,
    ``spare``, their node ids and the ``ranks`` moved per component).

    Args:
        plan: The plan.
        env: Include each worker's environment (see docs/concepts/worker-environment.md); ``None``
            when False.
    """
    topology = inventory_has_topology(plan.inventory)
    nodes = plan.inventory.nodes
    domains = any(node.nvlink_domain is not None for node in nodes)
    components: dict[str, list[dict[str, Any]]] = {}
    for name, placements in plan.components.items():
        components[name] = [
            _placement(
                p,
                plan.env(name, p.rank) if env else None,
                topology,
                plan.interpreter(name, p.rank),
            )
            for p in placements
        ]
        if domains:
            for out, p in zip(components[name], placements, strict=True):
                out["nvlink_domain"] = nodes[p.node_rank].nvlink_domain
    out = {
        "schema": JSON_SCHEMA_VERSION,
        "nodes": [_node(node, topology, domains) for node in nodes],
        "components": components,
        "warnings": list(plan.warnings),
    }
    return out | _spares(plan)


def _spares(plan: Plan) -> dict[str, Any]:
    """``spares`` and ``lost``, present only when the plan has spares or lost nodes."""
    out: dict[str, Any] = {}
    if plan.config.spare_nodes:
        spares = plan.spares()
        out["spares"] = {
            "nodes": [{"node_rank": r, "replaces": list(u)} for r, u in spares.replaces.items()],
            "uncovered": [{"node_rank": r, "needs": spares.needs[r]} for r in spares.uncovered],
        }
    if plan.lost_nodes:
        out["lost"] = {
            "nodes": list(plan.lost_nodes),
            "moves": [
                {
                    "lost": m.lost,
                    "spare": m.spare,
                    "lost_node_id": m.lost_node_id,
                    "spare_node_id": m.spare_node_id,
                    "ranks": {name: list(ranks) for name, ranks in m.ranks.items()},
                }
                for m in plan.moves
            ],
        }
    return out


def _placement(
    p: Placement, env: dict[str, str] | None, topology: bool, interpreter: str | None
) -> dict[str, Any]:
    out: dict[str, Any] = {
        "rank": p.rank,
        "node_rank": p.node_rank,
        "node_id": p.node_id,
        "placement_node_rank": p.placement_node_rank,
        "local_rank": p.local_rank,
        "local_world_size": p.local_world_size,
        "hardware_ranks": list(p.hardware_ranks),
        "visible_accelerators": list(p.visible_accelerators),
        "local_accelerator_rank": p.local_accelerator_rank,
        "accelerator_type": p.accelerator_type,
        "node_group": p.node_group,
        "isolate_accelerator": p.isolate_accelerator,
    }
    if topology:
        out["link"], out["numa_node"], out["cpus"] = p.link, p.numa_node, p.cpus
    out["interpreter"] = interpreter
    out["env"] = env
    return out


def render_json(plan: Plan, *, indent: int | None = 2) -> str:
    """The plan as JSON text (see :func:`plan_to_dict`), ending with a newline.

    For a plan of millions of processes, :func:`write_json` writes the same text to a
    file without holding it whole.
    """
    out = io.StringIO()
    write_json(plan, out, indent=indent)
    return out.getvalue()


def write_json(plan: Plan, out: TextIO, *, indent: int | None = 2) -> None:
    """Write the plan as JSON text to ``out``, one node and one placement at a time.

    The text is :func:`render_json`'s (and ``json.dumps(plan_to_dict(plan))``'s), but
    memory holds one record at a time, never the whole document: 1.8 million placements
    with their environments are about 2 GB of JSON.

    Args:
        plan: The plan.
        out: A text stream (``sys.stdout``, an open file).
        indent: As ``json.dumps``'s; None writes one line.
    """
    topology = inventory_has_topology(plan.inventory)
    nodes = plan.inventory.nodes
    domains = any(node.nvlink_domain is not None for node in nodes)
    writer = _Writer(out, indent)
    out.write("{" + writer.newline(1) + '"schema": ' + json.dumps(JSON_SCHEMA_VERSION))
    out.write(writer.comma + writer.newline(1) + '"nodes": ')
    writer.array((_node(node, topology, domains) for node in nodes), 1)
    out.write(writer.comma + writer.newline(1) + '"components": ')
    if not plan.components:
        out.write("{}")
    else:
        out.write("{")
        for i, (name, placements) in enumerate(plan.components.items()):
            out.write((writer.comma if i else "") + writer.newline(2) + json.dumps(name) + ": ")
            writer.array((_streamed(plan, name, p, topology, domains) for p in placements), 2)
        out.write(writer.newline(1) + "}")
    out.write(writer.comma + writer.newline(1) + '"warnings": ')
    out.write(writer.dump(list(plan.warnings), 1))
    for key, value in _spares(plan).items():
        out.write(writer.comma + writer.newline(1) + json.dumps(key) + ": ")
        out.write(writer.dump(value, 1))
    out.write(writer.newline(0) + "}\n")


def _streamed(plan: Plan, name: str, p: Placement, topology: bool, domains: bool) -> dict[str, Any]:
    out = _placement(p, plan.env(name, p.rank), topology, plan.interpreter(name, p.rank))
    if domains:
        out["nvlink_domain"] = plan.inventory.nodes[p.node_rank].nvlink_domain
    return out


class _Writer:
    """``json.dumps``'s layout, written a piece at a time."""

    def __init__(self, out: TextIO, indent: int | None) -> None:
        self.out = out
        self.indent = indent
        self.comma = ", " if indent is None else ","
        self._dumps: Callable[[Any], str] = json.JSONEncoder(indent=indent, default=str).encode

    def newline(self, level: int) -> str:
        return "" if self.indent is None else "\n" + " " * (self.indent * level)

    def dump(self, value: Any, level: int) -> str:
        text = self._dumps(value)
        return text if self.indent is None else text.replace("\n", self.newline(level))

    def array(self, items: Iterable[Any], level: int) -> None:
        self.out.write("[")
        first = True
        for item in items:
            prefix = "" if first else self.comma
            self.out.write(prefix + self.newline(level + 1) + self.dump(item, level + 1))
            first = False
        self.out.write("]" if first else self.newline(level) + "]")
