"""``launch``: make a core plan real, one Ray actor per placement.

1. The config is planned against the live inventory (a plan made offline is re-planned
   and must come out the same).
2. Every GPU share is checked (per GPU, the shares of every worker using it must sum to
   <= 1) and every node group's interpreter is checked on its node, before anything is
   created.
3. The GPUs the plan uses are reserved with one placement group per node, one bundle of
   one GPU each, pinned to the node (a lost node then takes only its own workers along:
   the other groups, and the workers in them, are untouched). Ray decides which physical
   GPUs of a node the bundles
   get: where the group holds a whole node that is any bijection, so the plan's ids are
   kept; elsewhere the plan's ids on that node are mapped, in order, onto the GPUs Ray
   reserved (learned by the foundation's probe), and every worker's visibility list uses
   the physical ids really held.
4. Each GPU worker sits in the bundle of its first GPU with a fractional request and an
   explicit visibility list; node and hardware workers get hard node affinity; robot
   workers get their hardware's config in ``PLACEMENT_HARDWARE_CONFIG`` (JSON, from
   core's ``Plan.env``).
5. All workers start at once with the worker environment (docs/concepts/worker-environment.md); rank
   0 of each component reserves ``MASTER_PORT`` in its own process (bound and held) and reports it;
   the other ranks learn it before their ``__init__`` runs. Rank 0 releases it only at hand-over
   (``WorkerGroup.hand_over_master_port()`` or, in the worker,
   ``placement_ray.hand_over_master_port()``).
"""

from __future__ import annotations

import logging
import os
from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any

from placement_core import (
    HARDWARE_CONFIG_ENV,
    HARDWARE_TYPE_ENV,
    RANK_ENV_VARS,
    VISIBILITY_ENV_VARS,
    ClusterConfig,
    Headroom,
    MemorySpec,
    Move,
    Placement,
    Plan,
    busy_accelerators,
    inventory_for,
    plan,
    plan_from_assignments,
    shared_ranks,
)

from ._accelerators import check_live_types, managed_by_ray, node_resource, refuse_fractions
from ._allocate import Worker, check_interpreters, release
from ._cluster import Cluster
from ._colocation import SHARE_QUANTUM, GpuShare, check_shares, default_share, validate_share
from ._detach import forget_launch, launch_manifest, refuse_taken, save_launch
from ._failure import HealthReport, check_health
from ._held_view import plan_view
from ._leases import launch_shared
from ._memory_live import MemoryInUse, memory_in_use
from ._notice import warn
from ._placement_groups import OrderedPlacementGroup
from ._recover import RecoveryReport, recover
from ._request import (
    WorkerOptions,
    placement_kind,
    worker_request,
)
from ._reservation import Reservation, map_gpus
from ._standby import Standbys, spare_requests, warm_standbys
from ._startup import Started, start_workers
from ._worker import COMPONENT_ENV, MASTER_PORT_BLOCK
from ._worker_group import WorkerGroup
from .errors import ArgumentError, BusyAcceleratorError, NodeLostError, PlacementRayError

__all__ = [
    "COMPONENT_ENV",
    "HARDWARE_CONFIG_ENV",
    "HARDWARE_TYPE_ENV",
    "Launch",
    "default_shares",
    "launch",
    "map_gpus",
]

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class _Pending:
    component: str
    placement: Placement
    kind: str  # "gpu", "hardware" or "node"
    share: float

    @property
    def name(self) -> str:
        return f"{self.component} rank {self.placement.rank}"


def _live_plan(
    source: Plan | ClusterConfig | Mapping[str, Any] | str | os.PathLike[str],
    cluster: Cluster,
    colocate: Iterable[Iterable[str]],
) -> Plan:
    if not isinstance(source, Plan):
        live = plan(source, cluster.inventory, colocate=colocate)
        if live.config.inventory:  # the config declares its nodes' accelerators
            check_live_types(inventory_for(live.config), cluster.inventory, _used_nodes(live))
        return live
    check_live_types(source.inventory, cluster.inventory, _used_nodes(source))
    live_ids = [n.node_id for n in cluster.nodes]
    planned_ids = [n.node_id for n in source.inventory.nodes]
    if planned_ids == live_ids or (
        source.config.node_order == "nvlink_domain" and sorted(planned_ids) == sorted(live_ids)
    ):
        return source  # the live nodes, maybe numbered by NVLink domain
    if source.assigned:
        raise ArgumentError(
            "plan: it was built from assignments for another inventory (node ids "
            f"{[n.node_id for n in source.inventory.nodes]}, live {live_ids}); build it "
            "again with plan_from_assignments(..., cluster.inventory)"
        )
    live = plan(source.config, cluster.inventory, colocate=colocate)
    for name, placements in source.components.items():
        again = live.components.get(name, ())
        for old, new in zip(placements, again, strict=False):
            if (old.node_rank, old.hardware_ranks) != (new.node_rank, new.hardware_ranks):
                raise ArgumentError(
                    f"plan: it was made for another inventory; on this cluster {name} rank "
                    f"{old.rank} would run on node {new.node_rank} resources "
                    f"{list(new.hardware_ranks)}, not node {old.node_rank} "
                    f"{list(old.hardware_ranks)}; pass the config instead"
                )
        if len(again) != len(placements):
            raise ArgumentError(
                f"plan: it was made for another inventory; {name} has {len(again)} "
                f"processes on this cluster, {len(placements)} in the plan"
            )
    return live


