"""The memory check on the ``placement`` command line: ``--memory-headroom`` and the report."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping
from pathlib import Path

from ._config import ClusterConfig
from ._errors import ConfigError, InventoryError
from ._interpolate import JobDocument
from ._memory import Headroom, MemoryReport, check_memory, load_memory, parse_headroom
from ._memory_units import format_bytes
from ._model_parallel_memory import rlinf_memory
from ._plan import Plan
from ._yamlio import read_document

__all__ = ["add_memory_option", "memory_report", "memory_summary"]


def _headroom(text: str) -> Headroom:
    try:
        return parse_headroom(text)
    except ConfigError as error:
        raise argparse.ArgumentTypeError(error.problems[0].message) from None


def add_memory_option(parser: argparse.ArgumentParser) -> None:
    """``--memory-headroom``, for ``plan`` and ``validate``."""
    parser.add_argument(
        "--memory-headroom",
        metavar="SIZE",
        type=_headroom,
        help="with a memory: section: keep this much of every GPU free, a percentage of its "
        "memory ('10%%') or bytes ('4GiB'); default none",
    )


def _document(args: argparse.Namespace, job: JobDocument | None) -> Mapping[str, object] | None:
    if job is not None:
        return job.document
    document, _ = read_document(args.config)
    return document if isinstance(document, Mapping) else None


def memory_report(
    args: argparse.Namespace, config: ClusterConfig, job: JobDocument | None, result: Plan | None
) -> MemoryReport | None:
    """The memory check of the job, when it has a ``memory:`` section (or, for an RLinf
    job planned with ``--model-parallel``, the keys RLinf sizes memory with).

    Returns:
        None without a section, or when nothing was planned (the section is checked
        all the same).

    Raises:
        ConfigError: The section breaks a rule.
        InventoryError: A GPU's capacity is unknown.
    """
    document = _document(args, job)
    components = result.config if result is not None else config
    spec = None
    if document is not None:
        spec = load_memory(document, components, base_dir=Path(args.config).parent)
        if spec is None and job is not None and result is not None:
            return _rlinf_report(job, result, args.memory_headroom)
    if spec is None:
        if args.memory_headroom is not None:
            sys.stderr.write(
                "placement: note: --memory-headroom has nothing to check: the config has no "
                "memory: section\n"
            )
        return None
    if result is None:
        return None
    return check_memory(result, spec, headroom=args.memory_headroom)


def _rlinf_report(job: JobDocument, result: Plan, headroom: Headroom | None) -> MemoryReport | None:
    """The check RLinf's own keys describe; a note instead where a GPU's size is unknown
    (the job never asked for the check)."""
    spec = rlinf_memory(job, result.config)
    if spec is None:
        return None
    try:
        return check_memory(result, spec, headroom=headroom)
    except InventoryError:
        sys.stderr.write(
            "placement: note: memory not checked: the GPUs' sizes are unknown (node "
            "snapshots, or an inventory: model or memory_bytes, give them)\n"
        )
        return None


def memory_summary(report: MemoryReport) -> str:
    """``memory: fits: peak 58.0 GiB of 79.6 GiB (node 0, GPU 0, phase rollout)``."""
    if not report.groups:
        return "memory: fits (no GPU holds a component with a memory: entry)"
    group = max(report.groups, key=lambda g: g.peak.total_bytes / max(g.usable_bytes, 1))
    node, index = group.nodes[0], group.indices[0]
    text = (
        f"memory: fits: peak {format_bytes(group.peak.total_bytes)} of "
        f"{format_bytes(group.capacity_bytes)} (node {node}, GPU {index}, phase "
        f"{group.peak.name})"
    )
    if report.host_groups:
        host = max(report.host_groups, key=lambda h: h.total_bytes)
        size = f" of {format_bytes(host.capacity_bytes)}" if host.capacity_bytes else ""
        text += f"; host peak {format_bytes(host.total_bytes)}{size} (node {host.nodes[0]})"
    return text
