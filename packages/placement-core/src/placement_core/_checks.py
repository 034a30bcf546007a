"""Config rules that relate different parts of a cluster config.

See docs/concepts/cluster-config.md and docs/guides/coming-from-rlinf.md.

They run on :class:`ConfigFacts`: the parts of a config that are valid on their own, with
``None`` wherever a field is missing or broken. A rule runs whenever its own inputs are
valid, even when other fields of the config failed, and skips silently otherwise (the
broken field is reported by itself), so every problem is reported once and broken fields
cause no derived errors. Rules yield ``(path suffix, message, value)``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ._problems import did_you_mean
from ._rule_grammar import parse_rule
from ._shown import shown
from ._vocab import RESERVED_LABELS, reserved_env_vars
from .errors import PlacementError, PlacementSyntaxError
from .hardware import HardwareConfig
from .ranks import format_rank_list

__all__ = [
    "RESERVED_LABELS",
    "ConfigFacts",
    "EnvFacts",
    "GroupFacts",
    "HardwareFacts",
    "RuleFacts",
    "cross_check",
    "group_check",
    "nodes",
    "rule_syntax_error",
    "unknown_group_message",
]

Issue = tuple[str, str, object]


@dataclass(frozen=True, slots=True)
class EnvFacts:
    """One env_config: its valid fields (None when missing or broken)."""

    node_ranks: tuple[int, ...] | None
    interpreter: str | None
    env_vars: tuple[tuple[str, str], ...] | None


@dataclass(frozen=True, slots=True)
class HardwareFacts:
    """A group's hardware: its type when registered, and each config when valid."""

    type: str | None
    configs: tuple[HardwareConfig | None, ...]


@dataclass(frozen=True, slots=True)
class GroupFacts:
    """One node group: its valid fields (None when missing or broken)."""

    label: str | None
    node_ranks: tuple[int, ...] | None
    env_configs: tuple[EnvFacts, ...]
    hardware: HardwareFacts | None


@dataclass(frozen=True, slots=True)
class RuleFacts:
    """One component_placement entry: its key and, when valid, its group labels."""

    key: str
    declared_key: object
    node_groups: tuple[str, ...] | None


@dataclass(frozen=True, slots=True)
class ConfigFacts:
    """The valid parts of a config; ``None`` for a section that is missing or broken."""

    num_nodes: int | None
    groups: tuple[GroupFacts, ...] | None
    rules: tuple[RuleFacts, ...] | None
    inventory: tuple[tuple[int, ...] | None, ...]


def nodes(ranks: Sequence[int]) -> str:
    """``node 3`` or ``nodes 1-2,5``: the subject of a message about node ranks."""
    return f"node {ranks[0]}" if len(ranks) == 1 else f"nodes {format_rank_list(ranks)}"


def _are(ranks: Sequence[int]) -> str:
    return "is" if len(ranks) == 1 else "are"


def cross_check(facts: ConfigFacts, *, groups: bool = False) -> Iterable[Issue]:
    """Rules that relate different parts of a config; yields (path suffix, message, value).

    Args:
        facts: The valid parts of the config.
        groups: Also run each group's own consistency checks (:func:`group_check`);
            a validated config has already passed them.
    """
    yield from _check_ranges(facts)
    yield from _check_labels(facts)
    yield from _check_components(facts)
    if facts.groups is not None:
        if groups:
            for g, group in enumerate(facts.groups):
                for suffix, message, value in group_check(group):
                    yield f".node_groups[{g}]{suffix}", message, value
        yield from _check_environments(facts.groups)
        yield from _check_hardware(facts.groups)
    yield from _check_inventory(facts)


def group_check(group: GroupFacts) -> Iterable[Issue]:
    """One group's own consistency: env_configs and hardware inside its node_ranks."""
    members = frozenset(group.node_ranks) if group.node_ranks is not None else None
    shown = format_rank_list(group.node_ranks) if group.node_ranks is not None else ""
    owner: dict[int, int] = {}
    for i, env in enumerate(group.env_configs):
        if env.node_ranks is None:
            continue
        where = f".env_configs[{i}].node_ranks"
        if members is not None and (outside := [r for r in env.node_ranks if r not in members]):
            yield (
                where,
                f"{nodes(outside)} {_are(outside)} not in the group's node_ranks {shown}",
                format_rank_list(env.node_ranks),
            )
        if shared := [r for r in env.node_ranks if r in owner]:
            yield (
                where,
                f"{nodes(shared)} {_are(shared)} already in env_configs[{owner[shared[0]]}]: "
                "two env_configs of one group may not share a node",
                format_rank_list(env.node_ranks),
            )
        for rank in env.node_ranks:
            owner.setdefault(rank, i)
    if group.hardware is not None and members is not None:
        for i, config in enumerate(group.hardware.configs):
            if config is not None and config.node_rank not in members:
                yield (
                    f".hardware.configs[{i}].node_rank",
                    f"node {config.node_rank} is not in the group's node_ranks {shown}",
                    config.node_rank,
                )


