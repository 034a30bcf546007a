"""slime's layout on a shared cluster: ``create_placement_groups(..., share_cluster=True)``.

The layout's need is where it would put its bundles on the whole cluster (bundles per
used node, in rank order) followed by each spare node whole. The lease (``_leases``)
chooses free nodes for it and the layout is made on that free view, its spares being the
view's last nodes; once Ray holds the bundles, the lease records the GPUs they hold, and
it ends with the layout's groups (``SlimeLayout.remove``) or its driver.
"""

from __future__ import annotations

import inspect
from collections import Counter
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from placement_ray._cluster import Cluster
from placement_ray._leases import acquire_need, first_free

if TYPE_CHECKING:
    from placement_ray._slime.layout import SlimeLayout

__all__ = ["share_layout"]


def share_layout(
    create: Callable[..., SlimeLayout],
    given: dict[str, Any],
    pins: Sequence[int],
    spares: frozenset[int],
) -> SlimeLayout:
    """Lease the layout's GPUs, then ``create`` it on the free view (``given``: its own
    arguments; ``pins``: each bundle's node on the whole cluster)."""
    cluster: Cluster = given["cluster"]
    counts = Counter(pins)
    need = tuple(counts[rank] for rank in sorted(counts)) + tuple(
        len(cluster.node(rank).accelerators) for rank in sorted(spares)
    )
    lease = acquire_need(
        cluster,
        need,
        first_free(need),
        priority=given["priority"],
        queue_timeout_s=given["queue_timeout_s"],
    )
    params = inspect.signature(create).parameters
    args = {k: v for k, v in given.items() if k in params}
    first_spare = len(need) - len(spares)
    args.update(
        cluster=lease.cluster,
        spare_nodes=list(range(first_spare, len(need))) or None,
        share_cluster=False,
    )
    try:
        layout = create(**args)
    except BaseException:
        lease.release()
        raise
    assert layout.reservation is not None  # every layout is made through one
    layout.reservation.lease = lease  # released with the layout's groups
    try:
        lease.confirm_held(
            (slot.node_rank, gpu)
            for group in layout.reservation.all_groups
            for slot in group.slots
            for gpu in slot.gpu_ids
        )
    except BaseException:
        layout.remove()
        raise
    return layout