def _used_nodes(the_plan: Plan) -> set[int]:
    """Node ranks where the plan places processes on accelerators."""
    return {
        p.node_rank
        for placements in the_plan.components.values()
        for p in placements
        if p.accelerator_type is not None
    }


def _per_component(
    name: str, value: Any, components: Sequence[str], default: Any
) -> dict[str, Any]:
    if value is None:
        return dict.fromkeys(components, default)
    if isinstance(value, Mapping):
        unknown = sorted(set(value) - set(components))
        if unknown:
            raise ArgumentError(
                f"{name}: unknown component(s) {unknown}; the plan has {list(components)}"
            )
        return {c: value.get(c, default) for c in components}
    return dict.fromkeys(components, value)


def default_shares(the_plan: Plan, gpu_share: Any = None) -> dict[str, float]:
    """Each component's GPU share: given, or an even split of what its GPUs have free.

    Every GPU of every worker counts. A component without an explicit share gets, on each
    GPU it uses, an even split of what the explicit shares there leave free among the
    workers without one, and keeps the smallest such split over its GPUs. With no
    explicit shares that is 1 / the most workers on one of its GPUs (RLinf's
    time-shared colocation, ``actor: all`` with ``rollout: 0-1``: 0.5 each), and every
    GPU's sum stays <= 1.

    Raises:
        ArgumentError: an unknown component or a share outside ``(0, 1]``.
    """
    pending = _pending(the_plan, gpu_share)
    return {w.component: w.share for w in pending}


def _gpus(p: Placement) -> list[tuple[int, int]]:
    return [(p.node_rank, g) for g in p.hardware_ranks] if placement_kind(p) == "gpu" else []


def _pending(the_plan: Plan, gpu_share: Any) -> list[_Pending]:
    components = list(the_plan.components)
    given = _per_component("gpu_share", gpu_share, components, None)
    explicit = {
        c: validate_share(f"gpu_share[{c!r}]", v) for c, v in given.items() if v is not None
    }
    taken: dict[tuple[int, int], float] = defaultdict(float)
    splitters: dict[tuple[int, int], int] = defaultdict(int)
    for component, placements in the_plan.components.items():
        for p in placements:
            for key in _gpus(p):
                if component in explicit:
                    taken[key] += explicit[component]
                else:
                    splitters[key] += 1
    out: list[_Pending] = []
    for component, placements in the_plan.components.items():
        share = explicit.get(component)
        if share is None:
            split = [
                default_share(splitters[key], 1.0 - taken[key])
                for p in placements
                for key in _gpus(p)
            ]
            # Nothing free: the smallest share, so check_shares names the overflow.
            share = max(min(split, default=1.0), SHARE_QUANTUM)
        out.extend(_Pending(component, p, placement_kind(p), share) for p in placements)
    return out


def _reserve(
    cluster: Cluster,
    workers: Sequence[_Pending],
    spare_nodes: Sequence[int],
    *,
    cpus_per_bundle: float,
    timeout_s: float | None,
    name: str,
    lifetime: str | None,
) -> Reservation:
    """The job's reservation: a group per used node, a bundle per planned GPU on it, and
    a group per spare (see ``Reservation.reserve``); all or none."""
    refuse_fractions(  # before any group exists
        (w.name, cluster.node(w.placement.node_rank), w.share) for w in workers if w.kind == "gpu"
    )
    keys = sorted(
        {
            (w.placement.node_rank, g)
            for w in workers
            if w.kind == "gpu"
            for g in w.placement.hardware_ranks
        }
    )
    per_node: dict[int, int] = defaultdict(int)
    for node, _ in keys:
        per_node[node] += 1
    return Reservation.reserve(
        cluster,
        per_node,
        spare_nodes,
        planned=keys,
        cpus_per_bundle=cpus_per_bundle,
        timeout_s=timeout_s,
        name=name,
        lifetime=lifetime,
    )


