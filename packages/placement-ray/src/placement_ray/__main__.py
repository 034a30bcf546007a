"""``python -m placement_ray COMMAND``: ``jobs`` lists a shared cluster's leases and queue
(``_jobs_cli``); ``labels`` prints the labels to give ``ray start`` (``_labels_cli``)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from ._jobs_cli import add_jobs_parser, run_jobs
from ._labels_cli import add_labels_parser, run_labels


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m placement_ray``; returns the exit status."""
    parser = argparse.ArgumentParser(prog="python -m placement_ray")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    add_jobs_parser(commands)
    add_labels_parser(commands)
    args = parser.parse_args(argv)
    if args.command == "jobs":
        return run_jobs(args, parser)
    return run_labels(args)


if __name__ == "__main__":
    sys.exit(main())
