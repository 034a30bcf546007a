"""The ``placement`` command: plan, validate and describe cluster configs offline.

::

    placement plan CONFIG [--inventory SNAPSHOT.json ...] [--accelerators-per-node N]
                          [--allow-missing-snapshots] [--accept-partial]
                          [--format table|map|json|svg|html] [--expand] [--output FILE]
                          [--max-processes N] [--model-parallel] [--nvlink-groups]
                          [--lose RANKS] [--memory-headroom SIZE]
    placement validate CONFIG [--inventory ...] [--accelerators-per-node N]
                              [--allow-missing-snapshots] [--accept-partial]
                              [--max-processes N] [--model-parallel] [--nvlink-groups]
                              [--memory-headroom SIZE]
    placement schema

Exit status: 0 on success, 1 when the input is wrong (missing file, YAML syntax, config
rules, inventory, a rule that cannot be placed, a job whose ``memory:`` section says it
will not fit), 2 for a wrong command line. Errors are
messages naming the file, the YAML path and the value; never a traceback (set
``PLACEMENT_DEBUG=1`` to see one for an unexpected failure). Inputs are read under the
limits of docs/reference/limits.md (file sizes, nesting, process count), so a hostile
or mistyped input gets an answer at once.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

from ._config import ClusterConfig, config_json_schema, load_config
from ._controls import terminal_text
from ._errors import ConfigError, PlacementError
from ._interpolate import JobDocument
from ._inventory import MAX_ACCELERATORS_PER_NODE, Inventory
from ._limits import MAX_PROBLEMS_SHOWN, MAX_PROCESSES
from ._memory import MemoryReport, require_fit
from ._memory_cli import add_memory_option, memory_report, memory_summary
from ._model_parallel import derive_model_parallel, load_job, looks_model_parallel
from ._plan import Plan, plan
from ._ranks import format_rank_list
from ._replan import replan
from ._shown import shown, shown_digits
from ._slurm_topology_cli import add_slurm_topology_parser, run_slurm_topology
from ._sources import inventory_for
from ._version import __version__
from ._yamlio import file_lines, line_of, read_document
from .render import render_html, render_map, render_svg, render_table, write_json
from .render._text import plural

__all__ = ["build_parser", "main"]

PROG = "placement"
EXIT_OK, EXIT_INVALID, EXIT_USAGE = 0, 1, 2
FORMATS = ("table", "map", "json", "svg", "html")


def _integer(text: str, low: int, high: int) -> int:
    # ASCII digits only: int() would also take "1_000" and "٣", and refuses 4,301+ digits.
    digits = text.strip()
    if not digits.isascii() or not digits.isdigit():
        raise argparse.ArgumentTypeError(f"expected an integer >= {low}, got {shown(text)}")
    if len(digits) > 20 or not low <= int(digits) <= high:
        raise argparse.ArgumentTypeError(
            f"expected an integer from {low} to {high}, got {shown_digits(digits)}"
        )
    return int(digits)


def _count(text: str) -> int:
    return _integer(text, 0, MAX_ACCELERATORS_PER_NODE)


def _max_processes(text: str) -> int:
    return _integer(text, 1, 10**18)


def _add_inventory_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("config", metavar="CONFIG", help="cluster config YAML (top-level cluster:)")
    parser.add_argument(
        "--inventory",
        "-i",
        metavar="SNAPSHOT.json",
        nargs="+",
        action="extend",
        default=[],
        help="node snapshots written by placement-native, one per node; mapped to nodes by "
        "their node_rank field, else in the order given (shell globs sort node10.json "
        "before node2.json)",
    )
    parser.add_argument(
        "--accelerators-per-node",
        "-a",
        metavar="N",
        type=_count,
        help="N nvidia accelerators on every node no snapshot or inventory: entry describes",
    )
    parser.add_argument(
        "--allow-missing-snapshots",
        action="store_true",
        help="with --inventory: plan nodes that have no snapshot (and no inventory: entry) "
        "as nodes without accelerators instead of failing",
    )
    parser.add_argument(
        "--accept-partial",
        action="store_true",
        help="with --inventory: plan a snapshot that could not read its accelerators as a "
        "node without accelerators, and leave out accelerators a snapshot lists with an "
        "error, with a warning each, instead of failing",
    )
    parser.add_argument(
        "--model-parallel",
        "-m",
        action="store_true",
        help="CONFIG is a whole RLinf reasoning/agent job: derive actor, rollout, inference, "
        "critic and reward from the job's parallel sizes as RLinf's "
        "ModelParallelComponentPlacement does",
    )
    parser.add_argument(
        "--nvlink-groups",
        action="store_true",
        help="with --model-parallel: keep each tensor x expert parallel group of actor, "
        "critic and inference inside one NVLink domain (their nvlink_group is derived from "
        "the model's parallel sizes)",
    )
    add_memory_option(parser)


def _add_max_processes(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--max-processes",
        metavar="N",
        type=_max_processes,
        default=MAX_PROCESSES,
        help=f"refuse a plan of more than N processes in all (default {MAX_PROCESSES:,})",
    )


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``placement`` command."""
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Decide which process of a distributed job runs on which node and "
        "accelerators, offline, from a cluster config.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    plan_parser = commands.add_parser(
        "plan",
        help="plan every component and print the placements",
        description=("Plan every component of CONFIG and print where each process runs."),
    )
    _add_inventory_options(plan_parser)
    plan_parser.add_argument(
        "--format",
        "-f",
        choices=FORMATS,
        default="table",
        help="table: per-process rows; map: node x accelerator grid; json: everything; "
        "svg: the map as a picture with a tooltip per accelerator; html: that picture in "
        "one self-contained page (hover cards, component filter)",
    )
    plan_parser.add_argument(
        "--output",
        "-o",
        metavar="FILE",
        help="write to FILE (UTF-8) instead of standard output",
    )
    plan_parser.add_argument(
        "--expand", action="store_true", help="table: one row per process, no folding"
    )
    _add_max_processes(plan_parser)
    plan_parser.add_argument(
        "--lose",
        metavar="RANKS",
        action="append",
        help="show the plan after losing these nodes (a rank list such as 1,3-4; give it "
        "again to lose more): each lost node's processes move to a compatible spare "
        "(cluster.spare_nodes), in the same NVLink domain first",
    )

    validate_parser = commands.add_parser(
        "validate",
        help="check a config (and plan it when an inventory is known)",
        description="Check CONFIG against every rule; plan it too when the config has an "
        "inventory: section or --inventory / --accelerators-per-node is given.",
    )
    _add_inventory_options(validate_parser)
    _add_max_processes(validate_parser)

    commands.add_parser(
        "schema",
        help="print the JSON Schema of the config (for editor completion)",
        description="Print the JSON Schema of a cluster config document.",
    )
    add_slurm_topology_parser(commands)
    return parser


