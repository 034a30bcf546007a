"""Will it fit: the public face of the memory check.

See docs/concepts/will-it-fit.md. :func:`check_memory` checks a plan against a job's
``memory:`` section; :func:`require_fit` refuses a plan that does not fit, with the words
``placement validate`` prints.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ._errors import ConfigError, DoesNotFitError, Problem
from ._memory_check import Headroom, MemoryReport, check_spec
from ._memory_config import ESTIMATOR_FIELDS, MEMORY_KEY, MemorySpec, load_memory
from ._memory_units import parse_bytes
from ._memory_verdict import refusal
from ._plan import Plan
from ._problems import Issues
from ._shown import shown

__all__ = [
    "ESTIMATOR_FIELDS",
    "Headroom",
    "MemoryReport",
    "MemorySpec",
    "check_memory",
    "load_memory",
    "parse_headroom",
    "require_fit",
]

_HEADROOM = "expected a percentage of each GPU's memory such as '10%', or bytes such as '4GiB'"


def parse_headroom(text: str | int) -> Headroom:
    """A margin kept free on every GPU: ``"10%"`` of its memory, or bytes (``"4GiB"``).

    Raises:
        ConfigError: Neither, or a percentage outside [0, 100).
    """
    if isinstance(text, str) and text.strip().endswith("%"):
        number = text.strip()[:-1].strip()
        try:
            percent = float(number)
        except ValueError:
            percent = -1.0
        if not 0 <= percent < 100 or not number.replace(".", "", 1).isdigit():
            raise ConfigError(
                [Problem("--memory-headroom", f"{_HEADROOM}; a percentage from 0 to 99.9", text)]
            )
        return Headroom(percent=percent)
    try:
        return Headroom(bytes=parse_bytes(text))
    except Issues:
        raise ConfigError([Problem("--memory-headroom", _HEADROOM, text)]) from None


def check_memory(
    plan: Plan,
    memory: Mapping[str, Any] | MemorySpec,
    *,
    base_dir: str | os.PathLike[str] = ".",
    headroom: Headroom | None = None,
) -> MemoryReport:
    """Check every GPU of ``plan`` in every phase, and every host, against its memory.

    Args:
        plan: The plan.
        memory: The job's ``memory:`` section (a mapping, as in the YAML), or one
            already checked by :func:`load_memory`.
        base_dir: What relative paths in the section (``hf_config``) are relative to.
        headroom: A margin kept free on every GPU (:func:`parse_headroom`).

    Returns:
        The report: ``fits``, per GPU each phase's bytes by component, per host its bytes.

    Raises:
        ConfigError: The section breaks a rule (every problem, with its path).
        InventoryError: A GPU's capacity is unknown.
    """
    if not isinstance(memory, MemorySpec):
        if not isinstance(memory, Mapping):
            raise ConfigError(
                [Problem(MEMORY_KEY, f"expected a mapping, got {shown(memory)}", memory)]
            )
        spec = load_memory({MEMORY_KEY: memory}, plan.config, base_dir=Path(base_dir))
        assert spec is not None
        memory = spec
    return check_spec(plan, memory, headroom=headroom)


def require_fit(report: MemoryReport) -> MemoryReport:
    """``report``, if it fits.

    Raises:
        DoesNotFitError: A GPU in some phase, or a host, is over capacity; the message
            names each, its components' bytes and what would make it fit.
    """
    if not report.fits:
        raise DoesNotFitError(refusal(report), path=MEMORY_KEY)
    return report
