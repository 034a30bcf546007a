"""verl's resource pools on placement-ray's ordered, pinned, checked reservation.

Swap one import in a verl trainer::

    # from verl.single_controller.ray import RayResourcePool, ResourcePoolManager
    from placement_ray.compat.verl import RayResourcePool, ResourcePoolManager

verl's own ``RayWorkerGroup`` then starts its workers unchanged, rank ``r`` on the r-th
(node, GPU) in placement-ray's node order (numeric IPs; node-rank labels, shared IPs and
NVLink domains as docs/concepts/node-order.md says). The classes subclass verl's own, so
verl's code that checks types keeps working: a whole pool is a ``SubRayResourcePool``
starting at rank 0, so ``RayWorkerGroup`` takes ranks from the pool's group list as it is
(it never sorts it again by IP text), and split pools index the same list. See the guide
"Coming from verl".

This module imports verl (``verl.single_controller.ray.base``); the planning underneath
(``placement_ray._verl``) does not.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from verl.single_controller.ray import base as _base

from placement_ray._cluster import Cluster
from placement_ray._placement_groups import OrderedPlacementGroup
from placement_ray._reservation import Reservation
from placement_ray._verl.cluster import node_gpus, node_rooms, pool_bundle, pool_resource
from placement_ray._verl.plan import PoolPlan, check_colocate_count, check_counts, plan_pools
from placement_ray._verl.reserve import reserve_pool
from placement_ray._verl.topology import read_topology, spare_ranks
from placement_ray.errors import ArgumentError

__all__ = [
    "RayResourcePool",
    "ResourcePoolManager",
    "SubRayResourcePool",
    "split_resource_pool",
]

logger = logging.getLogger(__name__)

STRATEGIES = ("STRICT_PACK", "PACK", "SPREAD", "STRICT_SPREAD")
"""What verl passes as ``strategy``; every bundle is pinned to its planned node, so the
strategy does not choose nodes."""


class RayResourcePool(_base.SubRayResourcePool):  # type: ignore[misc]
    """verl's ``RayResourcePool``: same constructor, same ``get_placement_groups``.

    Args:
        process_on_nodes: Processes per node, e.g. ``[8, 8]``.
        use_gpu: Each bundle holds one accelerator.
        name_prefix: Prefix of the placement groups' names (random when None).
        max_colocate_count: Worker groups sharing each GPU; each bundle asks that many
            CPUs, as in verl.
        detached: Detached placement groups.
        accelerator_type: A Ray resource each bundle asks a sliver of
            (``accelerator_type:H100``).
        cluster: The job's cluster view (default: ``Cluster()``, attaching to the Ray
            cluster the driver is connected to).
        timeout_s: Limit for each placement group (None: wait, as verl does).

    Raises:
        ArgumentError: ``process_on_nodes`` is not a list of ints >= 1, or
            ``max_colocate_count`` is not an int >= 1.
    """

    def __init__(
        self,
        process_on_nodes: Sequence[int] | None = None,
        use_gpu: bool = True,
        name_prefix: str | None = None,
        max_colocate_count: int = 10,
        detached: bool = False,
        accelerator_type: str | None = None,
        *,
        cluster: Cluster | None = None,
        timeout_s: float | None = None,
    ) -> None:
        counts = (
            []
            if process_on_nodes is None
            else list(check_counts("process_on_nodes", process_on_nodes))
        )
        check_colocate_count(max_colocate_count)
        _base.RayResourcePool.__init__(
            self, counts, use_gpu, name_prefix, max_colocate_count, detached, accelerator_type
        )
        self.pgs: list[Any] | None = None
        self.start_bundle_index = 0
        self.cluster = cluster
        self.timeout_s = timeout_s
        self.plan: PoolPlan | None = None
        self.groups: list[OrderedPlacementGroup] = []
        self.reservation: Reservation | None = None

    @property
    def world_size(self) -> int:
        """The pool's processes (all of ``store``)."""
        return sum(self._store)

    @property
    def subgroup_world_size(self) -> int:
        """The whole pool is its own only sub pool."""
        return self.world_size

    def get_placement_groups(
        self, strategy: str = "STRICT_PACK", name: str | None = None, device_name: str = "cuda"
    ) -> list[Any]:
        """The pool's placement groups, reserved on the first call, in rank order.

        Group ``i`` holds ranks ``i*store[0] ..`` at bundles ``0 ..``, each bundle pinned
        to its planned node; each call returns the same list.

        Raises:
            ArgumentError: a bad ``strategy`` or ``device_name``, or an empty pool.
            InfeasiblePlacementGroupError: the cluster can never hold the pool (names each
                node's GPU or CPU shortfall); nothing is reserved.
        """
        if self.pgs is None:
            if strategy not in STRATEGIES:
                raise ArgumentError(f"strategy: expected one of {STRATEGIES}, got {strategy!r}")
            cluster = self._cluster()
            resource = pool_resource(cluster, device_name)
            if self.plan is None:
                counts = check_counts("process_on_nodes", self._store)
                self.plan = plan_pools(
                    {self.name_prefix: counts},
                    node_rooms(cluster, resource),
                    cpus_per_bundle=self.max_colocate_count,
                    gpus_per_bundle=1 if self.use_gpu else 0,
                    resource=resource,
                )[self.name_prefix]
            self._reserve(cluster, resource, name)
        return list(self.pgs or ())

    def _cluster(self) -> Cluster:
        if self.cluster is None:
            self.cluster = Cluster()
        return self.cluster

    def _reserve(self, cluster: Cluster, resource: str, name: str | None) -> None:
        assert self.plan is not None
        prefix = name or f"{self.name_prefix}verl_group_{'_'.join(map(str, self._store))}:"
        bundle = pool_bundle(
            use_gpu=self.use_gpu,
            resource=resource,
            max_colocate_count=self.max_colocate_count,
            accelerator_type=self.accelerator_type,
        )
        self.reservation = reserve_pool(
            cluster,
            self.plan,
            bundle,
            name=prefix,
            lifetime="detached" if self.detached else None,
            timeout_s=self.timeout_s,
            probe=self.use_gpu,
        )
        self.groups = list(self.reservation.ordered)
        self.pgs = [g.pg for g in self.groups]

    @property
    def node_ranks(self) -> tuple[int, ...]:
        """Node rank of each rank's bundle (after the first ``get_placement_groups``)."""
        return self.plan.nodes if self.plan is not None else ()

    def remove(self) -> None:
        """Remove the pool's placement groups (their workers die with them)."""
        if self.reservation is not None:
            self.reservation.release()
        self.reservation, self.groups, self.pgs = None, [], None


