"""One validation pass over a config section, driven by the models' field declarations.

Each YAML key of a config is declared once, as a field of a model in
:mod:`placement_core._models`: its type (an annotated alias carries parsing, bounds and
the words of its errors), its default, its YAML spelling (the field's ``alias``) and its
description. This module walks a document through those declarations:

- every field is validated on its own, so a broken field never hides another;
- the valid fields of each mapping form a :class:`Part`, and the model's ``checks`` (rules
  relating several fields or parts) run on it whether or not other fields are broken;
  a check skips what it needs when that is broken (``Part.get`` gives None), so a broken
  field is reported once, by itself, and causes no derived errors;
- every problem is collected with its YAML path, and only a document without problems
  becomes models (built with ``model_construct``: nothing is validated twice).
"""

from __future__ import annotations

import types
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from functools import cache
from typing import Annotated, Any, ClassVar, Self, Union, get_args, get_origin

from pydantic import (
    BaseModel,
    ConfigDict,
    ModelWrapValidatorHandler,
    TypeAdapter,
    ValidationError,
    ValidationInfo,
    model_validator,
)

from ._problems import Issues, did_you_mean, issues_from
from ._scalars import is_int

__all__ = ["SKIPPED", "Check", "ConfigModel", "Issue", "Part", "build", "field_values", "walk"]

#: ``(path suffix, message, value)``: one problem, its path relative to the part checked.
Issue = tuple[str, str, object]
#: A rule on a part: yields the problems it finds.
Check = Callable[["Part"], Iterable[Issue]]

#: Messages that mark a field as broken without reporting it (the field that caused
#: them is reported by itself); filled by :mod:`placement_core._fields`.
SKIPPED: set[str] = set()


class ConfigModel(BaseModel):
    """Base of the config models: a mapping of the document, one field per YAML key.

    Every way of building one (``load_config``, ``Model(...)``, ``model_validate``) runs
    the same single pass (:func:`placement_core._validate.walk`), so the same problems
    are found with the same words.

    Attributes:
        checks: Rules relating the model's fields (or its parts), run on its valid fields.
        short_form: The field a scalar stands for (``actor: 0-7`` is ``placement: 0-7``).
        key_field: The field that holds the entry's key, in a mapping of these models.
        set_aside: Keys accepted and ignored (they belong to another program).
        not_a_mapping: The problem reported when the value is not a mapping.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    checks: ClassVar[tuple[Check, ...]] = ()
    short_form: ClassVar[str | None] = None
    key_field: ClassVar[str | None] = None
    set_aside: ClassVar[tuple[str, ...]] = ()
    not_a_mapping: ClassVar[str] = "expected a mapping"

    @classmethod
    def validation_context(cls, raw: Mapping[Any, Any]) -> dict[str, Any]:
        """What the field types of a whole document need to know (none by default)."""
        return {}

    def set_aside_keys(self, keys: tuple[str, ...]) -> None:
        """Record the keys that were set aside (see :attr:`set_aside`)."""

    @model_validator(mode="wrap")
    @classmethod
    def _one_pass(
        cls, data: Any, handler: ModelWrapValidatorHandler[Self], info: ValidationInfo
    ) -> Self:
        if isinstance(data, cls) or not isinstance(data, Mapping):
            return handler(data)
        part, issues = walk(cls, data, info.context)
        if issues:
            raise Issues(issues)
        model = handler(field_values(part))
        if part.set_aside:
            model.set_aside_keys(part.set_aside)
        return model


@dataclass(frozen=True, slots=True)
class Part:
    """The valid fields of one mapping of the document, as the checks see them.

    Attributes:
        model: The model the mapping is read as.
        values: Field name -> valid value; a nested model's value is a :class:`Part`
            (a tuple or dict of them for lists and mappings of models). Broken fields are
            absent; absent optional fields hold their default.
        set_aside: Keys of the mapping the model accepts and ignores, in document order.
    """

    model: type[ConfigModel]
    values: dict[str, Any]
    set_aside: tuple[str, ...] = ()

    def get(self, name: str) -> Any:
        """The field's valid value, or None when it is broken or missing."""
        return self.values.get(name)

    def parts(self, name: str) -> tuple[Part, ...]:
        """The parts of a list (or mapping) of models; ``()`` when it is broken."""
        value = self.values.get(name)
        if isinstance(value, dict):
            return tuple(value.values())
        if isinstance(value, Part):
            return (value,)
        return value if isinstance(value, tuple) else ()


@dataclass(slots=True)
class _Walk:
    context: dict[str, Any]
    issues: list[Issue] = field(default_factory=list)

    def report(self, path: str, message: str, value: object = None) -> None:
        self.issues.append((path, message, value))


def walk(
    model: type[ConfigModel], raw: object, context: Mapping[str, Any] | None = None
) -> tuple[Part, list[Issue]]:
    """Validate ``raw`` as ``model`` in one pass: its valid parts and every problem.

    Args:
        model: The config model the document is read as.
        raw: The document (a mapping from YAML, JSON or a caller).
        context: Validation context for the field types; the model's
            ``validation_context(raw)`` is added to it.

    Returns:
        The document's valid parts and its problems, paths relative to ``raw``.
    """
    given = dict(context or {})
    if isinstance(raw, Mapping):
        given = {**model.validation_context(raw), **given}
    state = _Walk(given)
    part = _walk_model(model, raw, "", state)
    return part, state.issues


def build(part: Part) -> BaseModel:
    """The model of a part without problems (nothing is validated again)."""
    model = part.model.model_construct(**field_values(part))
    if part.set_aside:
        model.set_aside_keys(part.set_aside)
    return model


def field_values(part: Part) -> dict[str, Any]:
    """The fields of a part without problems, nested parts built as models."""
    return {name: _built(value) for name, value in part.values.items()}


