"""Config rules that relate different parts of a cluster config (SPEC 3, 12.11).

They run once every field is valid on its own, and yield ``(path suffix, message, value)``
for every broken rule so that all of them are reported together.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable
from typing import TYPE_CHECKING

from ._problems import did_you_mean
from .errors import PlacementError, PlacementSyntaxError
from .ranks import format_rank_list

if TYPE_CHECKING:
    from .config import ClusterConfig, EnvConfig

__all__ = ["cross_check", "rule_syntax_error"]

RESERVED_LABELS = ("cluster", "node")


def cross_check(config: ClusterConfig) -> Iterable[tuple[str, str, object]]:
    """Rules that relate different parts of a config; yields (path suffix, message, value)."""
    yield from _check_ranges(config)
    yield from _check_labels(config)
    yield from _check_components(config)
    yield from _check_environments(config)
    yield from _check_hardware(config)
    yield from _check_inventory(config)


def _out_of_range(ranks: Iterable[int], num_nodes: int) -> list[int]:
    return [r for r in ranks if r >= num_nodes]


def _check_ranges(config: ClusterConfig) -> Iterable[tuple[str, str, object]]:
    n = config.num_nodes

    def message(bad: list[int]) -> str:
        return (
            f"nodes {format_rank_list(bad)} are out of range: num_nodes is {n}, so valid "
            f"node ranks are 0-{n - 1}"
        )

    for g, group in enumerate(config.node_groups):
        if bad := _out_of_range(group.node_ranks, n):
            yield f".node_groups[{g}].node_ranks", message(bad), format_rank_list(group.node_ranks)
        for e, env in enumerate(group.env_configs):
            if bad := _out_of_range(env.node_ranks, n):
                where = f".node_groups[{g}].env_configs[{e}].node_ranks"
                yield where, message(bad), format_rank_list(env.node_ranks)
        if group.hardware is not None:
            for c, hw in enumerate(group.hardware.configs):
                controller = getattr(hw, "controller_node_rank", None)
                if isinstance(controller, int) and controller >= n:
                    where = f".node_groups[{g}].hardware.configs[{c}].controller_node_rank"
                    yield where, message([controller]), controller
    for i, entry in enumerate(config.inventory):
        if bad := _out_of_range(entry.node_ranks, n):
            yield f".inventory[{i}].node_ranks", message(bad), format_rank_list(entry.node_ranks)


def _check_labels(config: ClusterConfig) -> Iterable[tuple[str, str, object]]:
    first: dict[str, int] = {}
    for g, group in enumerate(config.node_groups):
        if group.label in RESERVED_LABELS:
            yield (
                f".node_groups[{g}].label",
                f"{group.label!r} is reserved (the reserved labels are 'cluster' and 'node')",
                group.label,
            )
        elif group.label in first:
            yield (
                f".node_groups[{g}].label",
                f"label already used by node_groups[{first[group.label]}]: labels are unique",
                group.label,
            )
        else:
            first[group.label] = g


def _check_components(config: ClusterConfig) -> Iterable[tuple[str, str, object]]:
    if not config.component_placement:
        yield ".component_placement", "expected at least one component", None
    known = tuple(dict.fromkeys((*config.labels, *RESERVED_LABELS)))
    owner: dict[str, str] = {}
    for key, rule in config.component_placement.items():
        where = f".component_placement.{key}"
        if rule.key != key:
            yield f"{where}.key", "unknown key; the component names are the entry's key", rule.key
            continue
        for name in rule.names:
            if not name:
                yield where, "empty component name in the key (stray comma?)", key
            elif name in owner:
                yield (
                    where,
                    f"component {name!r} is already placed by component_placement.{owner[name]}",
                    key,
                )
            else:
                owner[name] = key
        for i, label in enumerate(rule.node_groups):
            if label not in known:
                suffix = f"{where}.node_group" + (f"[{i}]" if len(rule.node_groups) > 1 else "")
                yield (
                    suffix,
                    f"no node group is labelled {label!r}; known groups: {', '.join(known)}"
                    + did_you_mean(label, known),
                    label,
                )


def _check_environments(config: ClusterConfig) -> Iterable[tuple[str, str, object]]:
    env_owner: dict[tuple[int, str], str] = {}
    interpreter_owner: dict[int, str] = {}
    for g, group in enumerate(config.node_groups):
        for e, env in enumerate(group.env_configs):
            where = f".node_groups[{g}].env_configs[{e}]"
            if env.python_interpreter_path is not None:
                clash = [r for r in env.node_ranks if r in interpreter_owner]
                if clash:
                    yield (
                        f"{where}.python_interpreter_path",
                        f"nodes {format_rank_list(clash)} already get an interpreter from "
                        f"cluster{interpreter_owner[clash[0]]}: at most one "
                        "python_interpreter_path per node across all groups",
                        env.python_interpreter_path,
                    )
                for rank in env.node_ranks:
                    interpreter_owner.setdefault(rank, f"{where}.python_interpreter_path")
            for v, (key, _) in enumerate(env.env_vars):
                clash = [r for r in env.node_ranks if (r, key) in env_owner]
                if clash:
                    yield (
                        f"{where}.env_vars[{v}]",
                        f"{key} is already set on nodes {format_rank_list(clash)} by "
                        f"cluster{env_owner[(clash[0], key)]}: a key may be set once per node "
                        "across all groups",
                        None,
                    )
                for rank in env.node_ranks:
                    env_owner.setdefault((rank, key), f"{where}.env_vars[{v}]")
            yield from _reserved_env_vars(where, env)


def _reserved_env_vars(where: str, env: EnvConfig) -> Iterable[tuple[str, str, object]]:
    reserved = _reserved_names()
    for v, (key, _) in enumerate(env.env_vars):
        if key in reserved:
            yield (
                f"{where}.env_vars[{v}]",
                f"{key} is set by placement for every worker and cannot be overridden",
                key,
            )


def _reserved_names() -> frozenset[str]:
    try:
        worker_env = importlib.import_module("placement_core.env")
    except ImportError:
        return frozenset()
    return frozenset(getattr(worker_env, "RESERVED_ENV_VARS", ()))


def _check_hardware(config: ClusterConfig) -> Iterable[tuple[str, str, object]]:
    # Identical configs inside one group are caught by HardwareSpec; across groups they
    # share a (node, type) and are caught here.
    owner: dict[tuple[int, str], int] = {}
    for g, group in enumerate(config.node_groups):
        if group.hardware is None:
            continue
        kind = group.hardware.type
        nodes = sorted({hw.node_rank for hw in group.hardware.configs})
        clashes: dict[int, list[int]] = {}
        for rank in nodes:
            first = owner.setdefault((rank, kind), g)
            if first != g:
                clashes.setdefault(first, []).append(rank)
        for first, ranks in clashes.items():
            yield (
                f".node_groups[{g}].hardware",
                f"{kind} devices of nodes {format_rank_list(ranks)} are already declared by "
                f"node_groups[{first}]: one group per (node, hardware type)",
                kind,
            )


def _check_inventory(config: ClusterConfig) -> Iterable[tuple[str, str, object]]:
    owner: dict[int, int] = {}
    for i, entry in enumerate(config.inventory):
        clash = [r for r in entry.node_ranks if r in owner]
        if clash:
            yield (
                f".inventory[{i}].node_ranks",
                f"nodes {format_rank_list(clash)} are already described by "
                f"inventory[{owner[clash[0]]}]: each node once",
                format_rank_list(entry.node_ranks),
            )
        for rank in entry.node_ranks:
            owner.setdefault(rank, i)


def rule_syntax_error(text: str) -> str | None:
    """The syntax error of a placement rule, with a caret line, or None when it parses.

    Uses :func:`placement_core.rules.parse_rule` when that module is available.
    """
    try:
        from .rules import parse_rule
    except ImportError:
        return None
    try:
        parse_rule(text)
    except PlacementSyntaxError as error:
        start, end = error.span
        caret = " " * start + "^" * max(1, end - start)
        return f"{error.reason}\n    {error.source}\n    {caret}"
    except PlacementError as error:
        return error.reason
    return None
