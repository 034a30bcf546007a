"""Exceptions raised by placement-core.

Hierarchy::

    PlacementError                      root; never raised directly
    ├── ConfigError (ValueError)        a cluster config breaks one or more rules;
    │                                   carries every Problem found, each with its YAML path
    ├── PlacementSyntaxError (ValueError)
    │                                   a rank list or placement rule does not parse;
    │                                   shows the source with a caret under the bad span
    ├── PlacementRuleError (ValueError) a well-formed rule that cannot be placed
    │   │                               (counts do not divide, a process spans nodes, ...)
    │   └── NoSpareError                a lost node has no compatible spare left
    ├── InventoryError (ValueError)     a node snapshot or inventory is malformed
    └── DoesNotFitError (ValueError)    a plan's components do not fit in a GPU's or a
                                        host's memory (the ``memory:`` check)

Every exception pickles (they cross Ray process boundaries): constructor arguments are
kept and replayed by ``__reduce__``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Self, TypeVar

from ._limits import MAX_PROBLEMS_SHOWN
from ._shown import shown
from ._tokens import caret_block

__all__ = [
    "ConfigError",
    "DoesNotFitError",
    "InventoryError",
    "NoSpareError",
    "PlacementError",
    "PlacementRuleError",
    "PlacementSyntaxError",
    "Problem",
]


class PlacementError(Exception):
    """Root of every placement-core error. Catch this to catch them all.

    Attributes:
        reason: The message without the location prefix.
        path: Where the problem is, as a YAML path (``cluster.node_groups[1].label``), or None.
    """

    def __init__(self, reason: str, *, path: str | None = None) -> None:
        self.reason = reason
        self.path = path
        super().__init__(self._render())

    def _render(self) -> str:
        return f"{self.path}: {self.reason}" if self.path else self.reason

    def __reduce__(self) -> tuple[Any, ...]:
        state = dict(self.__dict__.items())
        return (_rebuild, (type(self), state))

    def with_path(self, path: str | None) -> Self:
        """A copy of this error located at ``path``; every other attribute is kept
        (a :class:`PlacementSyntaxError` keeps its source and span)."""
        return _rebuild(type(self), {**self.__dict__, "path": path})


_E = TypeVar("_E", bound=PlacementError)


def _rebuild(cls: type[_E], state: dict[str, Any]) -> _E:
    error = cls.__new__(cls)
    error.__dict__.update(state)
    Exception.__init__(error, error._render())
    return error


@dataclass(frozen=True, slots=True)
class Problem:
    """One broken rule in a config: where, what value, and what was expected.

    ``str()`` appends ``(got VALUE)`` unless the message already shows the value, so a
    message that names it (``'gpu' is not a defined node group``) does not repeat it.
    """

    path: str
    message: str
    value: Any = None

    def __str__(self) -> str:
        got = "" if _named_in(self.value, self.message) else f" (got {shown(self.value)})"
        return f"{self.path}: {self.message}{got}"


def _named_in(value: Any, message: str) -> bool:
    """Whether the message already shows the value (or there is none), so it is not repeated.

    A text value is shown when the message quotes it (``'gpu' is not ...``) or opens with
    it (``RANK is a reserved variable ...``); a word that merely occurs in the message
    (``yes`` in ``yes/no/on/off are text``) is not the value shown. Other values are
    shown when their ``repr`` stands as a token of its own.
    """
    if value is None:
        return True
    if isinstance(value, str):
        return bool(value.strip()) and (repr(value) in message or message.startswith(f"{value} "))
    return re.search(rf"(?<![\w.-]){re.escape(repr(value))}(?![\w.-])", message) is not None


class ConfigError(PlacementError, ValueError):
    """A cluster config breaks one or more rules; ``problems`` lists every one."""

    def __init__(self, problems: list[Problem] | tuple[Problem, ...]) -> None:
        self.problems = tuple(problems)
        first = self.problems[0] if self.problems else None
        super().__init__(
            first.message if first else "invalid config", path=first.path if first else None
        )

    def _render(self) -> str:
        if len(self.problems) == 1:
            return str(self.problems[0])
        lines = [f"{len(self.problems)} problems in the config:"]
        lines += [f"  - {p}" for p in self.problems[:MAX_PROBLEMS_SHOWN]]
        if len(self.problems) > MAX_PROBLEMS_SHOWN:
            lines.append(f"  ... and {len(self.problems) - MAX_PROBLEMS_SHOWN} more")
        return "\n".join(lines)


class PlacementSyntaxError(PlacementError, ValueError):
    """A rank list or placement rule that does not parse.

    Attributes:
        source: The text that was parsed.
        span: ``(start, end)`` character offsets of the bad part of ``source``.
    """

    def __init__(
        self,
        reason: str,
        *,
        source: str,
        span: tuple[int, int],
        path: str | None = None,
    ) -> None:
        self.source = source
        self.span = span
        super().__init__(reason, path=path)

    def _render(self) -> str:
        head = f"{self.path}: {self.reason}" if self.path else self.reason
        return caret_block(head, self.source, self.span)

    @property
    def excerpt(self) -> str:
        """The reason, then the source with a caret under the span (no path prefix)."""
        return caret_block(self.reason, self.source, self.span)


class PlacementRuleError(PlacementError, ValueError):
    """A well-formed placement that cannot be realised on the given resources."""


class NoSpareError(PlacementRuleError):
    """Lost nodes that no free spare can replace (:func:`placement_core.replan`).

    Attributes:
        lost: The lost nodes left without a spare, ascending.
        needs: Per such node, what a spare would need to replace it.
    """

    def __init__(
        self,
        reason: str,
        *,
        lost: tuple[int, ...],
        needs: dict[int, str],
        path: str | None = None,
    ) -> None:
        self.lost = lost
        self.needs = needs
        super().__init__(reason, path=path)


class InventoryError(PlacementError, ValueError):
    """A node snapshot or inventory that is malformed or inconsistent."""


class DoesNotFitError(PlacementError, ValueError):
    """A plan whose components do not fit in a GPU's memory in some phase, or in a host's
    memory (see docs/concepts/will-it-fit.md); the message says where, by how much and
    what would make it fit."""