def _refuse_busy(the_plan: Plan) -> None:
    busy = busy_accelerators(the_plan.inventory, the_plan.components)
    if busy:
        lines = "\n".join(f"  {b.describe()}" for b in busy)
        raise BusyAcceleratorError(
            f"{len(busy)} planned GPU(s) already run other processes:\n{lines}\n"
            "free them, plan around them, or pass allow_busy=True",
            busy=[(b.node_rank, b.index, [p.pid for p in b.processes]) for b in busy],
        )


def _port_blocks(value: Any, components: Sequence[str]) -> dict[str, dict[str, tuple[int, bool]]]:
    given = _per_component("port_blocks", value, components, None)
    out: dict[str, dict[str, tuple[int, bool]]] = {}
    for component, blocks in given.items():
        clean: dict[str, tuple[int, bool]] = {}
        for name, spec in dict(blocks or {}).items():
            count = spec if isinstance(spec, int) else None
            if count is None or isinstance(count, bool) or count < 1 or name == MASTER_PORT_BLOCK:
                raise ArgumentError(
                    f"port_blocks[{component!r}][{name!r}]: expected a block name other than "
                    f"{MASTER_PORT_BLOCK!r} and a port count >= 1, got {spec!r}"
                )
            clean[name] = (count, count > 1)
        out[component] = clean
    return out


