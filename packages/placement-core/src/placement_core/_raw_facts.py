"""The second pass over a config that failed validation: its valid parts, field by field.

Each field is validated on its own with the same annotated type the models use
(:mod:`placement_core._fields`), so the cross-part rules of :mod:`placement_core._checks`
run on everything that is valid and skip what is broken (reported by the first pass).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import TypeAdapter, ValidationError

from ._checks import ConfigFacts, EnvFacts, GroupFacts, HardwareFacts, RuleFacts
from ._fields import EnvVars, GroupLabels, InterpreterPath, Label, NodeRanks, PositiveInt
from .errors import PlacementError
from .hardware import HardwareConfig, hardware_model

__all__ = ["raw_facts"]


_NODE_RANKS: TypeAdapter[tuple[int, ...]] = TypeAdapter(NodeRanks)
_LABEL: TypeAdapter[str] = TypeAdapter(Label)
_ENV_VARS: TypeAdapter[tuple[tuple[str, str], ...]] = TypeAdapter(EnvVars)
_INTERPRETER: TypeAdapter[str] = TypeAdapter(InterpreterPath)
_GROUP_LABELS: TypeAdapter[tuple[str, ...]] = TypeAdapter(GroupLabels)
_POSITIVE: TypeAdapter[int] = TypeAdapter(PositiveInt)


def _valid(adapter: TypeAdapter[Any], raw: Mapping[str, Any], key: str, **context: Any) -> Any:
    """``raw[key]`` validated on its own, or None when it is missing or invalid."""
    if key not in raw:
        return None
    try:
        return adapter.validate_python(raw[key], context=context)
    except (ValidationError, PlacementError):
        return None


def _mappings(value: object) -> list[Mapping[str, Any]]:
    items = value if isinstance(value, list | tuple) else []
    return [item if isinstance(item, Mapping) else {} for item in items]


def _raw_hardware(raw: object) -> HardwareFacts | None:
    if not isinstance(raw, Mapping):
        return None
    kind = raw.get("type")
    model = hardware_model(kind) if isinstance(kind, str) else None
    if model is None:
        return HardwareFacts(None, ())
    configs: list[HardwareConfig | None] = []
    items = raw.get("configs")
    for item in items if isinstance(items, list | tuple) else ():
        try:
            configs.append(model.model_validate(item))
        except ValidationError:
            configs.append(None)
    return HardwareFacts(str(kind), tuple(configs))


def _rule_groups(rule: object) -> tuple[str, ...] | None:
    if not isinstance(rule, Mapping) or "node_group" not in rule:
        return ("cluster",)
    return _valid(_GROUP_LABELS, rule, "node_group")  # type: ignore[no-any-return]


def raw_facts(section: Mapping[str, Any], context: Mapping[str, Any]) -> ConfigFacts:
    """The valid parts of a config that failed validation, each field checked on its own."""
    groups = None
    if isinstance(section.get("node_groups", ()), list | tuple):
        groups = tuple(
            GroupFacts(
                label=_valid(_LABEL, raw, "label"),
                node_ranks=_valid(_NODE_RANKS, raw, "node_ranks", **context),
                env_configs=tuple(
                    EnvFacts(
                        _valid(_NODE_RANKS, env, "node_ranks", **context),
                        _valid(_INTERPRETER, env, "python_interpreter_path"),
                        _valid(_ENV_VARS, env, "env_vars") if "env_vars" in env else (),
                    )
                    for env in _mappings(raw.get("env_configs", ()))
                ),
                hardware=_raw_hardware(raw.get("hardware")),
            )
            for raw in _mappings(section.get("node_groups", ()))
        )
    rules = None
    placement = section.get("component_placement")
    if isinstance(placement, Mapping):
        rules = tuple(
            RuleFacts(
                str(key),
                rule.get("key") if isinstance(rule, Mapping) else None,
                _rule_groups(rule),
            )
            for key, rule in placement.items()
        )
    return ConfigFacts(
        num_nodes=_valid(_POSITIVE, section, "num_nodes"),
        groups=groups,
        rules=rules,
        inventory=tuple(
            _valid(_NODE_RANKS, entry, "node_ranks", **context)
            for entry in _mappings(section.get("inventory", ()))
        ),
        spares=_valid(_NODE_RANKS, section, "spare_nodes", **context),
    )
