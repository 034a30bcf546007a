"""Type tests for scalars read from YAML, JSON or callers (a leaf module)."""

from __future__ import annotations

from typing import TypeGuard

__all__ = ["is_int"]


def is_int(value: object) -> TypeGuard[int]:
    """Whether ``value`` is an int and not a bool (``True`` is an int to Python, not to us)."""
    return isinstance(value, int) and not isinstance(value, bool)