def _inventory_known(config: ClusterConfig, args: argparse.Namespace) -> bool:
    return bool(args.inventory or config.inventory or args.accelerators_per_node is not None)


def _inventory(config: ClusterConfig, args: argparse.Namespace) -> Inventory:
    return inventory_for(
        config,
        snapshots=args.inventory,
        accelerators_per_node=args.accelerators_per_node,
        allow_missing_snapshots=args.allow_missing_snapshots,
        accept_partial=args.accept_partial,
    )


def _load(args: argparse.Namespace) -> tuple[ClusterConfig, JobDocument | None]:
    """The config, and the whole job document when planning a model-parallel job."""
    if not args.model_parallel:
        config = load_config(args.config)
        if _looks_model_parallel(args.config):
            sys.stderr.write(
                f"{PROG}: note: {args.config} has actor.model and rollout sections; RLinf's "
                "reasoning and agent jobs derive actor, rollout, inference, critic and reward "
                "from their parallel sizes instead of these rules: add --model-parallel to "
                "plan what RLinf launches\n"
            )
        return config, None
    job = load_job(args.config)
    return load_config(job.document), job


def _looks_model_parallel(source: str) -> bool:
    try:
        document, _ = read_document(source)
    except PlacementError:
        return False
    return isinstance(document, dict) and looks_model_parallel(document)


