"""Who shares which accelerator: owners' ranks per user placement, matched by device.

Kept apart from the planners so the strategies and the plan builders can both use it.
"""

from __future__ import annotations

from collections.abc import Sequence

from ._inventory import Inventory
from ._records import Placement

__all__ = ["shared_ranks"]


def shared_ranks(
    owners: Sequence[Placement],
    users: Sequence[Placement],
    inventory: Inventory | None = None,
) -> tuple[tuple[int, ...], ...]:
    """Per user placement, the sorted ranks of the owners that use one of its accelerators.

    Accelerators are matched by UUID where the inventory knows it (two ids naming one
    physical device match), else by ``(node rank, index)``.

    >>> from placement_core import Inventory, plan_from_assignments, shared_ranks
    >>> p = plan_from_assignments(
    ...     {"actor": [(0, (0,)), (0, (1,))], "rollout": [(0, (1, 2))]}, Inventory.uniform(1, 4)
    ... )
    >>> shared_ranks(p.components["actor"], p.components["rollout"])
    ((1,),)
    """
    held: dict[object, list[int]] = {}
    for placement in owners:
        for index in placement.hardware_ranks:
            held.setdefault(_device_key(inventory, placement.node_rank, index), []).append(
                placement.rank
            )
    return tuple(
        tuple(
            sorted(
                {
                    rank
                    for index in placement.hardware_ranks
                    for rank in held.get(_device_key(inventory, placement.node_rank, index), ())
                }
            )
        )
        for placement in users
    )


def _device_key(inventory: Inventory | None, node_rank: int, index: int) -> object:
    if inventory is not None and 0 <= node_rank < inventory.num_nodes:
        for accelerator in inventory.nodes[node_rank].accelerators:
            if accelerator.index == index and accelerator.uuid:
                return accelerator.uuid
    return (node_rank, index)
