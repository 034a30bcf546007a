"""The annotated field types of the cluster config: each field's parsing and checks once.

The models (:mod:`placement_core._models`) declare their fields with these types; each
type is validated on its own by :mod:`placement_core._validate`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    BeforeValidator,
    Field,
    PlainValidator,
    ValidationInfo,
    WithJsonSchema,
)

from ._checks import nodes, rule_syntax_error
from ._errors import PlacementError, PlacementSyntaxError
from ._limits import MAX_EXPANDED_RANKS
from ._problems import Issues, issue
from ._ranks import format_rank_list, parse_rank_list
from ._scalars import is_int
from ._shown import shown
from ._validate import SKIPPED

__all__ = [
    "ALL_UNRESOLVED",
    "RANKS_SPENT",
    "RANK_BUDGET",
    "EnvVars",
    "GroupLabels",
    "InterpreterPath",
    "Label",
    "NodeRanks",
    "NonNegativeInt",
    "PlacementText",
    "PositiveInt",
]

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


_RANK_LIST_SCHEMA: dict[str, Any] = {
    "description": "rank list: '0-3,8,10-11', 'all', an int, or a list of ints and range strings",
    "anyOf": [
        {"type": "string"},
        {"type": "integer", "minimum": 0},
        {
            "type": "array",
            "items": {"anyOf": [{"type": "integer", "minimum": 0}, {"type": "string"}]},
        },
    ],
}


def _node_ranks(value: object, info: ValidationInfo) -> tuple[int, ...]:
    if isinstance(value, tuple) and all(type(v) is int for v in value):
        value = list(value)
    context = info.context or {}
    given = context.get("num_nodes")
    num_nodes = given if isinstance(given, int) and given > 0 else None
    if "num_nodes" in context and num_nodes is None and _mentions_all(value):
        raise issue(ALL_UNRESOLVED)  # num_nodes is broken and reported by itself
    budget = context.get(RANK_BUDGET)
    if isinstance(budget, list) and budget[0] < 0:
        raise issue(RANKS_SPENT)  # the list that spent the budget is reported
    try:
        ranks = parse_rank_list(
            value, available=range(num_nodes) if num_nodes and _mentions_all(value) else None
        )
    except PlacementSyntaxError as error:
        raise issue(error.excerpt, None, error.path or "") from None
    except PlacementError as error:
        raise issue(error.reason, None, error.path or "") from None
    if num_nodes is not None and (bad := [r for r in ranks if r >= num_nodes]):
        raise issue(
            f"{nodes(bad)} {'is' if len(bad) == 1 else 'are'} out of range: num_nodes is "
            f"{num_nodes}, so valid node ranks are 0-{num_nodes - 1}",
            format_rank_list(ranks),
        )
    if isinstance(budget, list):
        budget[0] -= len(ranks)
        if budget[0] < 0:
            raise issue(
                f"the config's rank lists name more than {MAX_EXPANDED_RANKS:,} node ranks in "
                "all (every node_ranks counts, overlapping ones too): is a range mistyped?",
                format_rank_list(ranks),
            )
    return ranks


#: The context key of the node ranks one load may still expand: a one-item list shared
#: by every rank list of the config (``[MAX_EXPANDED_RANKS]``), so a small config of many
#: wide, overlapping ranges cannot expand to hundreds of millions of ranks.
RANK_BUDGET = "rank_budget"
#: Reported instead of rank lists left unchecked once the budget is spent.
RANKS_SPENT = "not checked: the config's rank lists already name too many node ranks"


#: Reported instead of a node_ranks problem that only a broken num_nodes caused.
ALL_UNRESOLVED = "'all' cannot be resolved: num_nodes is invalid"
SKIPPED.update((ALL_UNRESOLVED, RANKS_SPENT))


def _mentions_all(value: object) -> bool:
    items = value if isinstance(value, list | tuple) else [value]
    return any(isinstance(item, str) and "all" in item.lower() for item in items)


NodeRanks = Annotated[
    tuple[int, ...], BeforeValidator(_node_ranks), WithJsonSchema(_RANK_LIST_SCHEMA)
]


def _spare_ranks(value: object, info: ValidationInfo) -> tuple[int, ...]:
    if isinstance(value, list | tuple) and not value:
        return ()  # no spares: the default, or `spare_nodes: []`
    return _node_ranks(value, info)


def _spares(value: object, info: ValidationInfo) -> tuple[int, ...] | dict[str, int]:
    if not isinstance(value, Mapping):
        return _spare_ranks(value, info)
    counts: dict[str, int] = {}
    for key, count in value.items():
        name = str(key) if is_int(key) else key
        if not isinstance(name, str) or not name.strip() or name != name.strip():
            raise issue(
                "expected an NVLink domain name such as rack-a (a non-empty string without "
                "leading or trailing spaces) as the key",
                key,
            )
        if not is_int(count) or count < 1:
            raise issue(
                "expected how many of the domain's nodes to keep as spares (an int >= 1)",
                count,
                f".{name}",
            )
        counts[name] = count
    if not counts:
        return ()
    return counts


#: ``cluster.spare_nodes``: a rank list, an empty list for none, or NVLink domain -> how
#: many of its last nodes are spares (resolved against the inventory when planning).
SpareNodes = Annotated[
    tuple[int, ...] | dict[str, int],
    PlainValidator(_spares),
    WithJsonSchema(
        {
            "description": "spare nodes: a rank list, or NVLink domain -> spare count",
            "anyOf": [
                *_RANK_LIST_SCHEMA["anyOf"],
                {"type": "object", "additionalProperties": {"type": "integer", "minimum": 1}},
            ],
        }
    ),
]
PositiveInt = Annotated[int, Field(strict=True, gt=0)]
NonNegativeInt = Annotated[int, Field(strict=True, ge=0)]


def _label(value: object) -> object:
    if is_int(value):
        return str(value)  # `label: 4090` is an int in YAML
    if isinstance(value, str):
        if not value.strip():
            raise issue("a label cannot be empty", value)
        if value != value.strip() or "," in value:
            raise issue(
                "a label cannot contain commas or leading/trailing spaces "
                "(commas separate labels in node_group)",
                value,
            )
    return value


Label = Annotated[
    str,
    BeforeValidator(_label),
    WithJsonSchema({"description": "group label", "type": ["string", "integer"]}),
]


def _env_vars(value: object) -> object:
    if isinstance(value, Mapping):
        value = [{k: v} for k, v in value.items()]
    if not isinstance(value, list | tuple):
        raise issue(
            "expected a list of single-key maps such as [{GLOO_SOCKET_IFNAME: eth0}]", value
        )
    issues: list[tuple[str, str, object]] = []
    pairs: list[tuple[str, str]] = []
    seen: dict[str, int] = {}
    for i, item in enumerate(value):
        if isinstance(item, tuple) and len(item) == 2:
            key, raw = item
        elif isinstance(item, Mapping) and len(item) == 1:
            ((key, raw),) = item.items()
        else:
            issues.append(
                (f"[{i}]", "expected a single-key map such as {GLOO_SOCKET_IFNAME: eth0}", item)
            )
            continue
        if not isinstance(key, str) or not _ENV_NAME.match(key):
            issues.append(
                (
                    f"[{i}]",
                    "expected an environment variable name (letters, digits, '_'; "
                    "not starting with a digit)",
                    key,
                )
            )
            continue
        if isinstance(raw, bool) or raw is None or not isinstance(raw, str | int | float):
            hint = (
                " (YAML reads true/false as booleans and ~/null as null: quote the value)"
                if isinstance(raw, bool) or raw is None
                else ""
            )
            issues.append((f"[{i}].{key}", f"expected a string or number value{hint}", raw))
            continue
        if key in seen:
            issues.append(
                (
                    f"[{i}]",
                    f"{key} is already set by env_vars[{seen[key]}] of this env_config",
                    None,
                )
            )
            continue
        seen[key] = i
        pairs.append((key, str(raw)))
    if issues:
        raise Issues(issues)
    return tuple(pairs)


EnvVars = Annotated[
    tuple[tuple[str, str], ...],
    BeforeValidator(_env_vars),
    WithJsonSchema(
        {
            "description": "list of single-key maps, e.g. [{GLOO_SOCKET_IFNAME: eth0}]",
            "type": "array",
            "items": {
                "type": "object",
                "minProperties": 1,
                "maxProperties": 1,
                "additionalProperties": {"type": ["string", "number"]},
            },
        }
    ),
]


def _node_group_labels(value: object) -> object:
    if is_int(value):
        value = str(value)
    if isinstance(value, str):
        items: list[object] = [part.strip() for part in value.split(",")]
    elif isinstance(value, list | tuple):
        items = [str(v) if is_int(v) else v for v in value]
    else:
        raise issue("expected a group label, 'a800,4090', or a list of labels", value)
    issues: list[tuple[str, str, object]] = []
    labels: list[str] = []
    for i, item in enumerate(items):
        suffix = f"[{i}]" if isinstance(value, list | tuple) else ""
        if not isinstance(item, str) or not item.strip():
            issues.append((suffix, "expected a non-empty group label", item))
        elif item.strip() in labels:
            issues.append((suffix, f"group {shown(item.strip())} is listed twice", value))
        else:
            labels.append(item.strip())
    if not items:
        issues.append(("", "expected at least one group label", value))
    if issues:
        raise Issues(issues)
    return tuple(labels)


GroupLabels = Annotated[
    tuple[str, ...],
    BeforeValidator(_node_group_labels),
    WithJsonSchema(
        {
            "description": "a group label, 'a800,4090', or a list of labels (default: cluster)",
            "anyOf": [{"type": "string"}, {"type": "integer"}, {"type": "array"}],
        }
    ),
]


def _interpreter(value: str) -> str:
    if not value.strip():
        raise issue("expected a path to a Python interpreter, got an empty string", value)
    return value


InterpreterPath = Annotated[str, AfterValidator(_interpreter)]


def _placement_text(value: object) -> object:
    if is_int(value):
        return str(value)
    if not isinstance(value, str) or not value.strip():
        raise issue("expected a placement rule such as '0-7' or '0-15:0-3'", value)
    return value


def _placement_syntax(text: str) -> str:
    error = rule_syntax_error(text)
    if error is not None:
        raise issue(error)
    return text


PlacementText = Annotated[
    str,
    BeforeValidator(_placement_text),
    AfterValidator(_placement_syntax),
    WithJsonSchema(
        {
            "description": "'resources[:processes]' segments, e.g. '0-7' or '0-15:0-3'",
            "type": ["string", "integer"],
        }
    ),
]
