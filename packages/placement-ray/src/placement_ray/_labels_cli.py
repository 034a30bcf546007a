"""``python -m placement_ray labels [SNAPSHOT]``: the labels to give ``ray start``.

Prints ``node-rank=<i>,placement.io/nvlink-domain=<domain>`` (each when known) for the
node of SNAPSHOT (a ``python -m placement_native snapshot --json`` file), or for this
node, from a snapshot taken now (its rank from ``PLACEMENT_NODE_RANK``)::

    ray start --address=HEAD:6379 --labels="$(python -m placement_ray labels)"
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from placement_core import PlacementError

from ._domain_label import snapshot_labels

__all__ = ["add_labels_parser", "run_labels"]


def _snapshot(path: str | None) -> dict[str, Any]:
    if path is not None:
        with open(path, encoding="utf-8") as file:
            loaded = json.load(file)
        if not isinstance(loaded, dict):
            raise ValueError(f"{path}: expected a JSON object (a node snapshot)")
        return loaded
    from placement_native import snapshot  # its node_rank from PLACEMENT_NODE_RANK

    data: dict[str, Any] = json.loads(snapshot().to_json())
    return data


def add_labels_parser(commands: Any) -> None:
    """The ``labels`` subcommand of ``python -m placement_ray``."""
    labels = commands.add_parser("labels", help="print the labels to give `ray start`")
    labels.add_argument("snapshot", nargs="?", help="a node snapshot (default: take one now)")


def run_labels(args: argparse.Namespace) -> int:
    """``python -m placement_ray labels``; returns the exit status."""
    try:
        found = snapshot_labels(_snapshot(args.snapshot))
    except (PlacementError, OSError, ValueError) as error:
        sys.stderr.write(f"python -m placement_ray labels: error: {error}\n")
        return 2
    sys.stdout.write(",".join(f"{k}={v}" for k, v in found.items()) + "\n")
    return 0