class SubRayResourcePool(_base.SubRayResourcePool):  # type: ignore[misc]
    """A slice of a pool: ranks ``start_bundle_index ..`` of the same placement groups.

    Rank ``r`` of the slice is rank ``start_bundle_index + r`` of the whole pool, on the
    same node and GPU.
    """

    def __init__(
        self,
        placement_groups: list[Any],
        start_bundle_index: int,
        subgroup_world_size: int,
        **kwargs: Any,
    ) -> None:
        super().__init__(
            placement_groups=placement_groups,
            start_bundle_index=start_bundle_index,
            subgroup_world_size=subgroup_world_size,
            **kwargs,
        )


def _split_sizes(world_size: int, split_size: object) -> list[int]:
    if isinstance(split_size, int) and not isinstance(split_size, bool):
        if split_size < 1 or world_size % split_size:
            raise ArgumentError(
                f"split_size: expected a divisor of the pool's world size {world_size}, "
                f"got {split_size!r}"
            )
        return [split_size] * (world_size // split_size)
    sizes = list(split_size) if isinstance(split_size, Sequence) else None
    if (
        sizes is None
        or any(isinstance(s, bool) or not isinstance(s, int) or s < 1 for s in sizes)
        or sum(sizes) != world_size
    ):
        raise ArgumentError(
            f"split_size: expected an int or a list of ints >= 1 summing to the pool's "
            f"world size {world_size}, got {split_size!r}"
        )
    return sizes


def split_resource_pool(
    resource_pool: Any, split_size: int | list[int]
) -> list[SubRayResourcePool]:
    """verl's ``split_resource_pool``: consecutive slices of the pool's ranks.

    Slice ``k`` holds the pool's ranks ``sum(sizes[:k]) ..``: the same nodes and GPUs as
    in the whole pool (the pool is reserved first if it is not yet).

    Raises:
        ArgumentError: ``split_size`` does not divide the pool, or its sizes do not sum
            to the pool's world size.
    """
    sizes = _split_sizes(resource_pool.world_size, split_size)
    start = getattr(resource_pool, "start_bundle_index", 0)
    groups = resource_pool.get_placement_groups()
    pools = []
    for k, size in enumerate(sizes):
        pools.append(
            SubRayResourcePool(
                placement_groups=groups,
                start_bundle_index=start,
                subgroup_world_size=size,
                process_on_nodes=resource_pool.store,
                use_gpu=resource_pool.use_gpu,
                name_prefix=f"{resource_pool.name_prefix}_split_{k}",
                max_colocate_count=resource_pool.max_colocate_count,
            )
        )
        start += size
    return pools


@dataclass
class ResourcePoolManager(_base.ResourcePoolManager):  # type: ignore[misc]
    """verl's ``ResourcePoolManager``: every pool planned together, reserved up front.

    Attributes:
        resource_pool_spec: Pool name -> processes per node.
        mapping: Role -> pool name (a role is also found by its text, ``str(role)``,
            as a ``topology:`` section names it).
        max_colocate_count: CPUs per bundle and worker groups per GPU.
        resource_pool_dict: Pool name -> its pool, after ``create_resource_pool``.
        cluster: The job's cluster view (default: ``Cluster()``).
        spare_nodes: Node ranks kept whole as spares (from a ``topology:`` standby pool).
        timeout_s: Limit for each placement group (None: wait).
        spare_groups: Spare node rank -> the group reserving it whole.
    """

    cluster: Cluster | None = None
    spare_nodes: tuple[int, ...] = ()
    timeout_s: float | None = None
    spare_groups: dict[int, OrderedPlacementGroup] = field(default_factory=dict)

    def create_resource_pool(self) -> None:
        """Plan every pool, refuse a shortfall, then reserve every pool and spare.

        Raises:
            ArgumentError: a malformed spec or ``max_colocate_count``, or spare nodes the
                cluster lacks.
            InfeasiblePlacementGroupError: a pool bigger than the cluster, or a node short
                of GPUs or CPUs (named); nothing is reserved.
        """
        cluster, resource, plans = self._plan()
        made: list[RayResourcePool] = []
        try:
            for name, plan in plans.items():
                pool = RayResourcePool(
                    list(self.resource_pool_spec[name]),
                    use_gpu=True,
                    name_prefix=name,
                    max_colocate_count=self.max_colocate_count,
                    cluster=cluster,
                    timeout_s=self.timeout_s,
                )
                pool.plan = plan
                pool.get_placement_groups()
                made.append(pool)
                self.resource_pool_dict[name] = pool
            self.spare_groups = Reservation.reserve(
                cluster,
                {},
                self.spare_nodes,
                cpus_per_bundle=self.max_colocate_count,
                resource=resource,
                timeout_s=self.timeout_s,
            ).spares
        except BaseException:
            for pool in made:
                pool.remove()
            self.resource_pool_dict.clear()
            raise

    def _plan(self) -> tuple[Cluster, str, dict[str, PoolPlan]]:
        if not isinstance(self.resource_pool_spec, Mapping) or not self.resource_pool_spec:
            raise ArgumentError(
                "resource_pool_spec: expected a mapping of pool name -> processes per node, "
                f"got {self.resource_pool_spec!r}"
            )
        counts = {
            name: check_counts(f"resource_pool_spec[{name!r}]", value)
            for name, value in self.resource_pool_spec.items()
        }
        check_colocate_count(self.max_colocate_count)
        if self.cluster is None:
            self.cluster = Cluster()
        resource = pool_resource(self.cluster, "cuda")
        unknown = [r for r in self.spare_nodes if not 0 <= r < self.cluster.num_nodes]
        if unknown:
            raise ArgumentError(
                f"spare_nodes: unknown nodes {unknown}; the cluster has nodes "
                f"0-{self.cluster.num_nodes - 1}"
            )
        rooms = node_rooms(self.cluster, resource, self.spare_nodes)
        plans = plan_pools(
            counts, rooms, cpus_per_bundle=self.max_colocate_count, resource=resource
        )
        return self.cluster, resource, plans

    def _check_resource_available(self) -> None:
        """Plan every pool without reserving: raises what ``create_resource_pool`` would."""
        self._plan()

    def get_resource_pool(self, role: Any) -> Any:
        """The pool of ``role`` (looked up as given, then as ``str(role)``).

        Raises:
            UnknownRoleError: the mapping has neither.
        """
        from placement_ray.errors import UnknownRoleError

        for key in (role, str(role)):
            if key in self.mapping:
                return self.resource_pool_dict[self.mapping[key]]
        raise UnknownRoleError(
            f"role: {role!r} is not in the mapping; mapped: {sorted(map(str, self.mapping))}"
        )

    @classmethod
    def from_topology(
        cls,
        topology: object,
        *,
        max_colocate_count: int = 3,
        cluster: Cluster | None = None,
        timeout_s: float | None = None,
    ) -> ResourcePoolManager:
        """A manager from verl's ``topology:`` section (RFC verl#7269; see
        ``placement_ray._verl.topology``): its pools, its models' mapping, and its
        standby pool as spare nodes.

        Raises:
            ArgumentError: a malformed section, unknown names, or standby nodes the
                cluster lacks; nothing is reserved.
        """
        read = read_topology(topology)
        if cluster is None:
            cluster = Cluster()
        if read.cluster_nodes > cluster.num_nodes:
            raise ArgumentError(
                f"topology.clusters: {read.cluster_nodes} nodes declared, the Ray cluster "
                f"has {cluster.num_nodes}"
            )
        gpus = node_gpus(cluster, pool_resource(cluster, "cuda"))
        spares = spare_ranks(read.spares, gpus, cluster.num_nodes)
        return cls(
            resource_pool_spec=read.resource_pool_spec,
            mapping=dict(read.mapping),
            max_colocate_count=max_colocate_count,
            cluster=cluster,
            spare_nodes=spares,
            timeout_s=timeout_s,
        )
