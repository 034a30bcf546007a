"""``python -m placement_native``: print this node's snapshot or its GPU topology matrix.

Commands:
    snapshot [--json] [--strict]   the node snapshot; ``--json``: the JSON
                                   that ``placement plan --inventory`` reads
                                   (docs/concepts/node-snapshot.md)
    topo                           the pairwise GPU matrix, like ``nvidia-smi topo -m``,
                                   with CPU and NUMA affinity, used memory and the pids
                                   of the compute processes on each GPU
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from . import _backend
from ._model import Accelerator, NodeSnapshot, Process
from ._snapshot import snapshot
from .errors import NativeError

__all__ = ["main", "render_snapshot", "render_topology"]

LEGEND = """\
Legend:

  X    = Self
  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes
  NODE = Connection traversing PCIe and the interconnect between PCIe Host Bridges in a NUMA node
  PHB  = Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)
  PXB  = Connection traversing multiple PCIe bridges (not the PCIe Host Bridge)
  PIX  = Connection traversing at most a single PCIe bridge
  NV#  = Connection traversing a bonded set of # NVLinks
  -    = Unknown (the GPU could not be queried)"""

PROCESS_LEGEND = "Processes: pids of the compute processes on the GPU; - none, ? not listed by NVML"


def _gib(value: int | None) -> str:
    return "-" if value is None else f"{value / 2**30:.1f} GiB"


def _pids(processes: tuple[Process, ...] | None) -> str:
    """``4242,4243`` for the topology matrix; ``-`` for none, ``?`` when not listed."""
    if processes is None:
        return "?"
    return ",".join(str(p.pid) for p in processes) or "-"


def _process_line(processes: tuple[Process, ...] | None, indent: str) -> list[str]:
    """``processes: 4242 (7.5 GiB), 4243 (-)`` under a GPU or MIG row, when any runs."""
    if not processes:
        return []
    listed = ", ".join(f"{p.pid} ({_gib(p.used_memory_bytes)})" for p in processes)
    return [f"{indent}processes: {listed}"]


def _table(rows: list[list[str]]) -> list[str]:
    widths = [max(len(row[c]) for row in rows) for c in range(len(rows[0]))]
    return [
        "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
        for row in rows
    ]


def _gpu_row(acc: Accelerator) -> list[str]:
    cc = acc.compute_capability
    return [
        str(acc.index),
        acc.model or "-",
        acc.uuid or "-",
        acc.pci_bus_id or "-",
        _gib(acc.memory_bytes),
        _gib(acc.memory_used_bytes),
        "-" if acc.numa_node is None else str(acc.numa_node),
        acc.cpu_affinity or "-",
        "-" if cc is None else f"{cc[0]}.{cc[1]}",
        "on" if acc.mig else "off",
    ]


def render_snapshot(snap: NodeSnapshot) -> str:
    """The snapshot as a human-readable report."""
    lines = [
        f"host {snap.hostname}  ip {snap.ip}  cpus {snap.cpus}  numa nodes {snap.numa_nodes}",
        f"driver {snap.driver or '-'}  source {snap.source}",
    ]
    if not snap.accelerators:
        reason = f": {snap.nvml_error}" if snap.nvml_error else ""
        lines.append(f"no accelerators{reason}")
        return "\n".join(lines)
    if snap.nvml_error:
        lines.append(f"nvml error: {snap.nvml_error}")
    header = [
        "GPU",
        "MODEL",
        "UUID",
        "PCI BUS ID",
        "MEMORY",
        "USED",
        "NUMA",
        "CPU AFFINITY",
        "CC",
        "MIG",
    ]
    rows = [header] + [_gpu_row(acc) for acc in snap.accelerators]
    table = _table(rows)
    lines.append(table[0])
    for acc, line in zip(snap.accelerators, table[1:], strict=True):
        lines.append(line)
        for mig in acc.mig_instances:
            ids = f"GI {mig.gpu_instance_id}, CI {mig.compute_instance_id}"
            lines.append(
                f"  MIG {mig.index}  {mig.uuid or '-'}  {mig.model or '-'}  "
                f"{_gib(mig.memory_bytes)}  used {_gib(mig.memory_used_bytes)}  ({ids})"
            )
            lines += _process_line(mig.processes, "    ")
            if mig.error:
                lines.append(f"    error: {mig.error}")
        if not acc.mig_instances:  # a MIG GPU's processes are listed under its instances
            lines += _process_line(acc.processes, "  ")
        if acc.error:
            lines.append(f"  error: {acc.error}")
    return "\n".join(lines)


def render_topology(snap: NodeSnapshot) -> str:
    """The pairwise GPU matrix like ``nvidia-smi topo -m``, plus CPU and NUMA affinity."""
    if not snap.accelerators:
        reason = f": {snap.nvml_error}" if snap.nvml_error else ""
        return f"no accelerators{reason}"
    names = [f"GPU{acc.index}" for acc in snap.accelerators]
    rows = [["", *names, "CPU Affinity", "NUMA Affinity", "Memory Used", "Processes"]]
    for acc in snap.accelerators:
        cells = []
        for other in snap.accelerators:
            if other.index == acc.index:
                cells.append("X")
                continue
            link = snap.link(acc.index, other.index)
            cells.append("-" if link is None else link.label)
        numa = "N/A" if acc.numa_node is None else str(acc.numa_node)
        used = "N/A" if acc.memory_used_bytes is None else _gib(acc.memory_used_bytes)
        row = [f"GPU{acc.index}", *cells, acc.cpu_affinity or "N/A", numa, used]
        rows.append([*row, _pids(acc.processes)])
    return "\n".join([*_table(rows), "", LEGEND, PROCESS_LEGEND])


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m placement_native",
        description="This node's GPUs and topology, read through NVML.",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    snap = commands.add_parser("snapshot", help="print the node snapshot")
    snap.add_argument(
        "--json",
        action="store_true",
        help="print the node snapshot as JSON (docs/concepts/node-snapshot.md)",
    )
    snap.add_argument(
        "--strict", action="store_true", help="fail (exit 1) if NVML or any GPU fails"
    )
    commands.add_parser("topo", help="print the GPU topology matrix")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m placement_native``; returns the exit status."""
    args = _parser().parse_args(argv)
    try:
        snap = snapshot(strict=getattr(args, "strict", False))
    except NativeError as exc:  # an NVML failure with --strict, or a bad PLACEMENT_* variable
        print(f"error: {exc}", file=sys.stderr)
        return 1
    if args.command == "topo":
        text = render_topology(snap)
    elif args.json:
        text = snap.to_json(indent=2)
    else:
        text = f"{render_snapshot(snap)}\nbackend {_backend.BACKEND}"
    try:
        print(text, flush=True)
    except BrokenPipeError:  # `... | head`: the reader is gone, which is not an error
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 0
