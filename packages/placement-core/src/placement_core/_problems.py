"""Turning pydantic's validation errors into placement's Problems with YAML paths.

Validators raise :class:`Issues` (a ``ValueError`` carrying several problems with paths
relative to the value checked); pydantic records it at the value's location, and
:func:`problems_from_validation_error` expands everything back into
:class:`~placement_core.Problem` entries with our messages, never pydantic's.
"""

from __future__ import annotations

import difflib
import types
from collections.abc import Iterable, Sequence
from typing import Annotated, Any, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError

from ._errors import PlacementError, Problem

__all__ = ["Issues", "did_you_mean", "issue", "issues_from", "problems_from_validation_error"]


class Issues(PlacementError, ValueError):
    """Problems found inside one validator, with paths relative to the value checked.

    Raised from validators (pydantic records a ValueError at the value's location);
    load_config expands them back into :class:`Problem` entries, so users never see
    this class. Each issue is ``(suffix, message, value)``; ``suffix`` is appended to
    the path of the value (``""``, ``"[2]"``, ``".node_ranks"``).
    """

    def __init__(
        self, issues: Sequence[tuple[str, str, object]], *, partial: object = None
    ) -> None:
        self.issues = tuple(issues)
        #: For a list with broken items: the value with None for each broken item, so
        #: the rules relating parts of a config still see the valid ones.
        self.partial = partial
        super().__init__("; ".join(f"{s}: {m}" if s else m for s, m, _ in self.issues))


def issue(message: str, value: object = None, suffix: str = "") -> Issues:
    return Issues([(suffix, message, value)])


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _loc_suffix(loc: Sequence[str | int]) -> str:
    return "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in loc)


def _unwrap(annotation: Any) -> Any:
    """The model or container type inside Annotated / Optional wrappers."""
    while True:
        origin = get_origin(annotation)
        if origin is Annotated:
            annotation = get_args(annotation)[0]
        elif origin is Union or origin is types.UnionType:
            args = [a for a in get_args(annotation) if a is not type(None)]
            annotation = args[0] if len(args) == 1 else annotation
            if len(args) != 1:
                return annotation
        else:
            return annotation


def _model_at(model: type[BaseModel], loc: Sequence[str | int]) -> type[BaseModel] | None:
    """The model class that validates the value at ``loc`` below ``model``."""
    current: Any = model
    for part in loc:
        current = _unwrap(current)
        if isinstance(current, type) and issubclass(current, BaseModel):
            field = _field_named(current, part)
            if field is None:
                return None
            current = field
            continue
        origin = get_origin(current)
        if origin in (tuple, list):
            current = get_args(current)[0]
        elif origin is dict:
            current = get_args(current)[1]
        else:
            return None
    current = _unwrap(current)
    return current if isinstance(current, type) and issubclass(current, BaseModel) else None


def _field_named(model: type[BaseModel], name: str | int) -> Any:
    info = model.model_fields.get(name) if isinstance(name, str) else None
    return info.annotation if info is not None else None


def _yaml_keys(model: type[BaseModel]) -> list[str]:
    return [info.alias or name for name, info in model.model_fields.items()]


def _message(error: Any, model: type[BaseModel] | None, loc: Sequence[str | int]) -> str:
    kind = error["type"]
    ctx = error.get("ctx") or {}
    value = error.get("input")
    if kind == "missing":
        return "required key is missing"
    if kind == "extra_forbidden":
        parent = _model_at(model, loc[:-1]) if model is not None else None
        allowed = _yaml_keys(parent) if parent is not None else []
        hint = did_you_mean(str(loc[-1]), allowed)
        return (
            f"unknown key; allowed keys: {', '.join(allowed)}{hint}" if allowed else "unknown key"
        )
    if kind in {"int_type", "int_parsing", "int_from_float"}:
        return "expected an integer" + (
            " (true/false is a boolean, not an integer)" if isinstance(value, bool) else ""
        )
    if kind in {"greater_than", "greater_than_equal", "less_than", "less_than_equal"}:
        sign = {"greater_than": ">", "greater_than_equal": ">=", "less_than": "<"}.get(kind, "<=")
        bound = next(iter(ctx.values()), "?")
        return f"expected an integer {sign} {bound}"
    if kind in {"string_type", "string_unicode"}:
        return "expected a string"
    if kind in {"bool_type", "bool_parsing"}:
        return "expected true or false"
    if kind == "literal_error":
        return f"expected one of {ctx.get('expected', '?')}"
    if kind in {"tuple_type", "list_type", "iterable_type"}:
        return "expected a list"
    if kind in {"dict_type", "model_type", "model_attributes_type", "mapping_type"}:
        return "expected a mapping"
    if kind in {"value_error", "assertion_error"} and "error" in ctx:
        return str(ctx["error"])
    return _reworded(str(error.get("msg", "invalid value")))


def _reworded(message: str) -> str:
    """pydantic's remaining messages in our voice ("expected ...")."""
    for prefix, replacement in (
        ("Input should be ", "expected "),
        ("Input should ", "expected to "),
    ):
        if message.startswith(prefix):
            return replacement + message[len(prefix) :]
    return message


def issues_from(
    error: ValidationError, model: type[BaseModel] | None = None
) -> list[tuple[str, str, object]]:
    """Turn a ValidationError of ``model`` into (path suffix, message, value) triples."""
    issues: list[tuple[str, str, object]] = []
    for item in error.errors():
        loc = tuple(item["loc"])
        suffix = _loc_suffix(loc)
        raised = (item.get("ctx") or {}).get("error")
        if isinstance(raised, Issues):
            issues += [(suffix + s, m, v) for s, m, v in raised.issues]
            continue
        value = None if item["type"] in {"missing", "extra_forbidden"} else item.get("input")
        issues.append((suffix, _message(item, model, loc), value))
    return issues


def problems_from_validation_error(
    error: ValidationError, model: type[BaseModel], *, root: str = "cluster"
) -> list[Problem]:
    """Convert pydantic's ValidationError into :class:`Problem` entries with YAML paths.

    Args:
        error: The error pydantic raised while validating ``model``.
        model: The model that was validated (used for 'allowed keys' hints).
        root: The path of the validated value (``"cluster"`` for a ClusterConfig).
    """
    problems: list[Problem] = []
    for suffix, message, value in issues_from(error, model):
        path = f"{root}{suffix}" if suffix.startswith(("[", ".")) or not suffix else suffix
        problems.append(Problem(path, message, value))
    return problems
