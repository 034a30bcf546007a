"""Config rules that relate different parts of a cluster config.

See docs/concepts/cluster-config.md and docs/guides/coming-from-rlinf.md.

They run on :class:`~placement_core._validate.Part` s: the fields of a config that are
valid on their own (``part.get(name)`` is ``None`` wherever a field is broken). A rule
runs whenever its own inputs are valid, even when other fields of the config failed, and
skips silently otherwise (the broken field is reported by itself), so every problem is
reported once and broken fields cause no derived errors. Rules yield
``(path suffix, message, value)``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from ._errors import PlacementError, PlacementSyntaxError
from ._hardware import HardwareConfig
from ._problems import did_you_mean
from ._ranks import format_rank_list
from ._rule_grammar import parse_rule
from ._shown import shown
from ._validate import Issue, Part
from ._vocab import RESERVED_LABELS, reserved_env_vars

__all__ = [
    "RESERVED_LABELS",
    "cross_check",
    "group_check",
    "nodes",
    "rule_syntax_error",
    "unknown_group_message",
]


def nodes(ranks: Sequence[int]) -> str:
    """``node 3`` or ``nodes 1-2,5``: the subject of a message about node ranks."""
    return f"node {ranks[0]}" if len(ranks) == 1 else f"nodes {format_rank_list(ranks)}"


def _are(ranks: Sequence[int]) -> str:
    return "is" if len(ranks) == 1 else "are"


def cross_check(config: Part) -> Iterable[Issue]:
    """Rules that relate different parts of a config; yields (path suffix, message, value).

    Args:
        config: The valid parts of the ``cluster:`` section.
    """
    groups: tuple[Part, ...] | None = config.get("node_groups")
    yield from _check_ranges(config)
    yield from _check_labels(groups or ())
    yield from _check_components(config)
    if groups is not None:
        yield from _check_environments(groups)
        yield from _check_hardware(groups)
    yield from _check_inventory(_inventory(config))


def _inventory(config: Part) -> list[tuple[int, ...] | None]:
    return [entry.get("node_ranks") for entry in config.parts("inventory")]


def _configs(group: Part) -> tuple[HardwareConfig | None, ...]:
    """A group's hardware configs that are valid (None for each broken one)."""
    hardware = group.get("hardware")
    if not isinstance(hardware, Part) or hardware.get("type") is None:
        return ()
    return hardware.get("configs") or ()


def group_check(group: Part) -> Iterable[Issue]:
    """One group's own consistency: env_configs and hardware inside its node_ranks."""
    ranks: tuple[int, ...] | None = group.get("node_ranks")
    members = frozenset(ranks) if ranks is not None else None
    shown = format_rank_list(ranks) if ranks is not None else ""
    owner: dict[int, int] = {}
    for i, env in enumerate(group.parts("env_configs")):
        env_ranks: tuple[int, ...] | None = env.get("node_ranks")
        if env_ranks is None:
            continue
        where = f".env_configs[{i}].node_ranks"
        if members is not None and (outside := [r for r in env_ranks if r not in members]):
            yield (
                where,
                f"{nodes(outside)} {_are(outside)} not in the group's node_ranks {shown}",
                format_rank_list(env_ranks),
            )
        if shared := [r for r in env_ranks if r in owner]:
            yield (
                where,
                f"{nodes(shared)} {_are(shared)} already in env_configs[{owner[shared[0]]}]: "
                "two env_configs of one group may not share a node",
                format_rank_list(env_ranks),
            )
        for rank in env_ranks:
            owner.setdefault(rank, i)
    if members is not None:
        for i, config in enumerate(_configs(group)):
            if config is not None and config.node_rank not in members:
                yield (
                    f".hardware.configs[{i}].node_rank",
                    f"node {config.node_rank} is not in the group's node_ranks {shown}",
                    config.node_rank,
                )


