"""One worker's request: everything that creates its actor, built by one function.

:func:`worker_request` builds the request of one worker from its core ``Placement``;
``launch``, slime's train group and slime's rollout engines all issue their workers this
way, and the startup routine (``start_workers``, ``allocate``) takes each request whole.
Nothing else derives a worker's environment.

A request keeps apart what depends on the node, so the same rank can be issued again on
another node or placement group:

* ``options`` (:class:`WorkerOptions`): what every worker of the component asks for
  wherever it runs (actor class, constructor arguments, extra env, GPU share, CPUs, port
  blocks, ...);
* ``seat`` (:class:`Seat`): where it sits (node, the physical GPUs it sees, its bundles),
  the only part tied to a node and a placement group; :func:`seat_for` builds it;
* ``placement``: the core record it was built from; ``name``, ``env``, ``port_blocks`` and
  ``interpreter`` are derived from it, the plan, the options and the seat.

To issue rank r again elsewhere: plan it there (a moved ``Placement`` in a new plan), seat
it in the new node's placement group with :func:`seat_for`, and call
:meth:`WorkerRequest.reissue` (``worker_request`` again, with the request's own options).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from ray.util.placement_group import PlacementGroup

from placement_core import Placement, Plan, visibility_env

from ._worker import COMPONENT_ENV, MASTER_PORT_BLOCK
from .errors import ArgumentError

__all__ = [
    "Seat",
    "WorkerOptions",
    "WorkerRequest",
    "placement_kind",
    "seat_for",
    "worker_request",
]

_EMPTY: Mapping[str, Any] = MappingProxyType({})


def placement_kind(placement: Placement) -> str:
    """``"gpu"`` (sits in a GPU bundle), ``"hardware"`` (a robot) or ``"node"``."""
    if placement.hardware_type is not None:
        return "hardware"
    return "gpu" if placement.hardware_ranks else "node"


@dataclass(frozen=True, slots=True)
class WorkerOptions:
    """What every worker of one component asks for, on whatever node it runs.

    Attributes:
        cls: The actor class (plain or ``@ray.remote``).
        args: Constructor arguments.
        kwargs: Constructor keyword arguments.
        env_vars: Extra environment, under the variables placement-ray sets.
        rank_env: Give the worker the plan's worker environment (``RANK``,
            ``WORLD_SIZE``, ``MASTER_ADDR``, node-group env vars, ...); False gives only
            the visibility variable (slime's rollout engines).
        master_port: Rank 0 holds a ``MASTER_PORT`` block; every rank learns the port.
        gpu_share: Its fractional request of each GPU it uses; applies where it sits in a
            bundle (node and hardware placements ask for no GPU).
        num_cpus: CPUs it asks for.
        port_blocks: Block name -> ``(count, consecutive)`` it reserves and holds.
        bind_cpus: Bind it to the CPUs in ``PLACEMENT_CPU_AFFINITY`` before its
            ``__init__``.
        capture_child_tasks: Tasks it starts run in its placement group.
        actor_prefix: Name each actor ``<prefix><component>/<rank>`` in the job's Ray
            namespace (None: anonymous).
        detached: Create the actors with Ray's detached lifetime (they outlive the
            driver; see ``launch(..., detached=True)``).
    """

    cls: Any
    args: tuple[Any, ...] = ()
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    env_vars: Mapping[str, str] = field(default_factory=dict)
    rank_env: bool = True
    master_port: bool = False
    gpu_share: float | None = None
    num_cpus: float = 0
    port_blocks: Mapping[str, tuple[int, bool]] = field(default_factory=dict)
    bind_cpus: bool = False
    capture_child_tasks: bool = False
    actor_prefix: str | None = None
    detached: bool = False


@dataclass(frozen=True, slots=True)
class Seat:
    """Where a worker sits: the part of its request that depends on the node.

    Attributes:
        node_rank: Its node.
        gpu_ids: The physical GPU ids it sees, in visibility order (empty: none).
        bundle: ``(placement group, bundle index)`` of its first GPU, or None (hard node
            affinity, no GPU request).
        more_bundles: The bundles of its other GPUs in the same group (its share of each
            is booked in the cluster view's ledger: Ray counts only the one it sits in).
    """

    node_rank: int
    gpu_ids: tuple[int, ...] = ()
    bundle: tuple[PlacementGroup, int] | None = None
    more_bundles: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class WorkerRequest:
    """Everything that creates one worker's actor; see :func:`worker_request`.

    Attributes:
        component: Its component.
        rank: Its rank in the component.
        name: Its readable name (``actor rank 3``).
        placement: The core placement it was built from (None for a hand-made request).
        options: What every worker of the component asks for.
        seat: Its node, GPUs and bundles.
        env: Its whole environment.
        port_blocks: The port blocks it holds (the options' and, on rank 0 with
            ``master_port``, the ``MASTER_PORT`` block).
        interpreter: Its node group's interpreter on its node, if any.
    """

    component: str
    rank: int
    name: str
    placement: Placement | None
    options: WorkerOptions
    seat: Seat
    env: Mapping[str, str] = field(default_factory=dict)
    port_blocks: Mapping[str, tuple[int, bool]] = field(default_factory=dict)
    interpreter: str | None = None

    @property
    def node_rank(self) -> int:
        """Its node."""
        return self.seat.node_rank

    @property
    def gpu_share(self) -> float | None:
        """Its GPU share where it sits in a bundle, else None."""
        return self.options.gpu_share if self.seat.bundle is not None else None

    @property
    def actor_name(self) -> str | None:
        """Its Ray actor name (``<prefix><component>/<rank>``), or None when anonymous."""
        prefix = self.options.actor_prefix
        return None if prefix is None else f"{prefix}{self.component}/{self.rank}"

    @property
    def holds_master_port(self) -> bool:
        """Whether it holds its component's ``MASTER_PORT`` block."""
        return MASTER_PORT_BLOCK in self.port_blocks

    def reissue(self, the_plan: Plan, placement: Placement, seat: Seat) -> WorkerRequest:
        """The same worker (component, rank, name, options) at a new placement and seat.

        Raises:
            ArgumentError: the placement is not this request's rank, or the seat is on
                another node than the placement.
        """
        if placement.rank != self.rank:
            raise ArgumentError(
                f"placement: {self.name} is rank {self.rank}, got a placement of rank "
                f"{placement.rank}"
            )
        return worker_request(
            the_plan, self.component, placement, self.options, seat, name=self.name
        )


def seat_for(
    placement: Placement,
    pg: PlacementGroup | None = None,
    held: Mapping[tuple[int, int], tuple[int, int]] | None = None,
) -> Seat:
    """Where a placement's worker sits.

    Args:
        placement: Its placement.
        pg: The placement group holding its GPUs (unused for node and hardware
            placements).
        held: ``(node rank, plan GPU id) -> (physical GPU id, bundle index in pg)`` for
            its GPUs.

    Returns:
        A GPU placement sits in the bundle of its first GPU and sees the physical GPUs
        held for its ids; any other sits on its node without a bundle.

    Raises:
        ArgumentError: a GPU placement without a group, or a GPU nothing holds.
    """
    if placement_kind(placement) != "gpu":
        return Seat(placement.node_rank)
    keys = [(placement.node_rank, g) for g in placement.hardware_ranks]
    missing = [k for k in keys if held is None or k not in held]
    if pg is None or held is None or missing:
        raise ArgumentError(
            f"held: rank {placement.rank} uses GPUs {list(placement.hardware_ranks)} on node "
            f"{placement.node_rank}; expected a placement group and a bundle holding each, "
            f"missing {[g for _, g in missing]}"
        )
    slots = [held[k] for k in keys]
    return Seat(
        placement.node_rank,
        gpu_ids=tuple(physical for physical, _ in slots),
        bundle=(pg, slots[0][1]),
        more_bundles=tuple(index for _, index in slots[1:]),
    )


def _plan_env(the_plan: Plan, component: str, placement: Placement) -> dict[str, str]:
    env = the_plan.env(component, placement.rank)
    if COMPONENT_ENV in env:
        raise ArgumentError(
            f"node group {placement.node_group!r} sets {COMPONENT_ENV} on node "
            f"{placement.node_rank}: placement-ray sets it itself"
        )
    return env


def worker_request(
    the_plan: Plan,
    component: str,
    placement: Placement,
    options: WorkerOptions,
    seat: Seat,
    *,
    name: str | None = None,
) -> WorkerRequest:
    """The request of one worker: ``placement`` of ``component`` in ``the_plan``, seated.

    Its environment: the options' ``env_vars``, then (with ``rank_env``) the plan's worker
    environment for the placement, then the visibility variable of the physical GPUs it
    sits on where they differ from the plan's ids (always without ``rank_env``), then
    ``PLACEMENT_COMPONENT``.

    Args:
        the_plan: The plan the placement belongs to (world size, master address, node
            group env and interpreter).
        component: The placement's component.
        placement: The placement.
        options: What every worker of the component asks for.
        seat: Where it sits (:func:`seat_for`).
        name: Its readable name; default ``"<component> rank <rank>"``.

    Returns:
        The request.

    Raises:
        ArgumentError: the seat is on another node than the placement, or the node group
            sets ``PLACEMENT_COMPONENT``.
    """
    if seat.node_rank != placement.node_rank:
        raise ArgumentError(
            f"seat: {component} rank {placement.rank} is placed on node "
            f"{placement.node_rank}, seated on node {seat.node_rank}"
        )
    env = dict(options.env_vars)
    if options.rank_env:
        env.update(_plan_env(the_plan, component, placement))
    if seat.gpu_ids and (not options.rank_env or seat.gpu_ids != placement.visible_accelerators):
        env.update(visibility_env(placement.accelerator_type, seat.gpu_ids))
    env[COMPONENT_ENV] = component
    blocks = dict(options.port_blocks)
    if options.master_port and placement.rank == 0:
        blocks[MASTER_PORT_BLOCK] = (1, False)
    return WorkerRequest(
        component=component,
        rank=placement.rank,
        name=f"{component} rank {placement.rank}" if name is None else name,
        placement=placement,
        options=options,
        seat=seat,
        env=env,
        port_blocks=blocks,
        interpreter=the_plan.interpreter(component, placement.rank),
    )