def _make_plan(config: ClusterConfig, job: JobDocument | None, args: argparse.Namespace) -> Plan:
    inventory = _inventory(config, args)
    if job is None:
        return plan(config, inventory, max_processes=args.max_processes)
    layout = derive_model_parallel(job, inventory, nvlink_groups=args.nvlink_groups)
    sys.stderr.write(
        f"{PROG}: model-parallel job in {layout.mode} mode: "
        f"{', '.join(layout.derived)} derived from the parallel sizes as RLinf does\n"
    )
    return plan(layout.config, inventory, max_processes=args.max_processes)


def _render(
    result: Plan, args: argparse.Namespace, out: TextIO, memory: MemoryReport | None
) -> None:
    if args.format == "json":
        # Streamed: millions of placements never sit in memory whole.
        write_json(result, out, memory=memory)
    elif args.format == "map":
        out.write(terminal_text(render_map(result, memory=memory)))
    elif args.format == "svg":
        out.write(render_svg(result, memory=memory))
    elif args.format == "html":
        out.write(render_html(result, memory=memory))
    else:
        out.write(terminal_text(render_table(result, fold=not args.expand, memory=memory)))


def _run_plan(args: argparse.Namespace, out: TextIO) -> int:
    config, job = _load(args)
    result = _make_plan(config, job, args)
    if args.lose is not None:
        try:
            result = replan(result, ",".join(args.lose)).plan
        except PlacementError as error:
            if error.path == "lost":
                raise error.with_path("--lose") from None
            raise
    memory = memory_report(args, config, job, result)
    if args.output is None:
        _render(result, args, out, memory)
        return _memory_verdict(memory, args)
    try:
        with open(args.output, "w", encoding="utf-8") as file:
            _render(result, args, file, memory)
    except OSError as error:
        sys.stderr.write(f"{PROG}: error: cannot write {args.output}: {error.strerror or error}\n")
        return EXIT_INVALID
    size = Path(args.output).stat().st_size
    sys.stderr.write(f"{PROG}: wrote {args.output} ({args.format}, {_bytes(size)})\n")
    return _memory_verdict(memory, args)


def _memory_verdict(memory: MemoryReport | None, args: argparse.Namespace) -> int:
    """Exit 1, with the refusal on standard error, when the plan will not fit."""
    if memory is None:
        return EXIT_OK
    for note in memory.notes:
        sys.stderr.write(terminal_text(f"{PROG}: note: {note}\n"))
    try:
        require_fit(memory)
    except PlacementError as error:
        _report(error, args.config, sys.stderr)
        return EXIT_INVALID
    return EXIT_OK


def _bytes(size: int) -> str:
    for unit, scale in (("GB", 10**9), ("MB", 10**6), ("kB", 10**3)):
        if size >= scale:
            return f"{size / scale:.1f} {unit}"
    return plural(size, "byte")


