"""Reading values out of a whole job document, resolving simple ``${a.b}`` references.

RLinf's job configs are OmegaConf documents; a value may be ``${actor.model.tensor_model_
parallel_size}`` (a whole-value reference, which keeps the referenced type) or contain one
inside a longer string. Only absolute dotted references are resolved: relative ones
(``${.x}``) and resolvers (``${oc.env:HOME}``) need OmegaConf itself, so a value that uses
them is an error *when placement needs that value*, never before. Resolution is bounded:
a chain of references at most :data:`MAX_REFERENCE_DEPTH` long, a resolved value at most
:data:`MAX_RESOLVED_SIZE` characters or entries.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from ._errors import ConfigError, Problem
from ._limits import MAX_REFERENCE_DEPTH, MAX_RESOLVED_SIZE
from ._shown import shown

__all__ = ["MISSING", "JobDocument"]

_REF = re.compile(r"\$\{([^${}]*)\}")
_SIMPLE = re.compile(r"[A-Za-z_][A-Za-z0-9_\-]*(?:\.[A-Za-z_0-9][A-Za-z0-9_\-]*)*\Z")


class _Missing:
    def __repr__(self) -> str:
        return "MISSING"


MISSING: Any = _Missing()
"""Returned by :meth:`JobDocument.get` for a key the document does not have."""


class JobDocument:
    """A plain job document (nested dicts and lists) with reference resolution.

    Args:
        document: The whole job document, e.g. ``{"cluster": ..., "actor": ...}``.
    """

    def __init__(self, document: Mapping[str, Any]) -> None:
        self.document = document
        # Each reference resolved once: a value that repeats another (e1: ${e0}${e0})
        # costs its size, never the number of paths that lead to it.
        self._memo: dict[str, tuple[Any, int]] = {}

    def has(self, path: str) -> bool:
        """Whether the document has a value at the dotted ``path`` (references followed)."""
        return self._lookup(path, (), raw=True) is not MISSING

    def raw(self, path: str, default: Any = MISSING) -> Any:
        """The value at dotted ``path`` as written (references along the path followed)."""
        value = self._lookup(path, (), raw=True)
        return default if value is MISSING else value

    def get(self, path: str, default: Any = MISSING) -> Any:
        """The value at dotted ``path`` with every reference in it resolved.

        Raises:
            ConfigError: A reference in the value cannot be resolved.
        """
        value = self._lookup(path, (), raw=False)
        return default if value is MISSING else value

    # ------------------------------------------------------------------ internals

    def _lookup(self, path: str, stack: tuple[str, ...], *, raw: bool) -> Any:
        if stack:
            return self._walk(path, stack, raw=raw)
        try:
            return self._walk(path, stack, raw=raw)
        except RecursionError:
            # References into nested mappings that hold references: each level is within
            # its limit (MAX_YAML_DEPTH, MAX_REFERENCE_DEPTH), their product is not.
            raise ConfigError(
                [Problem(path, "its references lead through mappings nested too deeply")]
            ) from None

    def _walk(self, path: str, stack: tuple[str, ...], *, raw: bool) -> Any:
        current: Any = self.document
        walked: list[str] = []
        for part in path.split("."):
            if isinstance(current, str) and _REF.search(current):
                current = self._resolve(current, ".".join(walked), stack)[0]
            if not isinstance(current, Mapping) or part not in current:
                return MISSING
            current = current[part]
            walked.append(part)
        return current if raw else self._resolve(current, path, stack)[0]

    def _resolve(self, value: Any, path: str, stack: tuple[str, ...]) -> tuple[Any, int]:
        """The value with its references resolved, and its size (see :func:`_size`)."""
        if isinstance(value, Mapping):
            items = {k: self._resolve(v, f"{path}.{k}", stack) for k, v in value.items()}
            size = 1 + sum(weight for _, weight in items.values())
            return self._bounded({k: v for k, (v, _) in items.items()}, size, path)
        if isinstance(value, list):
            entries = [self._resolve(v, f"{path}[{i}]", stack) for i, v in enumerate(value)]
            size = 1 + sum(weight for _, weight in entries)
            return self._bounded([v for v, _ in entries], size, path)
        if not isinstance(value, str) or "${" not in value:
            return value, _size(value)
        whole = _REF.fullmatch(value.strip())
        if whole:
            return self._target(whole.group(1), value, path, stack)
        parts: list[str] = []
        last = length = 0
        for match in _REF.finditer(value):
            target, _ = self._target(match.group(1), value, path, stack)
            parts += [value[last : match.start()], str(target)]
            length += len(parts[-2]) + len(parts[-1])
            last = match.end()
            self._bounded(None, length, path)
        text = "".join((*parts, value[last:]))
        return text, len(text)

    def _bounded(self, value: Any, size: int, path: str) -> tuple[Any, int]:
        if size > MAX_RESOLVED_SIZE:
            raise ConfigError(
                [
                    Problem(
                        path,
                        f"its references resolve to more than {MAX_RESOLVED_SIZE:,} characters "
                        "or entries (the limit for a resolved value; docs/reference/limits.md): "
                        "references that repeat each other grow without bound",
                    )
                ]
            )
        return value, size

    def _target(self, ref: str, text: str, path: str, stack: tuple[str, ...]) -> tuple[Any, int]:
        ref = ref.strip()
        if not _SIMPLE.match(ref):
            raise ConfigError(
                [
                    Problem(
                        path,
                        f"cannot resolve {shown(text)}: only absolute references such as "
                        "${actor.model.tensor_model_parallel_size} are resolved (not "
                        "relative references or resolvers); write the value itself",
                    )
                ]
            )
        if ref in self._memo:
            return self._memo[ref]
        if ref in stack:
            cycle = " -> ".join((*stack, ref))
            raise ConfigError([Problem(path, f"cannot resolve {shown(text)}: circular ({cycle})")])
        if len(stack) >= MAX_REFERENCE_DEPTH:
            raise ConfigError(
                [
                    Problem(
                        path,
                        f"cannot resolve {shown(text)}: references lead through more than "
                        f"{MAX_REFERENCE_DEPTH} others (the limit; docs/reference/limits.md), "
                        f"from {stack[0]}",
                    )
                ]
            )
        value = self._lookup(ref, (*stack, ref), raw=True)
        if value is MISSING:
            raise ConfigError(
                [Problem(path, f"cannot resolve {shown(text)}: the job document has no key {ref}")]
            )
        self._memo[ref] = self._resolve(value, ref, (*stack, ref))
        return self._memo[ref]


def _size(value: Any) -> int:
    """What a resolved scalar counts toward :data:`MAX_RESOLVED_SIZE`: a string its
    characters, anything else one entry."""
    return len(value) if isinstance(value, str) else 1
