"""NVLink fabric health: NVML's fabric state, status and health mask, decoded.

See docs/concepts/nvlink-domains.md#fabric-health.

Each GPU of a rack-scale NVLink system reports its registration with the fabric
(``nvmlDeviceGetGpuFabricInfoV``): a state (``not_supported``, ``not_started``,
``in_progress``, ``completed``), a status (an NVML return code, meaningful once
completed) and, from struct v2 on, a health mask. The mask packs fields as ``nvml.h``
defines them (``NVML_GPU_FABRIC_HEALTH_MASK_SHIFT_*`` / ``_WIDTH_*``):

======================  =====  =====  =============================================
field                   shift  width  values
======================  =====  =====  =============================================
degraded bandwidth      0      2      0 not supported, 1 true, 2 false
route recovery          2      2      0 not supported, 1 true, 2 false
route unhealthy         4      2      0 not supported, 1 true, 2 false
access timeout recovery 6      2      0 not supported, 1 true, 2 false
incorrect configuration 8      4      0 not supported, 1 none, 2 incorrect system
                                      GUID, 3 incorrect chassis serial number, 4 no
                                      partition, 5 insufficient NVLinks
======================  =====  =====  =============================================

A GPU is **degraded** when its state is not ``completed`` (while the fabric reports
at all), its status is not ``success``, or a field above says true / names an incorrect
configuration. Bits above bit 11, and values no header defines (3 in a two-bit field,
6-15 in the configuration field), are unknown: :func:`check_health_mask` refuses them.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from itertools import accumulate, chain, compress, count, repeat
from operator import attrgetter, is_not

from ._inventory import Fabric, Node
from ._ranks import format_rank_list

__all__ = [
    "FABRIC_STATES",
    "GpuHealth",
    "check_health_mask",
    "decode_health_mask",
    "node_health",
    "zero_uuid",
]

#: The states ``nvmlGpuFabricState_t`` defines, by the names snapshots use.
FABRIC_STATES = ("not_supported", "not_started", "in_progress", "completed")

# (name, shift, width mask, value -> meaning); a meaning starting with "!" is degraded.
_FIELDS: tuple[tuple[str, int, int, dict[int, str]], ...] = (
    ("degraded bandwidth", 0, 0x3, {0: "not supported", 1: "!true", 2: "false"}),
    ("route recovery", 2, 0x3, {0: "not supported", 1: "!true", 2: "false"}),
    ("route unhealthy", 4, 0x3, {0: "not supported", 1: "!true", 2: "false"}),
    ("access timeout recovery", 6, 0x3, {0: "not supported", 1: "!true", 2: "false"}),
    (
        "incorrect configuration",
        8,
        0xF,
        {
            0: "not supported",
            1: "none",
            2: "!incorrect system GUID",
            3: "!incorrect chassis serial number",
            4: "!no partition",
            5: "!insufficient NVLinks",
        },
    ),
)
_KNOWN_BITS = 0xFFF


def check_health_mask(mask: int) -> str | None:
    """What is unknown in a health mask (bits no field covers, values no header
    defines), or None when every bit decodes."""
    problems = []
    if mask & ~_KNOWN_BITS:
        problems.append(f"bits {_bits(mask & ~_KNOWN_BITS)} belong to no field")
    for name, shift, width, values in _FIELDS:
        value = (mask >> shift) & width
        if value not in values:
            problems.append(f"{name} (bits {shift}-{shift + width.bit_length() - 1}) is {value}")
    if not problems:
        return None
    known = ", ".join(
        f"{name} (bits {shift}-{shift + w.bit_length() - 1})" for name, shift, w, _ in _FIELDS
    )
    return (
        f"health mask {mask:#x} does not decode: {'; '.join(problems)}; nvml.h defines "
        f"{known}, each 0 (not supported), 1 (true) or 2 (false), the configuration 0-5"
    )


def _bits(value: int) -> str:
    return format_rank_list([i for i in range(value.bit_length()) if value >> i & 1])


def decode_health_mask(mask: int) -> tuple[str, ...]:
    """The degraded fields of a (checked) health mask: ``('degraded bandwidth',
    'incorrect configuration: no partition')``; empty when healthy."""
    out = []
    for name, shift, width, values in _FIELDS:
        meaning = values.get((mask >> shift) & width, "")
        if meaning.startswith("!"):
            out.append(name if meaning == "!true" else f"{name}: {meaning[1:]}")
    return tuple(out)


def zero_uuid(cluster_uuid: str) -> bool:
    """Whether a cluster UUID is all zero (a GPU outside any fabric reports that)."""
    return not cluster_uuid.replace("-", "").strip("0")


def fabric_problems(fabric: Fabric) -> tuple[str, ...]:
    """Why one GPU's fabric registration is degraded; empty when it is healthy."""
    return _problems(fabric.state, fabric.status, fabric.health_mask)


