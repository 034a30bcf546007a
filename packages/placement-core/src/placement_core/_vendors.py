"""Warnings about accelerator vendors that do not agree (a leaf of the planner).

A component whose processes run on accelerators of two vendors (NVIDIA GPUs on some
nodes, Ascend NPUs on others) is allowed, since each process sees its own vendor's
devices, but one collective group cannot span both, so the plan says so.

Both checks first read the inventory's accelerator types (once per distinct accelerators
tuple, so a uniform cluster costs one look per node) and read no placement record where
no warning is possible: reading every record of a million-process plan would cost more
than planning it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence, Set

from ._inventory import Inventory
from ._ranks import format_rank_list
from ._records import Placement

__all__ = [
    "WHOLE_ONLY",
    "accelerator_types",
    "mixed_vendor_warnings",
    "shared_whole_device_warnings",
]

#: Accelerator types whose devices Ray hands out only whole (Gaudi's ``HPU``): a device
#: that several processes share plans offline but cannot launch on Ray.
WHOLE_ONLY = frozenset({"gaudi"})


def accelerator_types(inventory: Inventory) -> set[str]:
    """Every accelerator type on the inventory's nodes."""
    seen: set[int] = set()
    types: set[str] = set()
    for node in inventory.nodes:
        if id(node.accelerators) not in seen:
            seen.add(id(node.accelerators))
            types.update(a.type for a in node.accelerators)
    return types


def mixed_vendor_warnings(
    components: Mapping[str, Sequence[Placement]], types: Set[str]
) -> list[str]:
    """One warning per component whose processes use accelerators of several types.

    Args:
        components: Component name -> its placements.
        types: The inventory's accelerator types (:func:`accelerator_types`).
    """
    if len(types) < 2:
        return []
    warnings = []
    for name, placements in components.items():
        nodes: dict[str, set[int]] = {}
        for p in placements:
            if p.accelerator_type is not None and p.hardware_ranks:
                nodes.setdefault(p.accelerator_type, set()).add(p.node_rank)
        if len(nodes) < 2:
            continue
        listed = "; ".join(
            f"{kind} on node(s) {format_rank_list(sorted(ranks))}"
            for kind, ranks in sorted(nodes.items())
        )
        warnings.append(
            f"{name!r} runs on accelerators of {len(nodes)} vendors ({listed}): one "
            "collective group (NCCL, HCCL) cannot span them; give each vendor's nodes a "
            "component of its own unless that is what you mean"
        )
    return warnings


def shared_whole_device_warnings(
    components: Mapping[str, Sequence[Placement]], types: Set[str]
) -> list[str]:
    """One warning per component that puts processes on a shared whole-only device.

    Args:
        components: Component name -> its placements.
        types: The inventory's accelerator types (:func:`accelerator_types`).
    """
    if not types & WHOLE_ONLY:
        return []
    users: dict[tuple[int, int], list[tuple[str, int]]] = {}
    for name, placements in components.items():
        for p in placements:
            if p.accelerator_type in WHOLE_ONLY:
                for index in p.hardware_ranks:
                    users.setdefault((p.node_rank, index), []).append((name, p.rank))
    shared = {key: who for key, who in users.items() if len(who) > 1}
    warnings = []
    for name in components:
        mine = sorted(key for key, who in shared.items() if any(c == name for c, _ in who))
        if not mine:
            continue
        node, index = mine[0]
        count = len(shared[mine[0]])
        warnings.append(
            f"{name!r} shares {len(mine)} Gaudi HPU(s) with other processes (first: node "
            f"{node} HPU {index}, {count} processes, {1 / count:.2g} HPU each): Ray hands "
            "out HPUs only whole, so launch refuses this plan; give each process a whole HPU"
        )
    return warnings
