"""Control characters: refused in a config's names, escaped in what reaches a terminal.

A name such as ``"x\\n\\x1b[31mEVIL"`` printed raw by a table would move the cursor or
recolour the user's terminal. Configs refuse control characters in every key and every
text value placement reads (an environment variable's value aside: the worker gets it
as written, and only JSON, SVG and HTML, which escape it, show it); text written to a
terminal escapes any that come from elsewhere (a snapshot's hostname).
"""

from __future__ import annotations

import unicodedata
from collections.abc import Mapping
from typing import Any

from ._errors import Problem
from ._shown import shown

__all__ = ["control_problems", "terminal_text"]

_FREE = ("env_vars",)  # mappings whose values are the workers' business


def _control(text: str) -> str | None:
    for char in text:
        if unicodedata.category(char) == "Cc":
            return char
    return None


def _problem(path: str, what: str, text: str, char: str) -> Problem:
    return Problem(
        path,
        f"{what} {shown(text)} holds the control character U+{ord(char):04X}; names and "
        "values are printed in tables and terminals, so control characters are refused",
    )


def control_problems(section: Mapping[str, Any], root: str) -> list[Problem]:
    """A problem for every key, and every text value outside ``env_vars``, of ``section``
    that holds a control character (Unicode category Cc: C0, DEL, C1)."""
    problems: list[Problem] = []
    stack: list[tuple[str, Any, bool]] = [(root, section, False)]
    while stack:
        path, value, free = stack.pop()
        if isinstance(value, Mapping):
            for key, item in value.items():
                char = _control(key) if isinstance(key, str) else None
                if char is not None:
                    problems.append(_problem(path, "the key", key, char))
                    continue
                stack.append((f"{path}.{key}", item, free or key in _FREE))
        elif isinstance(value, list | tuple):
            stack.extend((f"{path}[{i}]", item, free) for i, item in enumerate(value))
        elif isinstance(value, str) and not free:
            char = _control(value)
            if char is not None:
                problems.append(_problem(path, "the value", value, char))
    return sorted(problems, key=lambda problem: problem.path)


def terminal_text(text: str) -> str:
    """``text`` with every control character but the newline escaped (``\\x1b``)."""
    if _control(text.replace("\n", "")) is None:
        return text
    return "".join(
        char if char == "\n" or unicodedata.category(char) != "Cc" else repr(char)[1:-1]
        for char in text
    )
