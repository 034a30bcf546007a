"""``python -m placement_ray jobs``: the leases of a shared Ray cluster, and its queue.

One row per leased accelerator (job, node rank and id, index, UUID, share, priority,
since when), then one row per waiting job; ``--json`` prints
``{"leases": [...], "queue": [...]}`` with the keys of ``LeaseRecord`` / ``QueueRecord``;
``--map`` adds a node x GPU map naming the job on each GPU.
It connects as a driver of its own and changes nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from dataclasses import asdict
from datetime import UTC, datetime
from typing import Any

__all__ = ["add_jobs_parser", "render_node_map", "render_table", "run_jobs"]


def _when(since: float) -> str:
    return datetime.fromtimestamp(since, UTC).strftime("%Y-%m-%d %H:%M:%S")


def _aligned(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(header)]
    return [
        "  ".join(cell.ljust(w) for cell, w in zip(line, widths, strict=True)).rstrip()
        for line in (header, *rows)
    ]


def render_table(table: dict[str, list[dict[str, Any]]]) -> str:
    """The text listing of ``{"leases": [...], "queue": [...]}`` (records as dicts)."""
    leases = table["leases"]
    lines = [f"leases: {len(leases)} accelerator(s) of {len({r['job'] for r in leases})} job(s)"]
    if leases:
        rows = [
            [
                r["job"],
                str(r["node_rank"]),
                r["node_id"][:12],
                str(r["accelerator"]),
                r["uuid"] or "-",
                f"{r['share']:g}",
                str(r["priority"]),
                _when(r["since"]),
            ]
            for r in leases
        ]
        header = ["JOB", "NODE", "NODE ID", "GPU", "UUID", "SHARE", "PRIORITY", "SINCE (UTC)"]
        lines += _aligned(header, rows)
    queue = table["queue"]
    lines.append(f"queue: {len(queue)} job(s) waiting")
    if queue:
        rows = [
            [
                str(w["position"]),
                w["job"],
                str(w["priority"]),
                str(list(w["need"])),
                _when(w["since"]),
            ]
            for w in queue
        ]
        lines += _aligned(["POS", "JOB", "PRIORITY", "NEEDS PER NODE", "WAITING SINCE (UTC)"], rows)
    return "\n".join(lines)


def render_node_map(
    nodes: Sequence[tuple[int, str, Sequence[int]]], leases: Sequence[dict[str, Any]]
) -> str:
    """A node x GPU map: in each cell the job holding that GPU (``+`` joins jobs sharing
    it), ``.`` where it is free.

    Args:
        nodes: ``(rank, node id, accelerator indices)`` per node, by rank.
        leases: Lease records as dicts (``node_id``, ``accelerator``, ``job``).
    """
    holders: dict[tuple[str, int], list[str]] = {}
    for r in leases:
        holders.setdefault((r["node_id"], r["accelerator"]), []).append(r["job"])
    width = max((max(indices, default=-1) + 1 for _, _, indices in nodes), default=0)
    rows = []
    for rank, node_id, indices in nodes:
        cells = [
            "+".join(holders.get((node_id, i), ["."])) if i in indices else "" for i in range(width)
        ]
        rows.append([str(rank), node_id[:12], *cells])
    header = ["NODE", "NODE ID", *(str(i) for i in range(width))]
    return "\n".join(
        ["map: the job holding each GPU ('.' is free)", *_aligned(header, rows)]
        if rows
        else ["map: no node (no job started a lease ledger)"]
    )


def add_jobs_parser(commands: Any) -> None:
    """The ``jobs`` subcommand of ``python -m placement_ray``."""
    jobs = commands.add_parser("jobs", help="list the leases and the queue of a shared cluster")
    jobs.add_argument("--address", help="the Ray cluster's address (default: RAY_ADDRESS)")
    jobs.add_argument("--json", action="store_true", help="print JSON instead of a table")
    jobs.add_argument(
        "--map", action="store_true", help="also draw a node x GPU map of who holds what"
    )


def run_jobs(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    """``python -m placement_ray jobs``; returns the exit status."""
    address = args.address or os.environ.get("RAY_ADDRESS")
    if not address:
        parser.error("jobs: no cluster: pass --address HOST:PORT or set RAY_ADDRESS")
    if args.map and args.json:
        parser.error("jobs: --map draws text; leave out --json (its leases say the same)")
    import ray

    from ._leases import lease_table, ledger_nodes

    try:
        ray.init(address=address, namespace="placement-leases-viewer", log_to_driver=False)
    except (ConnectionError, RuntimeError, ValueError) as exc:
        print(f"jobs: cannot connect to the Ray cluster at {address}: {exc}", file=sys.stderr)
        return 2
    try:
        table = lease_table()
        nodes = ledger_nodes() if args.map else []
    finally:
        ray.shutdown()
    plain = {key: [asdict(r) for r in records] for key, records in table.items()}
    print(json.dumps(plain, indent=2) if args.json else render_table(plain))
    if args.map:
        print(render_node_map(nodes, plain["leases"]))
    return 0
