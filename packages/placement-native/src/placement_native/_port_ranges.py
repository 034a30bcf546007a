"""Which ports a search may use: the default range and the kernel's own port settings.

The default search range is 20000-65535 with the kernel's ephemeral range
(``/proc/sys/net/ipv4/ip_local_port_range``) and reserved ports
(``/proc/sys/net/ipv4/ip_local_reserved_ports``) taken out; with Linux's stock ephemeral
range of 32768-60999 that leaves 20000-32767 and 61000-65535. It starts above Ray's default
worker-port range (10002-19999), and below 20000 live most well-known services (Redis/GCS
6379, the Ray dashboard 8265, Ray client 10001, ...). An explicit ``start``/``end`` replaces
all of this: the caller's range is searched as given.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

__all__ = [
    "DEFAULT_END",
    "DEFAULT_START",
    "EXCLUDED",
    "RAY_WORKER_PORTS",
    "SearchRange",
    "default_search_range",
    "explicit_search_range",
    "read_ephemeral_range",
    "read_reserved_ports",
]

logger = logging.getLogger(__name__)

DEFAULT_START = 20000
DEFAULT_END = 65535
RAY_WORKER_PORTS = (10002, 19999)
EPHEMERAL_RANGE_FILE = "/proc/sys/net/ipv4/ip_local_port_range"
RESERVED_PORTS_FILE = "/proc/sys/net/ipv4/ip_local_reserved_ports"

# Values of a search map (one byte per port of the range).
FREE = 0
BUSY = 1
EXCLUDED = 2


def _read_text(path: str) -> str | None:
    try:
        with open(path, encoding="ascii") as file:
            return file.read()
    except OSError as exc:
        logger.debug("cannot read %s (%s)", path, exc)
        return None


def read_ephemeral_range(path: str | None = None) -> tuple[int, int] | None:
    """The kernel's ephemeral port range as ``(low, high)``, or None where it is unknown."""
    path = EPHEMERAL_RANGE_FILE if path is None else path
    text = _read_text(path)
    if text is None:
        return None
    fields = text.split()
    if len(fields) != 2 or not all(field.isdigit() for field in fields):
        logger.debug("unexpected contents of %s: %r", path, text)
        return None
    low, high = int(fields[0]), int(fields[1])
    return (low, high) if low <= high else None


def read_reserved_ports(path: str | None = None) -> tuple[tuple[int, int], ...]:
    """The kernel's reserved ports (``8000-8010,9000``) as inclusive ``(low, high)`` spans."""
    path = RESERVED_PORTS_FILE if path is None else path
    text = _read_text(path)
    if text is None:
        return ()
    spans: list[tuple[int, int]] = []
    for item in text.strip().split(","):
        low, _, high = item.strip().partition("-")
        if not low.isdigit() or (high and not high.isdigit()):
            if item.strip():
                logger.debug("ignoring unexpected entry %r of %s", item, path)
            continue
        spans.append((int(low), int(high or low)))
    return tuple(spans)


@dataclass(frozen=True, slots=True)
class SearchRange:
    """An inclusive port range and the spans inside it that must not be used.

    Attributes:
        low: First port of the range.
        high: Last port of the range.
        excluded: ``(low, high, reason)`` spans taken out of the range, clipped to it.
        default: Whether this is the default range (no ``start``/``end`` given).
    """

    low: int
    high: int
    excluded: tuple[tuple[int, int, str], ...] = ()
    default: bool = False

    def new_map(self) -> bytearray:
        """One byte per port of the range: EXCLUDED for excluded ports, FREE elsewhere."""
        ports = bytearray(self.high - self.low + 1)
        for low, high, _ in self.excluded:
            ports[low - self.low : high - self.low + 1] = bytes([EXCLUDED]) * (high - low + 1)
        return ports

    def usable_spans(self) -> list[tuple[int, int]]:
        """The searched spans: the range minus its excluded spans."""
        spans: list[tuple[int, int]] = []
        next_low = self.low
        for low, high, _ in sorted(self.excluded):
            if low > next_low:
                spans.append((next_low, low - 1))
            next_low = max(next_low, high + 1)
        if next_low <= self.high:
            spans.append((next_low, self.high))
        return spans

    def describe(self) -> str:
        """What is searched, for error messages: ``20000-32767, 61000-65535 (default ...)``."""
        spans = ", ".join(_span(low, high) for low, high in self.usable_spans()) or "nothing"
        if not self.default:
            return spans
        reasons = "; ".join(f"{reason} {_span(low, high)}" for low, high, reason in self.excluded)
        text = f"{spans} (the default range {_span(self.low, self.high)}"
        return f"{text} without {reasons})" if reasons else f"{text})"


def _span(low: int, high: int) -> str:
    return str(low) if low == high else f"{low}-{high}"


def _clip(low: int, high: int, within: tuple[int, int]) -> tuple[int, int] | None:
    low, high = max(low, within[0]), min(high, within[1])
    return (low, high) if low <= high else None


def default_search_range() -> SearchRange:
    """DEFAULT_START-DEFAULT_END minus Ray's worker ports and the kernel's port settings."""
    bounds = (DEFAULT_START, DEFAULT_END)
    candidates: list[tuple[int, int, str]] = [(*RAY_WORKER_PORTS, "Ray's worker ports")]
    ephemeral = read_ephemeral_range()
    if ephemeral is not None:
        candidates.append((*ephemeral, "the kernel's ephemeral range"))
    candidates.extend((low, high, "reserved") for low, high in read_reserved_ports())
    excluded = []
    for low, high, reason in candidates:
        clipped = _clip(low, high, bounds)
        if clipped is not None:
            excluded.append((*clipped, reason))
    return SearchRange(DEFAULT_START, DEFAULT_END, tuple(excluded), default=True)


def explicit_search_range(start: int | None, end: int | None) -> SearchRange:
    """The caller's range, a missing bound taken from the default range; nothing excluded."""
    low = DEFAULT_START if start is None else start
    high = DEFAULT_END if end is None else end
    return SearchRange(low, high)
