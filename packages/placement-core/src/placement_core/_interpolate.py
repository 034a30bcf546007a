"""Reading values out of a whole job document, resolving simple ``${a.b}`` references.

RLinf's job configs are OmegaConf documents; a value may be ``${actor.model.tensor_model_
parallel_size}`` (a whole-value reference, which keeps the referenced type) or contain one
inside a longer string. Only absolute dotted references are resolved: relative ones
(``${.x}``) and resolvers (``${oc.env:HOME}``) need OmegaConf itself, so a value that uses
them is an error *when placement needs that value*, never before.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from .errors import ConfigError, Problem

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
        current: Any = self.document
        walked: list[str] = []
        for part in path.split("."):
            if isinstance(current, str) and _REF.search(current):
                current = self._resolve(current, ".".join(walked), stack)
            if not isinstance(current, Mapping) or part not in current:
                return MISSING
            current = current[part]
            walked.append(part)
        return current if raw else self._resolve(current, path, stack)

    def _resolve(self, value: Any, path: str, stack: tuple[str, ...]) -> Any:
        if isinstance(value, Mapping):
            return {k: self._resolve(v, f"{path}.{k}", stack) for k, v in value.items()}
        if isinstance(value, list):
            return [self._resolve(v, f"{path}[{i}]", stack) for i, v in enumerate(value)]
        if not isinstance(value, str) or "${" not in value:
            return value
        whole = _REF.fullmatch(value.strip())
        if whole:
            return self._target(whole.group(1), value, path, stack)
        return _REF.sub(lambda match: str(self._target(match.group(1), value, path, stack)), value)

    def _target(self, ref: str, text: str, path: str, stack: tuple[str, ...]) -> Any:
        ref = ref.strip()
        if not _SIMPLE.match(ref):
            raise ConfigError(
                [
                    Problem(
                        path,
                        f"cannot resolve {text!r}: only absolute references such as "
                        "${actor.model.tensor_model_parallel_size} are resolved (not "
                        "relative references or resolvers); write the value itself",
                    )
                ]
            )
        if ref in stack:
            cycle = " -> ".join((*stack, ref))
            raise ConfigError([Problem(path, f"cannot resolve {text!r}: circular ({cycle})")])
        value = self._lookup(ref, (*stack, ref), raw=False)
        if value is MISSING:
            raise ConfigError(
                [Problem(path, f"cannot resolve {text!r}: the job document has no key {ref}")]
            )
        return value