class Launch:
    """A launched plan: its workers per component, their placement groups, their reports.

    Use it as a context manager, or call :meth:`shutdown`.

    Attributes:
        plan: The live plan that was launched.
        cluster: The job's cluster view, its nodes numbered as the plan numbers them
            (by NVLink domain where the config's ``cluster.node_order`` asks).
        worker_groups: Component name -> its ``WorkerGroup``, in plan order.
        on_node_loss: ``"raise"`` or ``"recover"`` (see :func:`launch`).
        name: The launch's name (``launch(..., name=...)``), or None.
        detached: Whether its actors and placement groups outlive the driver.
        recoveries: The reports of the recoveries done so far, oldest first.
        standbys: The warm spares' standby workers not adopted yet (empty without
            ``warm_spares``).
        reservation: Every placement group the job holds (``placement_groups``,
            ``spare_groups`` and ``gpu_map`` are its views); removed by :meth:`shutdown`.
    """

    def __init__(
        self,
        the_plan: Plan,
        cluster: Cluster,
        placement_groups: Mapping[int, OrderedPlacementGroup],
        worker_groups: Mapping[str, WorkerGroup],
        gpu_map: Mapping[tuple[int, int], int],
        *,
        spare_groups: Mapping[int, OrderedPlacementGroup] | None = None,
        on_node_loss: str = "raise",
        name: str | None = None,
        detached: bool = False,
        standbys: Standbys | None = None,
        reservation: Reservation | None = None,
    ) -> None:
        self.plan = the_plan
        self.cluster = cluster
        if reservation is None:
            reservation = Reservation(
                cluster, placement_groups, spare_groups or {}, gpu_map=gpu_map
            )
        self.reservation = reservation
        self.worker_groups = dict(worker_groups)
        self.on_node_loss = _check_on_node_loss(on_node_loss)
        self.name = name
        self.detached = detached
        self.recoveries: list[RecoveryReport] = []
        self.standbys = standbys if standbys is not None else Standbys()
        self._closed = False
        if self.on_node_loss == "recover":
            for group in self.worker_groups.values():
                group.on_node_loss = self._recover_after

    @property
    def placement_groups(self) -> dict[int, OrderedPlacementGroup]:
        """Node rank -> the placement group holding the plan's GPUs on that node (one per
        node, so a lost node takes only its own workers along); the reservation's."""
        return self.reservation.groups

    @property
    def spare_groups(self) -> dict[int, OrderedPlacementGroup]:
        """Spare node rank -> the placement group reserving it (every accelerator of the
        node), until a recovery takes it over; the reservation's."""
        return self.reservation.spares

    @property
    def gpu_map(self) -> dict[tuple[int, int], int]:
        """``(node rank, plan GPU id) -> physical GPU id`` actually held; the reservation's."""
        return self.reservation.gpu_map

    def placement_group(self, node_rank: int) -> OrderedPlacementGroup:
        """The placement group holding the plan's GPUs on node ``node_rank``.

        Raises:
            ArgumentError: the plan uses no GPU on that node.
        """
        try:
            return self.placement_groups[node_rank]
        except (KeyError, TypeError):
            raise ArgumentError(
                f"node_rank: the launch holds GPUs on nodes {sorted(self.placement_groups)}, "
                f"got {node_rank!r}"
            ) from None

    def __getitem__(self, component: str) -> WorkerGroup:
        try:
            return self.worker_groups[component]
        except KeyError:
            raise ArgumentError(
                f"no component {component!r}; launched: {list(self.worker_groups)}"
            ) from None

    def __iter__(self) -> Iterator[WorkerGroup]:
        return iter(self.worker_groups.values())

    def shared_with(self, component: str, owner: str) -> tuple[tuple[int, ...], ...]:
        """Per worker of ``component``, the ranks of ``owner`` that use one of its GPUs.

        GPUs are matched by UUID where the inventory knows it, else by (node, physical id).
        """
        held = plan_from_assignments(
            {
                "owner": [(w.node_rank, w.gpu_ids) for w in self[owner].workers],
                "user": [(w.node_rank, w.gpu_ids) for w in self[component].workers],
            },
            self.cluster.inventory,
        )
        return shared_ranks(held.components["owner"], held.components["user"], held.inventory)

    def verify(self) -> list[str]:
        """Compare what every worker reported with its placement; one line per mismatch."""
        problems = []
        for group in self.worker_groups.values():
            for worker, report in zip(group.workers, group.reports, strict=True):
                problems.extend(_compare(worker, report, group))
        return problems

    # ------------------------------------------------------------------ node loss
    def recover(self, *, timeout_s: float | None = 120.0) -> RecoveryReport:
        """Re-create the workers of lost nodes on spare nodes; survivors stay as they are.

        The lost nodes are the job's nodes (used or spare) Ray no longer lists alive, as
        ``check_health()`` or a call's ``NodeLostError`` reports them. Core's ``replan``
        chooses the spares (what ``placement plan --lose`` shows); each lost worker is
        issued again from its request on the spare, in the spare's reserved placement
        group: the same class, constructor arguments and environment (``RANK``,
        ``LOCAL_RANK``, ``WORLD_SIZE``, visibility, group env), its ports reserved and
        held anew there. Where a component's rank 0 moved, the new rank 0 holds a new
        ``MASTER_PORT`` and every survivor of the component gets the new
        ``MASTER_ADDR``/``MASTER_PORT`` in its ``os.environ`` (its
        ``placement_env_changed(env)`` is called if its class defines one). Components
        with a moved rank must form their process groups again: the report lists them.
        With no lost node it returns an empty report. A shared job launched with
        ``recover_onto_free=True`` whose lost node has no compatible spare moves onto a
        free node of the cluster instead, leased first (``RecoveryReport.onto_free``).

        Args:
            timeout_s: Limit for the new workers to start (and, separately, to run
                their ``__init__``).

        Returns:
            Which ranks moved, from which node to which spare, and the seconds taken.

        Raises:
            NoSpareNodeError: a lost node has no compatible spare left; nothing changed.
            WorkerStartError / WorkerStartTimeoutError: a re-created worker did not start.
            WorkerCallError: a survivor could not be told its new master address.
        """
        self._check_open()
        return recover(self, timeout_s=timeout_s)

    def check_health(self, *, grace_s: float = 5.0) -> HealthReport:
        """Check the nodes the job uses; with ``on_node_loss="recover"``, recover a loss.

        Placement groups left ``RESCHEDULING`` are removed after ``grace_s`` (see
        :func:`check_health`).

        Returns:
            The health report (after recovery, ``dead_nodes`` still names the lost
            nodes; ``recoveries[-1]`` says where their ranks went).

        Raises:
            NodeLostError: a used node is lost and ``on_node_loss`` is ``"raise"``.
            NoSpareNodeError: with ``on_node_loss="recover"``, no spare can take over.
        """
        self._check_open()
        occupants = [o for group in self.worker_groups.values() for o in group.occupants()]
        groups = list(self.reservation.all_groups)
        report = check_health(
            self.cluster,
            occupants,
            groups,
            grace_s=grace_s,
            raise_on_loss=self.on_node_loss == "raise",
            nodes={o.node_rank for o in occupants},
        )
        if self.on_node_loss == "recover" and report.dead_nodes:
            self.recover()
        return report

    def _recover_after(self, error: NodeLostError) -> NodeLostError:
        """A call found a lost node: recover, and return the call's error naming it."""
        try:
            report = self.recover()
        except PlacementRayError as failed:
            logger.error("recovery after a node loss failed: %s", failed)
            return NodeLostError(
                f"{error.message}\nrecovery failed: {failed}",
                dead_nodes=error.dead_nodes,
                affected=error.affected,
            )
        return NodeLostError(
            f"{error.message}\n{report.describe()}\n(the call was not retried)",
            dead_nodes=error.dead_nodes,
            affected=error.affected,
            recovery=report,
        )

    def _drop_nodes(self, lost: Iterable[int]) -> None:
        """Remove the lost nodes' placement groups (used or spare) and their workers."""
        ranks = set(lost)
        self.standbys.stop(ranks, cluster=self.cluster)
        self.reservation.drop(ranks)
        dead = [w for g in self.worker_groups.values() for w in g.workers if w.node_rank in ranks]
        release(dead, self.cluster.shares)

    def _adopt(
        self,
        new_plan: Plan,
        moves: Sequence[Move],
        started: Started,
        master: Mapping[str, tuple[str, int | None]],
    ) -> None:
        """Take the re-created workers in, the spares' groups as used groups."""
        self.reservation.take_spares(move.spare for move in moves)
        by_component: dict[str, dict[int, tuple[Worker, Mapping[str, Any]]]] = defaultdict(dict)
        for worker, report in zip(started.workers, started.reports, strict=True):
            by_component[worker.component][worker.rank] = (worker, report)
        for component, moved in by_component.items():
            group = self.worker_groups[component]
            addr, port = master.get(component, (group.master_addr, group.master_port))
            group._replace(moved, master_addr=addr, master_port=port)
        self.plan = new_plan

    def _recovered(self, report: RecoveryReport) -> None:
        self.recoveries.append(report)
        warn(logger, f"node loss: {report.describe()}")
        if self.detached and self.name is not None:
            save_launch(self)

    def memory_report(
        self,
        memory: Mapping[str, Any] | MemorySpec,
        *,
        headroom: Headroom | None = None,
        timeout_s: float = 120.0,
    ) -> MemoryInUse:
        """The plan's memory estimate beside each GPU's memory in use now.

        See docs/concepts/will-it-fit.md. Every node of the plan takes a fresh snapshot.

        Args:
            memory: The job's ``memory:`` section (a mapping as in the YAML).
            headroom: A margin kept free on every GPU (``placement_core.parse_headroom``).
            timeout_s: Limit for the nodes' snapshots.

        Returns:
            Per GPU: capacity, the estimate of its busiest phase, and the bytes in use.
        """
        self._check_open()
        return memory_in_use(
            self.plan, memory, self.gpu_map, headroom=headroom, timeout_s=timeout_s
        )

    def plan_view(self, view: str = "map") -> str:
        """The plan as core's ``map``, ``svg`` or ``html`` view; with ``share_cluster``,
        the GPUs other jobs hold on the job's nodes greyed out with their names.

        Raises:
            ArgumentError: an unknown view.
        """
        return plan_view(self, view)

    def manifest(self) -> dict[str, Any]:
        """The job's rank map as JSON-ready data, current after every recovery.

        Returns:
            ``{"name", "job", "namespace", "cluster_id", "lost_nodes", "spares",
            "placement_groups", "moves", "recovery_notes", "components"}``; ``moves``
            holds one ``actor 8-15: node 1 -> node 3`` line per moved component and
            nothing else, ``recovery_notes`` the rest of the recoveries' reports
            (re-created engines, re-announced master addresses); ``components`` maps each
            component to one entry per rank, in rank order: ``rank``, ``node_rank``,
            ``node_id``, ``gpu_ids`` (physical), ``gpu_uuids`` (None where unknown),
            ``ports`` (block -> ports it held), ``actor_name`` (None when anonymous),
            ``master_addr`` and ``master_port``.
        """
        return launch_manifest(self)

    def _check_open(self) -> None:
        if self._closed:
            raise ArgumentError("the launch was shut down")

    def shutdown(self) -> None:
        """Kill every worker and remove the placement groups (spares too); idempotent.

        A detached launch's record is removed as well: ``attach`` no longer finds it.
        """
        if self._closed:
            return
        self._closed = True
        for group in self.worker_groups.values():
            group.kill()
        self.standbys.stop(cluster=self.cluster)
        self.reservation.release()
        if self.detached and self.name is not None:
            forget_launch(self)

    def __enter__(self) -> Launch:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.shutdown()


