"""Byte sizes as the memory check reads and writes them: ``85899345920``, ``"80GiB"``, ``"1.5 TB"``.

Binary units (``KiB``, ``MiB``, ``GiB``, ``TiB``) are powers of 1024, decimal ones
(``kB``, ``MB``, ``GB``, ``TB``) powers of 1000, as GPU vendors and ``nvidia-smi`` use
them. Figures are printed in GiB, the unit ``torch.cuda`` and ``nvidia-smi`` users read.
"""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import BeforeValidator, WithJsonSchema

from ._problems import issue
from ._scalars import is_int
from ._shown import shown

__all__ = ["ByteSize", "Fraction", "format_bytes", "parse_bytes"]

#: The largest size accepted: 1 EiB, far beyond any GPU or host.
MAX_BYTES = 1 << 60

_UNITS = {
    "b": 1,
    "kb": 10**3,
    "mb": 10**6,
    "gb": 10**9,
    "tb": 10**12,
    "kib": 1 << 10,
    "mib": 1 << 20,
    "gib": 1 << 30,
    "tib": 1 << 40,
}
_SIZE = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([A-Za-z]+)?\s*\Z")
_EXPECTED = "expected a byte count (an integer >= 0) or a size such as '80GiB', '512 MiB', '1.5TB'"


def parse_bytes(value: object) -> int:
    """A byte count from an int or a size string.

    Raises:
        Issues: The value is neither, its unit is unknown, or it exceeds 1 EiB.
    """
    if is_int(value):
        size = value
    elif isinstance(value, str) and (match := _SIZE.match(value)) is not None:
        number, unit = match.groups()
        scale = _UNITS.get((unit or "b").lower())
        if scale is None:
            raise issue(
                f"{_EXPECTED}; unknown unit {shown(unit)} "
                "(use B, kB, MB, GB, TB, KiB, MiB, GiB or TiB)",
                value,
            )
        size = int(float(number) * scale) if "." in number else int(number) * scale
    else:
        raise issue(_EXPECTED, value)
    if not 0 <= size <= MAX_BYTES:
        raise issue(f"{_EXPECTED}, at most 1 EiB", value)
    return size


def _fraction(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= 1:
        raise issue("expected a fraction of the GPU's memory, a number > 0 and <= 1", value)
    return float(value)


ByteSize = Annotated[
    int,
    BeforeValidator(parse_bytes),
    WithJsonSchema(
        {
            "description": "bytes: an integer, or a size such as '80GiB' or '1.5TB'",
            "anyOf": [{"type": "integer", "minimum": 0}, {"type": "string"}],
        }
    ),
]
"""A config field holding a byte size (see :func:`parse_bytes`)."""

Fraction = Annotated[
    float,
    BeforeValidator(_fraction),
    WithJsonSchema({"type": "number", "exclusiveMinimum": 0, "maximum": 1}),
]
"""A config field holding a fraction of a GPU's memory, in (0, 1]."""


def format_bytes(size: int) -> str:
    """``size`` in GiB with one decimal (``"56.0 GiB"``), or MiB below 1 GiB."""
    if size >= 1 << 30:
        return f"{size / (1 << 30):.1f} GiB"
    return f"{size / (1 << 20):.0f} MiB"