def _run_validate(args: argparse.Namespace, out: TextIO) -> int:
    config, job = _load(args)
    if config.ignored_keys:
        keys = ", ".join(f"cluster.{key}" for key in config.ignored_keys)
        out.write(f"{args.config}: note: {keys}: used by RLinf, ignored by placement\n")
    described = ", ".join(
        (
            plural(config.num_nodes, "node"),
            plural(len(config.node_groups), "node group"),
            plural(len(config.components()), "component"),
        )
    )
    if not _inventory_known(config, args):
        memory_report(args, config, job, None)  # the memory: section is checked all the same
        what = "model-parallel layout not derived" if job is not None else "not planned"
        out.write(
            f"{args.config}: valid ({described}); {what}: no inventory (add an inventory: "
            "section, --inventory or --accelerators-per-node to check placements too)\n"
        )
        if config.spare_nodes:
            out.write(
                f"{args.config}: spare nodes {format_rank_list(config.spare_nodes)} (which "
                "nodes each can replace is known once planned)\n"
            )
        elif config.spare_domains:
            counts = ", ".join(f"{d}: {n}" for d, n in config.spare_domains.items())
            out.write(
                f"{args.config}: spare nodes per NVLink domain ({counts}; which nodes they "
                "are is known once planned)\n"
            )
        return EXIT_OK
    result = _make_plan(config, job, args)
    memory = memory_report(args, config, job, result)
    processes = plural(sum(len(p) for p in result.components.values()), "process")
    warned = f", {plural(len(result.warnings), 'warning')}" if result.warnings else ""
    out.write(f"{args.config}: valid ({described}; {processes} planned{warned})\n")
    out.writelines(f"{args.config}: {line}\n" for line in result.spares().lines())
    for warning in result.warnings:
        sys.stderr.write(terminal_text(f"{PROG}: warning: {warning}\n"))
    if memory is not None and memory.fits:
        out.write(f"{args.config}: {memory_summary(memory)}\n")
    return _memory_verdict(memory, args)


def _located(text: str, path: str | None, config: str | None, lines: dict[str, int]) -> str:
    """``FILE:LINE: text`` when the YAML path's line is known, else ``FILE: text``."""
    line = line_of(path, lines) if path else None
    if config and line:
        return f"{config}:{line}: {text}"
    if config and not text.startswith(config):
        return f"{config}: {text}"
    return text


def _report(error: PlacementError, config: str | None, err: TextIO) -> None:
    lines = file_lines(config)
    if isinstance(error, ConfigError) and len(error.problems) > 1:
        err.write(f"{PROG}: {config}: {len(error.problems)} problems:\n")
        # In file order, so a reader walks the YAML top to bottom (stable within a line).
        ordered = sorted(error.problems, key=lambda p: line_of(p.path, lines) or 0)
        for problem in ordered[:MAX_PROBLEMS_SHOWN]:
            err.write(terminal_text(f"  - {_located(str(problem), problem.path, config, lines)}\n"))
        if len(ordered) > MAX_PROBLEMS_SHOWN:
            err.write(f"  ... and {len(ordered) - MAX_PROBLEMS_SHOWN} more\n")
        return
    err.write(terminal_text(f"{PROG}: error: {_located(str(error), error.path, config, lines)}\n"))


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``placement`` command; return its exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "nvlink_groups", False) and not args.model_parallel:
        parser.error(
            "--nvlink-groups derives nvlink_group for a model-parallel job: add "
            "--model-parallel, or write nvlink_group on the rules"
        )
    out, err = sys.stdout, sys.stderr
    config = getattr(args, "config", None)
    try:
        if args.command == "schema":
            out.write(json.dumps(config_json_schema(), indent=2) + "\n")
            return EXIT_OK
        if args.command == "validate":
            return _run_validate(args, out)
        if args.command == "slurm-topology":
            return run_slurm_topology(args, out, err)
        return _run_plan(args, out)
    except PlacementError as error:
        _report(error, config, err)
        return EXIT_INVALID
    except BrokenPipeError:
        # The reader went away (`placement plan ... | head`): stop quietly.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_OK
    except KeyboardInterrupt:
        return 130
    except Exception as error:
        if os.environ.get("PLACEMENT_DEBUG"):
            raise
        err.write(
            f"{PROG}: internal error: {type(error).__name__}: {error}\n"
            "This is a bug in placement; run again with PLACEMENT_DEBUG=1 for the traceback "
            "and report it.\n"
        )
        return EXIT_INVALID