_ON_NODE_LOSS = ("raise", "recover")


def _check_on_node_loss(value: object) -> str:
    if value not in _ON_NODE_LOSS:
        raise ArgumentError(f"on_node_loss: expected one of {list(_ON_NODE_LOSS)}, got {value!r}")
    return str(value)


def _compare(worker: Worker, report: Mapping[str, Any], group: WorkerGroup) -> list[str]:
    who = worker.describe()
    env = report.get("env", {})
    out = []
    if report.get("node_id") != worker.node_id:
        out.append(f"{who}: runs on node {report.get('node_id')}, expected {worker.node_id}")
    for key in (*sorted(RANK_ENV_VARS), *sorted({v.env_var for v in VISIBILITY_ENV_VARS.values()})):
        expected = worker.env.get(key)
        if key == "MASTER_PORT" and group.master_port is not None:
            expected = str(group.master_port)
        if expected is not None and env.get(key) != expected:
            out.append(f"{who}: {key}={env.get(key)!r}, expected {expected!r}")
    resource = node_resource(group.cluster.node(worker.node_rank))
    if worker.bundle_index is not None and worker.gpu_ids and managed_by_ray(resource):
        ray_ids = tuple(report.get("ray_gpu_ids", ()))
        if ray_ids != (worker.gpu_ids[0],):
            out.append(
                f"{who}: Ray assigned GPU {list(ray_ids)}, expected its first GPU "
                f"{worker.gpu_ids[0]}"
            )
    return out