def _check_ranges(config: Part) -> Iterable[Issue]:
    n: int | None = config.get("num_nodes")
    if n is None:
        return

    def message(bad: list[int]) -> str:
        return (
            f"{nodes(bad)} {_are(bad)} out of range: num_nodes is {n}, so valid node ranks "
            f"are 0-{n - 1}"
        )

    for g, group in enumerate(config.get("node_groups") or ()):
        ranks = group.get("node_ranks")
        if ranks is not None and (bad := [r for r in ranks if r >= n]):
            yield f".node_groups[{g}].node_ranks", message(bad), format_rank_list(ranks)
        for e, env in enumerate(group.parts("env_configs")):
            ranks = env.get("node_ranks")
            if ranks is not None and (bad := [r for r in ranks if r >= n]):
                where = f".node_groups[{g}].env_configs[{e}].node_ranks"
                yield where, message(bad), format_rank_list(ranks)
        for c, hw in enumerate(_configs(group)):
            # controller_node_rank, left_controller_node_rank, ...: nodes the device uses.
            for field in type(hw).model_fields if hw is not None else ():
                controller = getattr(hw, field)
                if (
                    field.endswith("controller_node_rank")
                    and isinstance(controller, int)
                    and controller >= n
                ):
                    where = f".node_groups[{g}].hardware.configs[{c}].{field}"
                    yield where, message([controller]), controller
    for i, ranks in enumerate(_inventory(config)):
        if ranks is not None and (bad := [r for r in ranks if r >= n]):
            yield f".inventory[{i}].node_ranks", message(bad), format_rank_list(ranks)


def _check_labels(groups: Sequence[Part]) -> Iterable[Issue]:
    first: dict[str, int] = {}
    for g, group in enumerate(groups):
        label: str | None = group.get("label")
        if label is None:
            continue
        if label in RESERVED_LABELS:
            yield (
                f".node_groups[{g}].label",
                f"{shown(label)} is reserved for the built-in group of all nodes "
                "(the reserved labels are 'cluster' and 'node'); choose another label",
                label,
            )
        elif label in first:
            yield (
                f".node_groups[{g}].label",
                f"label already used by node_groups[{first[label]}]: labels are unique",
                label,
            )
        else:
            first[label] = g


def unknown_group_message(label: str, defined: Sequence[str]) -> str:
    """The message for a ``node_group`` that names no group, listing the defined ones."""
    own = [d for d in dict.fromkeys(defined) if d not in RESERVED_LABELS]
    if own:
        listed = f"the defined groups are {', '.join(own)}, plus the reserved 'cluster' and 'node'"
    else:
        listed = "no node_groups are defined, so only the reserved 'cluster' and 'node' exist"
    return f"{shown(label)} is not a defined node group: {listed}" + did_you_mean(
        label, (*own, *RESERVED_LABELS)
    )


def _check_components(config: Part) -> Iterable[Issue]:
    rules: dict[str, Part] | None = config.get("component_placement")
    if rules is None:
        return
    if not rules:
        yield ".component_placement", "expected at least one component", None
    labels = [g.get("label") for g in config.get("node_groups") or ()]
    defined = [label for label in labels if label is not None]
    # An unknown reference is only certain when every group's label is known.
    known = (*defined, *RESERVED_LABELS) if len(defined) == len(labels) else None
    owner: dict[str, str] = {}
    for key, rule in rules.items():
        where = f".component_placement.{key}"
        names = [part.strip() for part in key.split(",")]
        if not all(names):
            yield where, "empty component name in the key (stray comma?)", key
        for name in filter(None, names):
            if name in owner:
                yield (
                    where,
                    f"component {shown(name)} is already placed by "
                    f"component_placement.{owner[name]}",
                    key,
                )
            else:
                owner[name] = key
        groups: tuple[str, ...] | None = rule.get("node_groups")
        if known is None or groups is None:
            continue
        for i, label in enumerate(groups):
            if label not in known:
                suffix = f"{where}.node_group" + (f"[{i}]" if len(groups) > 1 else "")
                yield suffix, unknown_group_message(label, defined), label


