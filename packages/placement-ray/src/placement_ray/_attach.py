"""``attach``: rebuild a detached launch in a new driver (see ``_detach``).

It lives apart from ``_detach`` because it builds a ``Launch``, and ``_launch`` calls
``_detach`` to write the record: so no module imports back into the one that calls it.
"""

from __future__ import annotations

from ._cluster import Cluster
from ._detach import read_state, saved_groups, saved_standbys
from ._launch import Launch
from .errors import ArgumentError

__all__ = ["attach"]


def attach(name: str, cluster: Cluster | None = None) -> Launch:
    """Rebuild a detached launch in a new driver: the same workers, groups and ranks.

    Args:
        name: The launch's name (``launch(..., name=name, detached=True)``).
        cluster: The job's cluster view (default: ``Cluster()``, the job of the current
            Ray namespace).

    Returns:
        The launch, its workers reached by their actor names.

    Raises:
        ArgumentError: ``name`` is not a non-empty str.
        LaunchNotFoundError: no detached launch of that name in this namespace (the
            message names the namespace that holds one, if any).
        ForeignClusterError: the launch was made on another Ray cluster.
        ClusterError: this driver's view orders the nodes differently from the launch's.
    """
    if not isinstance(name, str) or not name:
        raise ArgumentError(f"name: expected the non-empty name of a launch, got {name!r}")
    if cluster is None:
        cluster = Cluster()
    state = read_state(name, cluster)
    job = Launch(
        state["plan"],
        cluster,
        state["placement_groups"],
        saved_groups(state, cluster),
        state["gpu_map"],
        spare_groups=state["spare_groups"],
        on_node_loss=state["on_node_loss"],
        name=name,
        detached=True,
    )
    job.recoveries.extend(state["recoveries"])
    job.standbys = saved_standbys(state.get("standbys", {}), cluster)
    return job
