"""``placement slurm-topology``: Slurm's topology/block file from node snapshots."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any, TextIO

from ._slurm_segments import check_segments, segment_size
from ._slurm_topology import render_slurm_topology

EXIT_OK = 0


def add_slurm_topology_parser(commands: Any) -> None:
    """Register the subcommand on the ``placement`` parser's subparsers."""
    parser = commands.add_parser(
        "slurm-topology",
        help="write Slurm's topology/block configuration: one block per NVLink domain",
        description="Read node snapshots (python -m placement_native snapshot --json, one "
        "per node) and write the topology/block plugin's configuration with one block per "
        "NVLink domain, so that `sbatch --segment=N` keeps a job in whole domains.",
    )
    parser.add_argument("snapshots", nargs="+", metavar="SNAPSHOT", help="node snapshot files")
    parser.add_argument(
        "--format",
        "-f",
        choices=("yaml", "conf"),
        default="yaml",
        help="yaml: topology.yaml (Slurm 25.05+); conf: topology.conf BlockName lines "
        "(Slurm 23.11-24.11)",
    )
    parser.add_argument(
        "--name", default="nvlink", help="the topology's name in topology.yaml (default nvlink)"
    )
    parser.add_argument("--output", "-o", metavar="FILE", help="write to FILE instead")
    instead = parser.add_mutually_exclusive_group()
    instead.add_argument(
        "--segment",
        action="store_true",
        help="print the nodes per NVLink domain instead, for `sbatch --segment=N` (the "
        "smallest domain's when they differ)",
    )
    instead.add_argument(
        "--check-segment",
        type=int,
        metavar="N",
        help="instead check that the snapshots (one job's nodes) are whole segments of N "
        "nodes, each in one NVLink domain: exit 1 naming the domains when Slurm split them",
    )


def run_slurm_topology(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    if args.segment:
        size, note = segment_size(args.snapshots)
        if note is not None:
            err.write(f"placement slurm-topology: note: {note}\n")
        text = f"{size}\n"
    elif args.check_segment is not None:
        text = check_segments(args.snapshots, args.check_segment) + "\n"
    else:
        text = render_slurm_topology(args.snapshots, args.format, args.name)
    if args.output:
        Path(args.output).write_text(text, encoding="utf-8")
    else:
        out.write(text)
    return EXIT_OK