def _built(value: Any) -> Any:
    if isinstance(value, Part):
        return build(value)
    if isinstance(value, dict) and value and isinstance(next(iter(value.values())), Part):
        return {key: build(item) for key, item in value.items()}
    if isinstance(value, tuple) and value and isinstance(value[0], Part):
        return tuple(build(item) for item in value)
    return value


def _walk_model(
    model: type[ConfigModel], raw: object, path: str, state: _Walk, key: str | None = None
) -> Part:
    if model.short_form is not None and (is_int(raw) or isinstance(raw, str)):
        raw = {model.short_form: raw}
    if not isinstance(raw, Mapping):
        state.report(path, model.not_a_mapping, raw)
        return Part(model, {})
    raw, set_aside = _yaml_keys(model, raw, path, state)
    if model.key_field is not None and key is not None:
        # In a mapping of these models, the field holds the entry's key.
        declared = raw.get(model.key_field, key)
        if declared != key:
            where = f"{path}.{model.key_field}"
            state.report(where, "unknown key; the component names are the entry's key", declared)
        raw[model.key_field] = key
    values: dict[str, Any] = {}
    for name, info in model.model_fields.items():
        key = info.alias or name
        where = f"{path}.{key}"
        if key not in raw:
            if info.is_required():
                state.report(where, "required key is missing")
            else:
                values[name] = info.get_default(call_default_factory=True)
            continue
        _walk_field(model, name, raw[key], where, state, values)
    part = Part(model, values, set_aside)
    for check in model.checks:
        state.issues += [(path + suffix, message, value) for suffix, message, value in check(part)]
    return part


def _yaml_keys(
    model: type[ConfigModel], raw: Mapping[Any, Any], path: str, state: _Walk
) -> tuple[dict[str, Any], tuple[str, ...]]:
    """The mapping with every key read as its YAML name; reports unknown keys."""
    names = {info.alias or name: name for name, info in model.model_fields.items()}
    allowed = [key for key in names if key != model.key_field]
    out: dict[str, Any] = {}
    set_aside: list[str] = []
    for key, value in raw.items():
        if key in model.set_aside:
            set_aside.append(key)
        elif key in names and key != model.key_field:
            out[key] = value
        elif isinstance(key, str) and key in model.model_fields and key not in names:
            # The field's internal name (``node_groups`` for ``node_group``).
            alias = model.model_fields[key].alias or key
            if alias in raw:
                state.report(path, f"give {alias} only ({key} is its internal name)")
            out[alias] = value
        elif key == model.key_field and key is not None:
            out[key] = value
        else:
            hint = did_you_mean(str(key), [*allowed, *model.set_aside])
            state.report(f"{path}.{key}", f"unknown key; allowed keys: {', '.join(allowed)}{hint}")
    return out, tuple(set_aside)


def _walk_field(
    model: type[ConfigModel],
    name: str,
    value: object,
    path: str,
    state: _Walk,
    values: dict[str, Any],
) -> None:
    """Validate one field into ``values[name]``; a broken field is left out (or holds its
    valid items, for the checks) and its problems are reported with ``path``."""
    info = model.model_fields[name]
    kind, inner = _kind(info.annotation)
    if kind == "model":
        optional = value is None and _optional(info.annotation)
        values[name] = None if optional else _walk_model(inner, value, path, state)
    elif kind == "models":
        if not isinstance(value, list | tuple):
            state.report(path, "expected a list", value)
            return
        values[name] = tuple(
            _walk_model(inner, item, f"{path}[{i}]", state) for i, item in enumerate(value)
        )
    elif kind == "keyed":
        if not isinstance(value, Mapping):
            state.report(path, "expected a mapping", value)
            return
        values[name] = {
            str(key): _walk_model(inner, item, f"{path}.{key}", state, str(key))
            for key, item in value.items()
        }
    else:
        try:
            context = {**state.context, "fields": values}
            values[name] = _adapter(model, name).validate_python(value, context=context)
        except ValidationError as error:
            _report_leaf(error, name, path, state, values)


def _report_leaf(
    error: ValidationError, name: str, path: str, state: _Walk, values: dict[str, Any]
) -> None:
    for suffix, message, value in issues_from(error):
        if message not in SKIPPED:
            state.report(path + suffix, message, value)
    for item in error.errors():
        raised = (item.get("ctx") or {}).get("error")
        if isinstance(raised, Issues) and raised.partial is not None:
            values[name] = raised.partial  # the valid items of a list, for the checks


@cache
def _adapter(model: type[ConfigModel], name: str) -> TypeAdapter[Any]:
    """The validator of one field's type (with its bounds and validators), built once."""
    info = model.model_fields[name]
    typ: Any = info.annotation
    return TypeAdapter(Annotated[typ, *info.metadata] if info.metadata else typ)


def _optional(annotation: Any) -> bool:
    return get_origin(annotation) in (Union, types.UnionType) and type(None) in get_args(annotation)


def _kind(annotation: Any) -> tuple[str, Any]:
    """``("model" | "models" | "keyed" | "leaf", model)`` for a field's annotation."""
    if _optional(annotation):
        present = [a for a in get_args(annotation) if a is not type(None)]
        annotation = present[0] if len(present) == 1 else annotation
    origin, args = get_origin(annotation), get_args(annotation)
    if _is_config_model(annotation):
        return "model", annotation
    if origin is tuple and len(args) == 2 and args[1] is Ellipsis and _is_config_model(args[0]):
        return "models", args[0]
    if origin is dict and len(args) == 2 and _is_config_model(args[1]):
        return "keyed", args[1]
    return "leaf", None


def _is_config_model(annotation: Any) -> bool:
    return isinstance(annotation, type) and hasattr(annotation, "checks")