# A cluster's GPUs report a handful of distinct registrations: decode each once.
@lru_cache(maxsize=1024)
def _problems(state: str, status: str, health_mask: int) -> tuple[str, ...]:
    if state == "not_supported":
        return ()
    out = []
    if state != "completed":
        out.append(f"fabric state {state}")
    elif status != "success":
        out.append(f"fabric status {status}")
    out += decode_health_mask(health_mask)
    return tuple(out)


@dataclass(frozen=True, slots=True)
class GpuHealth:
    """What makes a node's fabric degraded: per reason, the GPUs (node-local indices).

    Attributes:
        node_rank: The node.
        reasons: ``(reason, indices)`` pairs, in the order first seen.
    """

    node_rank: int
    reasons: tuple[tuple[str, tuple[int, ...]], ...]

    def describe(self) -> str:
        """``node 3 GPUs 0-1: degraded bandwidth; GPU 2: fabric state in_progress``."""
        parts = []
        for reason, indices in self.reasons:
            noun = "GPU" if len(indices) == 1 else "GPUs"
            parts.append(f"{noun} {format_rank_list(indices)}: {reason}")
        return f"node {self.node_rank} " + "; ".join(parts)


def node_health(node: Node) -> GpuHealth | None:
    """The node's degraded fabric, or None when every GPU that reports one is healthy."""
    by_reason: dict[str, list[int]] = {}
    for accelerator in node.accelerators:
        if accelerator.fabric is None:
            continue
        for reason in fabric_problems(accelerator.fabric):
            by_reason.setdefault(reason, []).append(accelerator.index)
    if not by_reason:
        return None
    return GpuHealth(node.rank, tuple((r, tuple(i)) for r, i in by_reason.items()))


def degraded_nodes(nodes: Sequence[Node]) -> dict[int, GpuHealth]:
    """Node rank -> its degraded fabric, for every degraded node.

    Each distinct accelerator tuple (nodes of a uniform inventory share one) is looked at
    once, field by field, in passes that run at C speed and make no object per GPU: a GPU
    whose state, status or health mask takes a value that can mean trouble marks its
    node, and only the marked nodes are decoded (``node_health``, which also drops a mark
    that the whole registration clears, as ``not_supported`` does). 10,000 nodes with a few
    degraded racks cost a few milliseconds; a cluster whose GPUs all report healthy (or
    nothing) is passed over after the first pass, which keeps replan's first spare choice
    in a fresh process fast.
    """
    per_node = list(map(_ACCELERATORS, nodes))
    distinct = list({id(accelerators): accelerators for accelerators in per_node}.values())
    fabrics = list(map(_FABRIC, chain.from_iterable(distinct)))
    reported = list(map(is_not, fabrics, repeat(None)))
    present = list(compress(fabrics, reported))
    marked: set[int] = set()  # positions in ``fabrics``
    for field, troubling in _FIELD_CHECKS:
        odd = {value for value in set(map(field, present)) if troubling(value)}
        if odd:
            positions = compress(count(), reported)
            marked.update(compress(positions, map(odd.__contains__, map(field, present))))
    if not marked:
        return {}
    ends = list(accumulate(map(len, distinct)))  # past each tuple's last GPU
    sick = {id(distinct[bisect_right(ends, position)]) for position in marked}
    out: dict[int, GpuHealth] = {}
    for node in compress(nodes, map(sick.__contains__, map(id, per_node))):
        health = node_health(node)
        if health is not None:
            out[node.rank] = health
    return out


_ACCELERATORS = attrgetter("accelerators")
_FABRIC = attrgetter("fabric")
# Each field with the values that can make a registration degraded (a superset: see
# ``_problems``, which decides).
_FIELD_CHECKS = (
    (attrgetter("state"), lambda state: state not in ("completed", "not_supported")),
    (attrgetter("status"), lambda status: status != "success"),
    (attrgetter("health_mask"), lambda mask: bool(decode_health_mask(mask))),
)