def _check_environments(groups: Sequence[Part]) -> Iterable[Issue]:
    env_owner: dict[tuple[int, str], str] = {}
    interpreter_owner: dict[int, str] = {}
    for g, group in enumerate(groups):
        for e, env in enumerate(group.parts("env_configs")):
            where = f".node_groups[{g}].env_configs[{e}]"
            env_vars: tuple[tuple[str, str], ...] = env.get("env_vars") or ()
            yield from _reserved_env_vars(where, env_vars)
            ranks: tuple[int, ...] | None = env.get("node_ranks")
            if ranks is None:
                continue
            interpreter = env.get("python_interpreter_path")
            if interpreter is not None:
                if clash := [r for r in ranks if r in interpreter_owner]:
                    yield (
                        f"{where}.python_interpreter_path",
                        f"{nodes(clash)} already get{'s' if len(clash) == 1 else ''} an "
                        f"interpreter from cluster{interpreter_owner[clash[0]]}: at most one "
                        "python_interpreter_path per node across all groups",
                        interpreter,
                    )
                for rank in ranks:
                    interpreter_owner.setdefault(rank, f"{where}.python_interpreter_path")
            for v, (key, _) in enumerate(env_vars):
                if clash := [r for r in ranks if (r, key) in env_owner]:
                    yield (
                        f"{where}.env_vars[{v}]",
                        f"{key} is already set on {nodes(clash)} by "
                        f"cluster{env_owner[(clash[0], key)]}: a key may be set once per node "
                        "across all groups",
                        None,
                    )
                for rank in ranks:
                    env_owner.setdefault((rank, key), f"{where}.env_vars[{v}]")


def _reserved_env_vars(where: str, env_vars: tuple[tuple[str, str], ...]) -> Iterable[Issue]:
    reserved = reserved_env_vars()
    for v, (key, _) in enumerate(env_vars):
        if key in reserved:
            yield (
                f"{where}.env_vars[{v}]",
                f"{key} is a reserved variable that env_vars may not set: placement sets it "
                "for every worker",
                key,
            )


def _check_hardware(groups: Sequence[Part]) -> Iterable[Issue]:
    # Identical configs inside one group are caught by HardwareSpec; across groups they
    # share a (node, type) and are caught here.
    owner: dict[tuple[int, str], int] = {}
    for g, group in enumerate(groups):
        configs = _configs(group)
        if not configs:
            continue
        kind = group.get("hardware").get("type")
        ranks = sorted({hw.node_rank for hw in configs if hw is not None})
        clashes: dict[int, list[int]] = {}
        for rank in ranks:
            first = owner.setdefault((rank, kind), g)
            if first != g:
                clashes.setdefault(first, []).append(rank)
        for first, clash in clashes.items():
            yield (
                f".node_groups[{g}].hardware",
                f"{kind} devices of {nodes(clash)} are already declared by "
                f"node_groups[{first}]: one group per (node, hardware type)",
                kind,
            )


def _check_inventory(inventory: Sequence[tuple[int, ...] | None]) -> Iterable[Issue]:
    owner: dict[int, int] = {}
    for i, ranks in enumerate(inventory):
        if ranks is None:
            continue
        if clash := [r for r in ranks if r in owner]:
            yield (
                f".inventory[{i}].node_ranks",
                f"{nodes(clash)} {_are(clash)} already described by "
                f"inventory[{owner[clash[0]]}]: each node once",
                format_rank_list(ranks),
            )
        for rank in ranks:
            owner.setdefault(rank, i)


def rule_syntax_error(text: str) -> str | None:
    """The syntax error of a placement rule, with a caret line, or None when it parses."""
    try:
        parse_rule(text)
    except PlacementSyntaxError as error:
        return error.excerpt
    except PlacementError as error:
        return error.reason
    return None
