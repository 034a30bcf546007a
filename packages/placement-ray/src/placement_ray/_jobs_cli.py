"""``python -m placement_ray jobs``: the leases of a shared Ray cluster, and its queue.

One row per leased accelerator (job, node rank and id, index, UUID, share, priority,
since when), then one row per waiting job; ``--json`` prints
``{"leases": [...], "queue": [...]}`` with the keys of ``LeaseRecord`` / ``QueueRecord``.
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

__all__ = ["add_jobs_parser", "render_table", "run_jobs"]


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


def add_jobs_parser(commands: Any) -> None:
    """The ``jobs`` subcommand of ``python -m placement_ray``."""
    jobs = commands.add_parser("jobs", help="list the leases and the queue of a shared cluster")
    jobs.add_argument("--address", help="the Ray cluster's address (default: RAY_ADDRESS)")
    jobs.add_argument("--json", action="store_true", help="print JSON instead of a table")


def run_jobs(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    """``python -m placement_ray jobs``; returns the exit status."""
    address = args.address or os.environ.get("RAY_ADDRESS")
    if not address:
        parser.error("jobs: no cluster: pass --address HOST:PORT or set RAY_ADDRESS")
    import ray

    from ._leases import lease_table

    try:
        ray.init(address=address, namespace="placement-leases-viewer", log_to_driver=False)
    except (ConnectionError, RuntimeError, ValueError) as exc:
        print(f"jobs: cannot connect to the Ray cluster at {address}: {exc}", file=sys.stderr)
        return 2
    try:
        table = lease_table()
    finally:
        ray.shutdown()
    plain = {key: [asdict(r) for r in records] for key, records in table.items()}
    print(json.dumps(plain, indent=2) if args.json else render_table(plain))
    return 0
