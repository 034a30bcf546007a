"""OpenRLHF's placement groups and rank-to-bundle maps, in (node, GPU) order.

Swap the imports in a script built on OpenRLHF's ``train_ppo_ray``::

    # from openrlhf.trainer.ray.launcher import RayActorGroup
    # from openrlhf.trainer.ray import create_vllm_engines
    from placement_ray.compat.openrlhf import RayActorGroup, create_vllm_engines

or run OpenRLHF's own ``train(args)`` on them: ``placement_ray.compat.openrlhf.train(args)``.

- ``RayActorGroup`` (OpenRLHF's, with ``_initiate_actors`` replaced): rank ``r`` sits on
  the r-th (node, GPU) of its placement group, not on bundle ``r`` wherever Ray put it; a
  group it reserves itself has bundle ``r`` on the r-th (node, GPU).
- ``create_vllm_engines`` (OpenRLHF's, run with the two pieces below): each engine's
  tensor-parallel bundles sit on one node, in GPU order, colocated or not.
- ``get_bundle_indices``: engine ``i``'s bundles in (node rank, GPU) order, the order
  actor ranks follow (OpenRLHF orders nodes by first-seen bundle).
- ``placement_group(bundles, strategy)``: the group OpenRLHF's ``train`` reserves, with
  bundle ``r`` on the r-th (node, GPU), each engine of ``engine_size`` GPUs on one node.

See the guide "Coming from OpenRLHF". This module imports OpenRLHF's launcher and vLLM
engine modules; the ordering underneath (``placement_ray._openrlhf``) does not.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import ray
from openrlhf.trainer.ray import launcher as _launcher
from openrlhf.trainer.ray import vllm_engine as _engine
from ray.util.placement_group import PlacementGroup
from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

from placement_ray._cluster import Cluster
from placement_ray._openrlhf.ordered import engine_bundles, ordered_group, rank_bundles
from placement_ray.errors import ArgumentError

__all__ = [
    "RayActorGroup",
    "create_vllm_engines",
    "get_bundle_indices",
    "placement_group",
    "train",
]

_CLUSTER: list[Cluster] = []


def _cluster(cluster: Cluster | None) -> Cluster:
    """The given view, else one attached to the connected Ray cluster (made once)."""
    if cluster is not None:
        return cluster
    if not _CLUSTER:
        _CLUSTER.append(Cluster())
    return _CLUSTER[0]


def placement_group(
    bundles: Sequence[Mapping[str, float]],
    strategy: str = "PACK",
    *,
    engine_size: int = 1,
    cluster: Cluster | None = None,
    timeout_s: float | None = None,
) -> PlacementGroup:
    """A placement group with bundle ``r`` on the r-th (node, GPU), ready when returned.

    Args:
        bundles: Equal bundles (OpenRLHF's ``{"GPU": 1, "CPU": 1}``).
        strategy: ``PACK`` (what OpenRLHF asks; bundles are pinned to nodes filled in
            node order either way).
        engine_size: Consecutive bundles one vLLM engine takes; each keeps to one node.
        cluster: The job's cluster view (default: attach to the connected Ray cluster).
        timeout_s: Limit for placing the group (None: wait, as OpenRLHF does).

    Raises:
        ArgumentError: unequal bundles, or a strategy other than ``PACK``.
        InfeasiblePlacementGroupError: the cluster can never hold the group; nothing is
            reserved.
    """
    if strategy != "PACK":
        raise ArgumentError(f"strategy: expected 'PACK' (as OpenRLHF asks), got {strategy!r}")
    kinds = {tuple(sorted(dict(b).items())) for b in bundles}
    if len(kinds) != 1:
        raise ArgumentError(
            f"bundles: expected a non-empty list of equal bundles, got {list(bundles)!r}"
        )
    group = ordered_group(
        _cluster(cluster),
        len(bundles),
        dict(bundles[0]),
        engine_size=engine_size,
        timeout_s=timeout_s,
    )
    return group.pg


def get_bundle_indices(
    placement_group: PlacementGroup, index: int, length: int, *, cluster: Cluster | None = None
) -> list[int]:
    """OpenRLHF's ``get_bundle_indices``: engine ``index``'s ``length`` bundles, taken in
    (node rank, GPU) order, all on one node.

    Raises:
        ArgumentError: bad ``index`` / ``length`` or too few bundles.
        EngineAlignmentError: the engine's bundles straddle nodes.
    """
    return engine_bundles(placement_group, _cluster(cluster), index, length)


class RayActorGroup(_launcher.RayActorGroup):  # type: ignore[misc]
    """OpenRLHF's ``RayActorGroup``: same arguments, ranks in (node, GPU) order.

    Args:
        *args: OpenRLHF's (``num_nodes, num_gpus_per_node, ray_actor_type, pg,
            num_gpus_per_actor, duplicate_actors, resources, num_resources_per_node``).
        cluster: The job's cluster view (default: attach to the connected Ray cluster).
        timeout_s: Limit for placing a group it reserves (None: wait).
        **kwargs: OpenRLHF's, by name.
    """

    def __init__(
        self,
        *args: Any,
        cluster: Cluster | None = None,
        timeout_s: float | None = None,
        **kwargs: Any,
    ) -> None:
        self._placement_cluster = cluster
        self._placement_timeout_s = timeout_s
        super().__init__(*args, **kwargs)

    def _initiate_actors(self, pg: PlacementGroup | None, num_gpus_per_actor: float) -> None:
        """Start rank 0, then ranks 1.. with rank 0's address, rank ``r`` on the r-th
        (node, GPU) of ``pg`` (reserved here, ordered, when None)."""
        world_size = self._num_nodes * self._num_gpus_per_node
        cluster = _cluster(self._placement_cluster)
        if pg is None:
            bundle: dict[str, float] = {"GPU": 1, "CPU": 1}
            if self._resources:
                bundle[next(iter(self._resources))] = self._num_resources_per_node
            pg = ordered_group(cluster, world_size, bundle, timeout_s=self._placement_timeout_s).pg
        self.placement_group = pg
        self.rank_bundles = rank_bundles(pg, cluster, world_size)

        def start(rank: int, addr: str | None, port: int | None) -> Any:
            return self.ray_actor_type.options(
                num_cpus=num_gpus_per_actor,
                num_gpus=num_gpus_per_actor,
                resources=self._resources,
                scheduling_strategy=PlacementGroupSchedulingStrategy(
                    placement_group=pg, placement_group_bundle_index=self.rank_bundles[rank]
                ),
            ).remote(world_size, rank, addr, port)

        master = start(0, None, None)
        self._actor_handlers = [master]
        if world_size > 1:
            addr, port = ray.get(master.get_master_addr_port.remote())
            self._actor_handlers.extend(start(r, addr, port) for r in range(1, world_size))


@contextlib.contextmanager
def _bound(module: Any, **names: Any) -> Iterator[None]:
    """Bind ``names`` in ``module`` for the duration (OpenRLHF's own code then calls ours)."""
    before = {name: getattr(module, name) for name in names}
    for name, value in names.items():
        setattr(module, name, value)
    try:
        yield
    finally:
        for name, value in before.items():
            setattr(module, name, value)


def create_vllm_engines(
    num_engines: int,
    tensor_parallel_size: int,
    pretrain: str,
    seed: int,
    full_determinism: bool,
    enable_prefix_caching: bool,
    enforce_eager: bool,
    max_model_len: int,
    shared_pg: PlacementGroup | None = None,
    gpu_memory_utilization: float | None = None,
    vllm_enable_sleep: bool = False,
    logprobs_mode: str | None = None,
    agent_func_path: str | None = None,
    remote_rm_url: str | None = None,
    max_images_per_prompt: int = 0,
    *,
    cluster: Cluster | None = None,
) -> list[Any]:
    """OpenRLHF's ``create_vllm_engines``, with each engine's bundles on one node.

    OpenRLHF's own function runs; the group it reserves (``shared_pg`` None) is
    :func:`placement_group` with ``engine_size=tensor_parallel_size``, and each engine's
    bundles come from :func:`get_bundle_indices`. A ``shared_pg`` made by
    :func:`placement_group` (``train`` does) has its engines aligned already.

    Raises:
        ArgumentError: ``num_engines`` or ``tensor_parallel_size`` not an int >= 1.
        EngineAlignmentError: an engine of a given ``shared_pg`` straddles nodes.
    """
    for name, value in (
        ("num_engines", num_engines),
        ("tensor_parallel_size", tensor_parallel_size),
    ):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ArgumentError(f"{name}: expected an int >= 1, got {value!r}")
    ordered = functools.partial(placement_group, engine_size=tensor_parallel_size, cluster=cluster)
    indices = functools.partial(get_bundle_indices, cluster=cluster)
    with _bound(_engine, placement_group=ordered, get_bundle_indices=indices):
        engines: list[Any] = _engine.create_vllm_engines(
            num_engines,
            tensor_parallel_size,
            pretrain,
            seed,
            full_determinism,
            enable_prefix_caching,
            enforce_eager,
            max_model_len,
            shared_pg,
            gpu_memory_utilization,
            vllm_enable_sleep,
            logprobs_mode,
            agent_func_path=agent_func_path,
            remote_rm_url=remote_rm_url,
            max_images_per_prompt=max_images_per_prompt,
        )
    return engines


def train(args: Any) -> Any:
    """OpenRLHF's ``train_ppo_ray.train(args)`` on the ordered pieces of this module.

    OpenRLHF's own ``train`` runs with its ``placement_group``, ``RayActorGroup`` and
    ``create_vllm_engines`` bound to this module's (a colocated group keeps each vLLM
    engine of ``args.vllm.tensor_parallel_size`` GPUs on one node).
    """
    from openrlhf.cli import train_ppo_ray as _train

    size = getattr(getattr(args, "vllm", None), "tensor_parallel_size", 1) or 1
    with _bound(
        _train,
        placement_group=functools.partial(placement_group, engine_size=size),
        RayActorGroup=RayActorGroup,
        create_vllm_engines=create_vllm_engines,
    ):
        return _train.train(args)