def _check_ranges(facts: ConfigFacts) -> Iterable[Issue]:
    n = facts.num_nodes
    if n is None:
        return

    def message(bad: list[int]) -> str:
        return (
            f"{nodes(bad)} {_are(bad)} out of range: num_nodes is {n}, so valid node ranks "
            f"are 0-{n - 1}"
        )

    for g, group in enumerate(facts.groups or ()):
        if group.node_ranks is not None and (bad := [r for r in group.node_ranks if r >= n]):
            yield f".node_groups[{g}].node_ranks", message(bad), format_rank_list(group.node_ranks)
        for e, env in enumerate(group.env_configs):
            if env.node_ranks is not None and (bad := [r for r in env.node_ranks if r >= n]):
                where = f".node_groups[{g}].env_configs[{e}].node_ranks"
                yield where, message(bad), format_rank_list(env.node_ranks)
        for c, hw in enumerate(group.hardware.configs if group.hardware is not None else ()):
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
    for i, ranks in enumerate(facts.inventory):
        if ranks is not None and (bad := [r for r in ranks if r >= n]):
            yield f".inventory[{i}].node_ranks", message(bad), format_rank_list(ranks)


def _check_labels(facts: ConfigFacts) -> Iterable[Issue]:
    first: dict[str, int] = {}
    for g, group in enumerate(facts.groups or ()):
        if group.label is None:
            continue
        if group.label in RESERVED_LABELS:
            yield (
                f".node_groups[{g}].label",
                f"{shown(group.label)} is reserved for the built-in group of all nodes "
                "(the reserved labels are 'cluster' and 'node'); choose another label",
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


def _check_components(facts: ConfigFacts) -> Iterable[Issue]:
    if facts.rules is None:
        return
    if not facts.rules:
        yield ".component_placement", "expected at least one component", None
    labels = [g.label for g in facts.groups or ()]
    defined = [label for label in labels if label is not None]
    # An unknown reference is only certain when every group's label is known.
    known = (*defined, *RESERVED_LABELS) if len(defined) == len(labels) else None
    owner: dict[str, str] = {}
    for rule in facts.rules:
        where = f".component_placement.{rule.key}"
        if rule.declared_key is not None and rule.declared_key != rule.key:
            yield (
                f"{where}.key",
                "unknown key; the component names are the entry's key",
                rule.declared_key,
            )
            continue
        names = [part.strip() for part in rule.key.split(",")]
        if not all(names):
            yield where, "empty component name in the key (stray comma?)", rule.key
        for name in filter(None, names):
            if name in owner:
                yield (
                    where,
                    f"component {shown(name)} is already placed by "
                    f"component_placement.{owner[name]}",
                    rule.key,
                )
            else:
                owner[name] = rule.key
        if known is None or rule.node_groups is None:
            continue
        for i, label in enumerate(rule.node_groups):
            if label not in known:
                suffix = f"{where}.node_group" + (f"[{i}]" if len(rule.node_groups) > 1 else "")
                yield suffix, unknown_group_message(label, defined), label


def _check_environments(groups: Sequence[GroupFacts]) -> Iterable[Issue]:
    env_owner: dict[tuple[int, str], str] = {}
    interpreter_owner: dict[int, str] = {}
    for g, group in enumerate(groups):
        for e, env in enumerate(group.env_configs):
            where = f".node_groups[{g}].env_configs[{e}]"
            yield from _reserved_env_vars(where, env)
            if env.node_ranks is None:
                continue
            if env.interpreter is not None:
                if clash := [r for r in env.node_ranks if r in interpreter_owner]:
                    yield (
                        f"{where}.python_interpreter_path",
                        f"{nodes(clash)} already get{'s' if len(clash) == 1 else ''} an "
                        f"interpreter from cluster{interpreter_owner[clash[0]]}: at most one "
                        "python_interpreter_path per node across all groups",
                        env.interpreter,
                    )
                for rank in env.node_ranks:
                    interpreter_owner.setdefault(rank, f"{where}.python_interpreter_path")
            for v, (key, _) in enumerate(env.env_vars or ()):
                if clash := [r for r in env.node_ranks if (r, key) in env_owner]:
                    yield (
                        f"{where}.env_vars[{v}]",
                        f"{key} is already set on {nodes(clash)} by "
                        f"cluster{env_owner[(clash[0], key)]}: a key may be set once per node "
                        "across all groups",
                        None,
                    )
                for rank in env.node_ranks:
                    env_owner.setdefault((rank, key), f"{where}.env_vars[{v}]")


def _reserved_env_vars(where: str, env: EnvFacts) -> Iterable[Issue]:
    reserved = reserved_env_vars()
    for v, (key, _) in enumerate(env.env_vars or ()):
        if key in reserved:
            yield (
                f"{where}.env_vars[{v}]",
                f"{key} is a reserved variable that env_vars may not set: placement sets it "
                "for every worker",
                key,
            )


def _check_hardware(groups: Sequence[GroupFacts]) -> Iterable[Issue]:
    # Identical configs inside one group are caught by HardwareSpec; across groups they
    # share a (node, type) and are caught here.
    owner: dict[tuple[int, str], int] = {}
    for g, group in enumerate(groups):
        if group.hardware is None or group.hardware.type is None:
            continue
        kind = group.hardware.type
        ranks = sorted({hw.node_rank for hw in group.hardware.configs if hw is not None})
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


def _check_inventory(facts: ConfigFacts) -> Iterable[Issue]:
    owner: dict[int, int] = {}
    for i, ranks in enumerate(facts.inventory):
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