def _check_sharing(share_cluster: object, recover_onto_free: object) -> None:
    _check_flag("share_cluster", share_cluster)
    _check_flag("recover_onto_free", recover_onto_free)
    if recover_onto_free and not share_cluster:
        raise ArgumentError(
            "recover_onto_free: free capacity is leased from the shared cluster's ledger; "
            "it needs share_cluster=True"
        )


def launch(
    config_or_plan: Plan | ClusterConfig | Mapping[str, Any] | str | os.PathLike[str],
    actors: Mapping[str, Any],
    cluster: Cluster | None = None,
    *,
    args: Mapping[str, Sequence[Any]] | None = None,
    kwargs: Mapping[str, Mapping[str, Any]] | None = None,
    gpu_share: float | Mapping[str, float] | None = None,
    num_cpus: float | Mapping[str, float] = 0,
    cpus_per_bundle: float = 0,
    port_blocks: Mapping[str, Mapping[str, int]] | None = None,
    master_port: bool = True,
    colocate: Iterable[Iterable[str]] = (),
    timeout_s: float | None = 120.0,
    pg_timeout_s: float | None = 60.0,
    bind_cpus: bool = False,
    allow_busy: bool = False,
    on_node_loss: str = "raise",
    name: str | None = None,
    detached: bool = False,
    warm_spares: bool = False,
    share_cluster: bool = False,
    priority: int = 0,
    queue_timeout_s: float | None = 600.0,
    recover_onto_free: bool = False,
) -> Launch:
    """Start one actor per placement of a plan, on the planned nodes and GPUs.

    Args:
        config_or_plan: A cluster config (path, YAML text, mapping, loaded) or a plan:
            one from core's ``plan`` (re-planned on the live inventory, must come out the
            same) or any strategy's output through core's ``plan_from_assignments`` made
            with ``cluster.inventory`` (launched as it is).
        actors: Component name -> actor class, for every component of the plan.
        cluster: The job's cluster view (default: ``Cluster()``).
        args: Component -> constructor arguments (the same for every rank; each worker
            knows its rank from ``RANK``).
        kwargs: Component -> constructor keyword arguments.
        gpu_share: Fractional GPU share of each GPU worker on each of its GPUs, one number
            or per component. Default: see :func:`default_shares` (colocated components
            split each GPU evenly).
        num_cpus: CPUs each actor asks for (one number or per component).
        cpus_per_bundle: CPUs reserved in each GPU bundle.
        port_blocks: Component -> ``{block name: port count}`` every worker of it reserves
            and holds on its node (blocks of more than one port are consecutive).
        master_port: Rank 0 of each component holds a ``MASTER_PORT``.
        colocate: Groups of components allowed to share GPUs (see core's ``plan``).
        timeout_s: Limit for the workers to start (and, separately, to run ``__init__``).
        pg_timeout_s: Limit for the placement groups (one per node) to be placed.
        bind_cpus: Bind every worker whose placement knows its CPUs (node snapshots with
            CPU affinity) to them (``os.sched_setaffinity``, every thread) before its
            ``__init__``; the CPUs are in ``PLACEMENT_CPU_AFFINITY`` either way.
        allow_busy: Start workers on GPUs that the node snapshots show running other
            processes; without it such a plan is refused before anything is reserved.
        on_node_loss: ``"raise"`` (default): a call or health check that finds a lost
            node raises ``NodeLostError``. ``"recover"``: it first runs
            :meth:`Launch.recover` (the lost ranks start again on spares), logs the
            report and raises ``NodeLostError`` with it in ``recovery`` (the failed call
            is not retried); ``Launch.check_health()`` recovers and returns.
        name: Name the launch: its actors are named ``<name>/<component>/<rank>`` and its
            placement groups ``<name>/node-<rank>`` (``spare-<rank>``) in the job's Ray
            namespace.
        detached: Keep the actors and placement groups after the driver exits (Ray's
            detached lifetime; needs ``name``); :func:`attach` rebuilds the launch in a
            new driver of the same namespace. Only :meth:`Launch.shutdown` ends them.
        warm_spares: Start, on every spare node, a standby for each worker of each node
            it can replace (the same class, interpreter, node-group env, GPUs and share;
            ``__init__`` not run), so that :meth:`Launch.recover` adopts started
            processes instead of starting new ones. They cost the spare's memory for
            the processes (and whatever importing the actor classes' modules takes).
        share_cluster: Share the Ray cluster with other jobs (docs/guides/sharing-a-cluster.md):
            plan on the accelerators no other job or Ray work holds (nodes renumbered
            among those with enough free), lease them all at once in the cluster's
            ledger (the job's name is the cluster's ``job``), queue when they are not
            free; :meth:`Launch.shutdown` (or the driver's death) ends the lease.
        priority: With ``share_cluster``: queue order (higher first, then arrival), >= 0.
        queue_timeout_s: With ``share_cluster``: the longest wait in the queue (None:
            forever); then ``QueueTimeoutError`` names who holds what.
        recover_onto_free: With ``share_cluster``: a recovery whose lost node has no
            compatible spare may move its ranks onto a node of the cluster that no
            lease and no other Ray work holds (the lost node's accelerators free there),
            leased for the job first (all or none); the report names the node.

    Every spare node of the plan (``cluster.spare_nodes``) is reserved whole in a
    placement group of its own, pinned to it, so no other job takes it.

    Returns:
        The launch: ``launch["actor"]`` is the actor component's ``WorkerGroup``.

    Raises:
        ArgumentError: a missing or unknown component class, bad shares or options
            (``on_node_loss``, ``name``, ``detached`` without ``name``, a name already
            taken by a detached launch).
        BusyAcceleratorError: planned GPUs already run other processes (names the node,
            GPU, pids and memory of each) and ``allow_busy`` is False.
        OversubscribedGPUError: the shares on some GPU add up to more than 1.
        InterpreterError: a node group's interpreter cannot run on its node.
        InfeasiblePlacementGroupError / PlacementGroupTimeoutError: the GPUs cannot be
            reserved.
        WorkerStartTimeoutError: workers did not start in time (named, with the cause).
        WorkerStartError: workers died starting, or their ``__init__`` raised (named).
        ConfigError: (placement-core) the config is invalid.
        InventoryError: (placement-core) the live cluster has another number of nodes
            than the config declares.
        PlacementSyntaxError / PlacementRuleError: (placement-core) a rule does not
            parse or cannot be placed on the live cluster.
    """
    _check_sharing(share_cluster, recover_onto_free)
    if share_cluster:  # several jobs on one cluster: lease, plan on what is free (_leases)
        return launch_shared(launch, dict(locals()))
    on_node_loss = _check_on_node_loss(on_node_loss)
    _check_name(name, detached)
    _check_flag("warm_spares", warm_spares)
    if cluster is None:
        cluster = Cluster()
    if detached and name is not None:
        refuse_taken(cluster, name)
    the_plan = _live_plan(config_or_plan, cluster, colocate)
    # From here on node ranks are the plan's (cluster.node_order: nvlink_domain renumbers).
    cluster = cluster._numbered_as(the_plan.inventory)
    if not allow_busy:
        _refuse_busy(the_plan)
    components = list(the_plan.components)
    _check_actors(actors, components)
    pending = _pending(the_plan, gpu_share)
    options = _component_options(
        actors,
        {w.component: w.share for w in pending},
        {"args": args, "kwargs": kwargs, "num_cpus": num_cpus, "port_blocks": port_blocks},
        master_port=master_port,
        bind_cpus=bind_cpus,
        actor_prefix=None if name is None else f"{name}/",
        detached=detached,
    )
    for warning in the_plan.warnings:
        logger.warning("%s", warning)
    check_shares(
        GpuShare(w.name, node, gpu, w.share) for w in pending for node, gpu in _gpus(w.placement)
    )
    check_interpreters(cluster, _interpreters(the_plan))
    reservation = _reserve(
        cluster,
        pending,
        the_plan.config.spare_nodes,
        cpus_per_bundle=cpus_per_bundle,
        timeout_s=pg_timeout_s,
        name=name or "",
        lifetime="detached" if detached else None,
    )
    requests = [
        worker_request(
            the_plan, w.component, w.placement, options[w.component], reservation.seat(w.placement)
        )
        for w in pending
    ]
    started = start_workers(
        requests, cluster=cluster, timeout_s=timeout_s, cleanup=reservation.release
    )
    standbys = None
    if warm_spares:
        standbys = warm_standbys(
            spare_requests(the_plan.spares().replaces, started.workers, reservation.spares),
            cluster=cluster,
            spare_groups=reservation.spares,
            name=name,
            timeout_s=timeout_s,
        )
    job = Launch(
        the_plan,
        cluster,
        reservation.groups,
        _worker_groups(the_plan, cluster, started),
        reservation.gpu_map,
        spare_groups=reservation.spares,
        on_node_loss=on_node_loss,
        name=name,
        detached=detached,
        standbys=standbys,
        reservation=reservation,
    )
    if detached and name is not None:
        save_launch(job)
    return job


