"""Checking the flat fields of a trainer estimator (``num_layers: 28``, ``swiglu: true``).

Each field has a default and a check that returns the value as the estimator uses it or
raises :class:`~._problems.Issues`; :func:`check_fields` runs every check and reports all
problems at once, each under ``.field_name``. A ``null`` value means the field is absent.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from typing import Any

from ._problems import Issues, did_you_mean, issue

__all__ = [
    "Check",
    "FieldSpec",
    "boolean",
    "check_fields",
    "choice",
    "layer_pattern",
    "non_negative_int",
    "path_text",
    "positive_int",
    "positive_number",
]

Check = Callable[[object], Any]
#: A field's default (what the reference tool uses when the argument is absent) and check.
FieldSpec = tuple[object, Check]


def positive_int(value: object) -> int:
    """An integer >= 1 (a float with an integral value, ``7.6e+9``, is accepted)."""
    number = _integer(value)
    if number is None or number < 1:
        raise issue("expected a positive integer", value)
    return number


def non_negative_int(value: object) -> int:
    """An integer >= 0."""
    number = _integer(value)
    if number is None or number < 0:
        raise issue("expected an integer >= 0", value)
    return number


def _integer(value: object) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return int(value)
    return None


def positive_number(value: object) -> float:
    """A finite number > 0."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise issue("expected a positive number", value)
    if not math.isfinite(value) or value <= 0:
        raise issue("expected a positive number", value)
    return float(value)


def boolean(value: object) -> bool:
    """``true`` or ``false``."""
    if not isinstance(value, bool):
        raise issue("expected true or false", value)
    return value


def choice(*allowed: str) -> Check:
    """One of ``allowed``, spelled exactly."""

    def check(value: object) -> str:
        if not isinstance(value, str) or value not in allowed:
            hint = _hint(value, allowed) if isinstance(value, str) else ""
            raise issue(f"expected one of {', '.join(allowed)}{hint}", value)
        return value

    return check


def _hint(value: str, allowed: tuple[str, ...]) -> str:
    same = [name for name in allowed if name.lower() == value.lower()]
    return f" (did you mean {same[0]!r}?)" if same else did_you_mean(value, allowed)


def path_text(value: object) -> str:
    """A non-empty file path."""
    if not isinstance(value, str) or not value.strip():
        raise issue("expected a path to a file", value)
    return value


_PATTERN_CHARS = re.compile(r"[^,\d\[\]()+*\s]")
_TOKEN = re.compile(r"\s*(\d+|[\[\](),+*])")


def layer_pattern(value: object) -> int | tuple[int, ...]:
    """Megatron's ``moe_layer_freq``: an integer N (every N-th layer from layer 0), a list
    of 0/1 per layer, or the same list as Megatron's text expression (``[0]*3+[1]*58``).
    """
    read = _pattern_expression(value) if isinstance(value, str) else value
    if isinstance(read, int) and not isinstance(read, bool) and read >= 1:
        return read
    if (
        isinstance(read, list | tuple)
        and read
        and all(item in (0, 1) and not isinstance(item, bool) for item in read)
    ):
        return tuple(int(item) for item in read)
    raise issue(
        "expected a positive integer, a list of 0 and 1 per layer, "
        "or a list expression such as [0]*3+[1]*58",
        value,
    )


def _pattern_expression(text: str) -> object:
    """expr := term ('+' term)* ; term := atom ('*' atom)* ;
    atom := INT | '[' INT (',' INT)* ']' | '(' expr ')'
    """
    if _PATTERN_CHARS.search(text):
        return text
    tokens = _TOKEN.findall(text)
    if "".join(tokens) != re.sub(r"\s", "", text):
        return text
    try:
        value, end = _expr(tokens, 0)
    except (IndexError, TypeError, ValueError):
        return text
    return value if end == len(tokens) else text


def _expr(tokens: list[str], at: int) -> tuple[object, int]:
    value, at = _term(tokens, at)
    while at < len(tokens) and tokens[at] == "+":
        right, at = _term(tokens, at + 1)
        if not isinstance(value, list) or not isinstance(right, list):
            raise ValueError("+ joins lists")
        value = value + right
    return value, at


def _term(tokens: list[str], at: int) -> tuple[object, int]:
    value, at = _atom(tokens, at)
    while at < len(tokens) and tokens[at] == "*":
        right, at = _atom(tokens, at + 1)
        if isinstance(value, list) and isinstance(right, int):
            value = value * right
        elif isinstance(value, int) and isinstance(right, list):
            value = right * value
        else:
            raise ValueError("* repeats a list")
    return value, at


def _atom(tokens: list[str], at: int) -> tuple[object, int]:
    token = tokens[at]
    if token.isdigit():
        return int(token), at + 1
    if token == "(":
        value, at = _expr(tokens, at + 1)
        if tokens[at] != ")":
            raise ValueError("unclosed (")
        return value, at + 1
    if token == "[":
        items: list[int] = []
        at += 1
        while tokens[at] != "]":
            if items:
                if tokens[at] != ",":
                    raise ValueError("expected ,")
                at += 1
            items.append(int(tokens[at]))
            at += 1
        return items, at + 1
    raise ValueError(f"unexpected {token}")


def check_fields(
    fields: Mapping[str, object], specs: Mapping[str, FieldSpec], *, what: str
) -> dict[str, Any]:
    """Every field's checked value (the default where absent or null).

    Raises:
        Issues: One ``(".field", message, value)`` per unknown or bad field.
    """
    values: dict[str, Any] = {name: default for name, (default, _) in specs.items()}
    problems: list[tuple[str, str, object]] = []
    for name, value in fields.items():
        spec = specs.get(name) if isinstance(name, str) else None
        if spec is None:
            hint = did_you_mean(str(name), specs)
            problems.append((f".{name}", f"not a field of the {what} estimator{hint}", None))
            continue
        if value is None:
            continue
        try:
            values[name] = spec[1](value)
        except Issues as bad:
            problems += [(f".{name}{s}", m, v) for s, m, v in bad.issues]
    if problems:
        raise Issues(problems)
    return values
