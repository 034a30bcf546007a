"""slime's train group (``RayTrainGroup``) on ``create_placement_groups``' actor role.

Rank r sits in ordered bundle r (ordered by node rank and physical GPU) with a fractional GPU share
(colocate: 0.4 by default, so trainer 0.4 + critic 0.4 + rollout 0.2 fit one GPU; disaggregated: 1),
sees exactly its bundle's GPU, and gets the worker environment
(docs/concepts/worker-environment.md). Rank 0's node gives ``MASTER_ADDR``; rank 0 holds
``MASTER_PORT`` until hand-over. ``init/train/eval/save/update_weights/offload/onload`` run on every
rank concurrently.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from placement_core import Plan, check_user_env, plan_from_assignments
from placement_ray._cluster import Cluster
from placement_ray._colocation import GpuShare, ShareLedger, check_shares, validate_share
from placement_ray._request import WorkerOptions, WorkerRequest, worker_request
from placement_ray._startup import start_workers
from placement_ray._worker_group import WorkerGroup
from placement_ray.errors import ArgumentError

from .bundles import RoleBundles, role_seats

if TYPE_CHECKING:
    from .layout import SlimeLayout

__all__ = [
    "COLOCATE_TRAIN_SHARE",
    "TrainGroup",
    "bundle_plan",
    "create_train_group",
    "train_requests",
    "used_shares",
]

COLOCATE_TRAIN_SHARE = 0.4
"""Default GPU share of a train actor when training and rollout share GPUs."""


class TrainGroup(WorkerGroup):
    """A ``WorkerGroup`` of train actors with slime's calls (all ranks, concurrently).

    Each ``name(...)`` waits and returns the results in rank order; ``async_name(...)``
    returns the object refs at once.
    """

    def init(self, *args: Any, timeout_s: float | None = None, **kwargs: Any) -> list[Any]:
        """``init`` on every rank."""
        return self.execute("init", *args, timeout_s=timeout_s, **kwargs)

    def train(self, *args: Any, timeout_s: float | None = None, **kwargs: Any) -> list[Any]:
        """``train`` on every rank."""
        return self.execute("train", *args, timeout_s=timeout_s, **kwargs)

    def eval(self, *args: Any, timeout_s: float | None = None, **kwargs: Any) -> list[Any]:
        """``eval`` on every rank."""
        return self.execute("eval", *args, timeout_s=timeout_s, **kwargs)

    def save(self, *args: Any, timeout_s: float | None = None, **kwargs: Any) -> list[Any]:
        """``save`` on every rank."""
        return self.execute("save", *args, timeout_s=timeout_s, **kwargs)

    def update_weights(
        self, *args: Any, timeout_s: float | None = None, **kwargs: Any
    ) -> list[Any]:
        """``update_weights`` on every rank."""
        return self.execute("update_weights", *args, timeout_s=timeout_s, **kwargs)

    def offload(self, *args: Any, timeout_s: float | None = None, **kwargs: Any) -> list[Any]:
        """``offload`` on every rank."""
        return self.execute("offload", *args, timeout_s=timeout_s, **kwargs)

    def onload(self, *args: Any, timeout_s: float | None = None, **kwargs: Any) -> list[Any]:
        """``onload`` on every rank."""
        return self.execute("onload", *args, timeout_s=timeout_s, **kwargs)

    def async_init(self, *args: Any, **kwargs: Any) -> list[Any]:
        """``init`` on every rank; the object refs."""
        return self.execute_async("init", *args, **kwargs)

    def async_train(self, *args: Any, **kwargs: Any) -> list[Any]:
        """``train`` on every rank; the object refs."""
        return self.execute_async("train", *args, **kwargs)

    def async_eval(self, *args: Any, **kwargs: Any) -> list[Any]:
        """``eval`` on every rank; the object refs."""
        return self.execute_async("eval", *args, **kwargs)

    def async_update_weights(self, *args: Any, **kwargs: Any) -> list[Any]:
        """``update_weights`` on every rank; the object refs."""
        return self.execute_async("update_weights", *args, **kwargs)


def bundle_plan(cluster: Cluster, role: str, bundles: RoleBundles) -> Plan:
    """The role's plan: rank r on ordered bundle r's node and GPU (core's assignments)."""
    gpus = [(n, (g,)) for n, g in zip(bundles.node_ranks, bundles.gpu_ids, strict=True)]
    return plan_from_assignments({role: gpus}, cluster.inventory)


def used_shares(shares: ShareLedger, bundles: RoleBundles) -> dict[tuple[int, int], float]:
    """GPU shares already handed out on a role's bundles, by ``(node rank, GPU)``."""
    per_group: dict[str, dict[int, float]] = {}
    out: dict[tuple[int, int], float] = {}
    for i, (index, node_rank, gpu) in enumerate(
        zip(bundles.bundle_indices, bundles.node_ranks, bundles.gpu_ids, strict=True)
    ):
        pg_id = bundles.group_at(i).id.hex()
        if pg_id not in per_group:
            per_group[pg_id] = shares.used(pg_id)
        if index in per_group[pg_id]:
            out[(node_rank, gpu)] = per_group[pg_id][index]
    return out


def create_train_group(
    layout: SlimeLayout,
    actor_cls: Any,
    *,
    cluster: Cluster | None = None,
    role: str = "actor",
    num_gpus_per_actor: float | None = None,
    args: Sequence[Any] = (),
    kwargs: Mapping[str, Any] | None = None,
    env_vars: Mapping[str, str] | None = None,
    master_port: bool = True,
    timeout_s: float | None = 120.0,
) -> TrainGroup:
    """Start one train actor per bundle of ``layout[role]``; rank r in ordered bundle r.

    Args:
        layout: From ``create_placement_groups``.
        actor_cls: The train actor class (plain or ``@ray.remote``).
        cluster: The job's cluster view (default: the layout's, else ``Cluster()``); GPU
            shares are checked against those started through the same view.
        role: The layout role to use (``actor``; a critic uses the same bundles).
        num_gpus_per_actor: GPU share per actor (default 0.4 colocated, else 1).
        args: Constructor arguments for every rank.
        kwargs: Constructor keyword arguments for every rank.
        env_vars: Extra environment for every rank (reserved names are an error).
        master_port: Rank 0 holds a ``MASTER_PORT`` until hand-over.
        timeout_s: Limit for the actors to start (and, separately, their ``__init__``).

    Raises:
        ArgumentError: the role has no bundles, or a bad share.
        OversubscribedGPUError: with the shares already on these GPUs, one would exceed 1.
        WorkerStartTimeoutError: actors did not start in time (named, with the cause).
        WorkerStartError: actors died starting, or their ``__init__`` raised.
    """
    if cluster is None:
        cluster = layout.cluster or Cluster()
    bundles = layout[role]
    if not len(bundles):
        raise ArgumentError(f"role: the {layout.mode} layout gives {role!r} no bundles")
    default = COLOCATE_TRAIN_SHARE if layout.mode == "colocate" else 1.0
    share = validate_share(
        "num_gpus_per_actor", default if num_gpus_per_actor is None else num_gpus_per_actor
    )
    check_shares(
        (
            GpuShare(f"{role} rank {r}", node_rank, gpu, share)
            for r, (node_rank, gpu) in enumerate(
                zip(bundles.node_ranks, bundles.gpu_ids, strict=True)
            )
        ),
        already=used_shares(cluster.shares, bundles),
    )
    user_env = dict(env_vars or {})
    check_user_env(user_env, path="env_vars")
    options = WorkerOptions(
        actor_cls,
        args=tuple(args),
        kwargs=dict(kwargs or {}),
        env_vars=user_env,
        master_port=master_port,
        gpu_share=share,
    )
    the_plan = bundle_plan(cluster, role, bundles)
    started = start_workers(
        train_requests(the_plan, role, bundles, options), cluster=cluster, timeout_s=timeout_s
    )
    return TrainGroup(
        role,
        started.workers,
        cluster=cluster,
        reports=started.reports,
        master_addr=the_plan.master_addr(role),
        master_port=started.master_ports[role],
    )


def train_requests(
    the_plan: Plan, role: str, bundles: RoleBundles, options: WorkerOptions
) -> list[WorkerRequest]:
    """One request per rank of ``role``: rank r seated in the role's ordered bundle r."""
    seat = role_seats(bundles)
    return [worker_request(the_plan, role, p, options, seat(p)) for p in the_plan.components[role]]