def _check_flag(name: str, value: object) -> None:
    if not isinstance(value, bool):
        raise ArgumentError(f"{name}: expected True or False, got {value!r}")


def _check_name(name: object, detached: object) -> None:
    if name is not None and (not isinstance(name, str) or not name or "/" in name):
        raise ArgumentError(f"name: expected a non-empty str without '/', got {name!r}")
    if not isinstance(detached, bool):
        raise ArgumentError(f"detached: expected True or False, got {detached!r}")
    if detached and name is None:
        raise ArgumentError("detached: a detached launch needs a name (name=...) to attach to")


def _check_actors(actors: Mapping[str, Any], components: Sequence[str]) -> None:
    if not isinstance(actors, Mapping):
        raise ArgumentError(f"actors: expected a mapping of component -> class, got {actors!r}")
    missing = [c for c in components if c not in actors]
    unknown = sorted(set(actors) - set(components))
    if missing or unknown:
        raise ArgumentError(
            f"actors: expected a class for each component {list(components)}; "
            + (f"missing {missing}" if missing else "")
            + ("; " if missing and unknown else "")
            + (f"unknown {unknown}" if unknown else "")
        )


def _component_options(
    actors: Mapping[str, Any],
    shares: Mapping[str, float],
    given: Mapping[str, Any],
    *,
    master_port: bool,
    bind_cpus: bool,
    actor_prefix: str | None = None,
    detached: bool = False,
) -> dict[str, WorkerOptions]:
    """Each component's ``WorkerOptions``.

    ``shares`` has every component of the plan; ``given`` holds ``launch``'s
    per-component arguments (``args``, ``kwargs``, ``num_cpus``, ``port_blocks``).
    """
    components = list(shares)
    all_args = _per_component("args", given["args"], components, ())
    all_kwargs = _per_component("kwargs", given["kwargs"], components, {})
    cpus = _per_component("num_cpus", given["num_cpus"], components, 0)
    blocks = _port_blocks(given["port_blocks"], components)
    return {
        c: WorkerOptions(
            actors[c],
            args=tuple(all_args[c]),
            kwargs=dict(all_kwargs[c] or {}),
            master_port=master_port,
            gpu_share=shares.get(c),
            num_cpus=cpus[c],
            port_blocks=blocks[c],
            bind_cpus=bind_cpus,
            actor_prefix=actor_prefix,
            detached=detached,
        )
        for c in components
    }


def _interpreters(the_plan: Plan) -> set[tuple[int, str]]:
    """``(node rank, interpreter)`` of every placement whose node group names one."""
    return {
        (p.node_rank, path)
        for component, placements in the_plan.components.items()
        for p in placements
        if (path := the_plan.interpreter(component, p.rank)) is not None
    }


def _worker_groups(the_plan: Plan, cluster: Cluster, started: Started) -> dict[str, WorkerGroup]:
    """Component -> its ``WorkerGroup``, in plan order."""
    by_component: dict[str, list[tuple[Worker, dict[str, Any]]]] = defaultdict(list)
    for worker, report in zip(started.workers, started.reports, strict=True):
        by_component[worker.component].append((worker, report))
    return {
        c: WorkerGroup(
            c,
            [w for w, _ in by_component[c]],
            cluster=cluster,
            reports=[r for _, r in by_component[c]],
            master_addr=the_plan.master_addr(c),
            master_port=started.master_ports[c],
        )
        for c in the_plan.components
    }
