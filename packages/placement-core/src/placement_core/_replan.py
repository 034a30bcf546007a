"""Takeover on paper: move the processes of lost nodes to spare nodes.

See docs/guides/node-loss.md.

:func:`replan` is pure and deterministic: the offline view (``placement plan --lose``)
and a live recovery make the same decision from the same plan. Each lost node's
processes move together to one compatible spare (:mod:`placement_core._spares`), lost
nodes in rank order, each taking a compatible spare still free, in its own NVLink domain
first (:mod:`placement_core._spare_choice`). Because compatibility is equality of node
profiles, this greedy choice finds a spare for every lost node whenever any assignment
could (a spare that cannot give a ``topology: nvlink`` process NVLink is no match).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType

from ._busy import busy_accelerators
from ._checks import nodes
from ._errors import NoSpareError, PlacementError, PlacementRuleError
from ._fabric_plan import FabricHealth, fabric_health
from ._plan import Plan
from ._ranks import format_rank_list, parse_rank_list
from ._records import Placement, Placements, node_runs
from ._scalars import is_int
from ._shown import shown
from ._spare_choice import Choice, SpareChooser, spanning_problem
from ._spares import Move, Profile, describe_profile, node_profiles
from ._topology_plan import TopologySolver

__all__ = ["Replan", "replan"]


@dataclass(frozen=True, slots=True)
class Replan:
    """The plan after losing nodes, and how processes moved.

    Attributes:
        plan: The new plan: the moved processes on their spares, every other placement
            unchanged (the same records), the used spares no longer listed in
            ``config.spare_nodes`` and ``plan.lost_nodes`` / ``plan.moves`` filled.
        before: The plan that lost the nodes.
        lost: The nodes given as lost, ascending.
        moves: One per lost node that held processes, by lost node rank.
        dropped_spares: Lost nodes that were spares: dropped, nothing moves.
        idle: Lost nodes that held no process and were not spares.
    """

    plan: Plan
    before: Plan
    lost: tuple[int, ...]
    moves: tuple[Move, ...]
    dropped_spares: tuple[int, ...]
    idle: tuple[int, ...]

    @property
    def spares_left(self) -> tuple[int, ...]:
        """The spares still free after the moves."""
        return self.plan.config.spare_nodes

    def master_moves(self) -> dict[str, tuple[int, int]]:
        """Component -> ``(old node, new node)`` of each component whose rank 0 moved.

        Those components' ``MASTER_ADDR`` is now the new node's address.
        """
        return {
            component: (move.lost, move.spare)
            for move in self.moves
            for component, ranks in move.ranks.items()
            if ranks[0] == 0
        }

    def lines(self) -> list[str]:
        """The moves as text: ``actor 8-15: node 1 -> node 16``, then dropped and idle nodes."""
        out = [line for move in self.moves for line in move.lines()]
        if self.dropped_spares:
            out.append(f"lost spare {nodes(self.dropped_spares)}: dropped")
        if self.idle:
            out.append(f"lost {nodes(self.idle)}: held no process, nothing moves")
        return out


def _lost_ranks(plan: Plan, lost: Iterable[int] | str | int) -> tuple[int, ...]:
    count = plan.inventory.num_nodes

    def wrong() -> PlacementRuleError:
        return PlacementRuleError(
            f"expected node ranks (a rank list such as '1,3-4', an int or ints), got {shown(lost)}",
            path="lost",
        )

    if isinstance(lost, bool | bytes | bytearray | memoryview | Mapping):
        raise wrong()  # bytes iterate as ints (b"1" would be node 49)
    if isinstance(lost, str | int):
        try:
            ranks: tuple[int, ...] = parse_rank_list(lost, available=range(count))
        except PlacementError as error:
            raise error.with_path("lost") from None
    else:
        try:
            ranks = tuple(sorted(set(lost)))
        except TypeError:
            raise wrong() from None
    if not ranks:
        raise PlacementRuleError("expected at least one lost node, got none", path="lost")
    bad = [r for r in ranks if not is_int(r) or not 0 <= r < count]
    if bad:
        raise PlacementRuleError(
            f"{shown(bad[0])} is not a node of the plan: node ranks are 0-{count - 1}",
            path="lost",
        )
    return ranks


def _on_lost(plan: Plan, lost: frozenset[int]) -> dict[int, dict[str, list[int]]]:
    """Per lost node that holds processes: component -> its ranks there."""
    held: dict[int, dict[str, list[int]]] = {}
    for name, placements in plan.components.items():
        # From the records' segments: a plan may hold millions of placements and lose a
        # handful of nodes.
        position = 0
        for node, count in node_runs(placements):
            if node in lost:
                ranks = held.setdefault(node, {}).setdefault(name, [])
                ranks += range(position, position + count)
            position += count
    return held


def plan_health(plan: Plan) -> FabricHealth:
    """The fabric health of the plan's inventory, decoded once per plan (``plan`` and
    ``replan`` keep it; a plan unpickled in another process decodes it again)."""
    cached: FabricHealth | None = plan._cache.get("fabric_health")
    if cached is None:
        cached = plan._cache["fabric_health"] = fabric_health(plan.inventory)
    return cached


def _choose_spares(
    plan: Plan, held: Mapping[int, Mapping[str, list[int]]], free: list[int], lost: frozenset[int]
) -> tuple[dict[int, Choice], str | None]:
    """Lost node -> its spare's choice (:mod:`placement_core._spare_choice`), and the
    warning naming groups left across domains.

    Raises:
        NoSpareError: Some lost node has no compatible spare left.
        NoSpareError: Also when a group would span domains under ``nvlink_on_loss:
            refuse``.
    """
    chooser = SpareChooser(plan, free, lost, plan_health(plan))
    chosen: dict[int, Choice] = {}
    missing: list[int] = []
    for node in sorted(held):
        choice = chooser.choose(node, held[node])
        if choice is None:
            missing.append(node)
        else:
            chosen[node] = choice
    if missing:
        profiles = node_profiles(plan.config, plan.inventory, missing)
        described: dict[Profile, str] = {}
        for node in missing:
            if profiles[node] not in described:
                described[profiles[node]] = describe_profile(profiles[node])
        needs = [(node, described[profiles[node]]) for node in missing]
        raise _no_spare(needs, free, {lost: c.spare for lost, c in chosen.items()})
    spanning = {node: c for node, c in chosen.items() if c.spanning}
    warning = spanning_problem(spanning, refuse=plan.config.nvlink_on_loss == "refuse")
    return chosen, warning


_REASONS_SHOWN = 4


def _no_spare(
    missing: list[tuple[int, str]], free: list[int], chosen: Mapping[int, int]
) -> NoSpareError:
    by_need: dict[str, list[int]] = {}
    for lost, need in missing:
        by_need.setdefault(need, []).append(lost)
    reasons = "; ".join(
        f"{nodes(ranks)} {'needs' if len(ranks) == 1 else 'need'} a spare with {need}"
        for need, ranks in list(by_need.items())[:_REASONS_SHOWN]
    )
    if len(by_need) > _REASONS_SHOWN:
        reasons += f"; and {len(by_need) - _REASONS_SHOWN} more kinds of node"
    used = set(chosen.values())
    left = [s for s in free if s not in used]
    taken = ", ".join(
        f"spare {s} takes over node {lost}" for lost, s in list(chosen.items())[:_REASONS_SHOWN]
    )
    if len(chosen) > _REASONS_SHOWN:
        taken += f" and {len(chosen) - _REASONS_SHOWN} more"
    if left:
        spares = f"the spares left ({format_rank_list(left)}) differ"
    else:
        spares = "no spare is left" if free else "the plan has no spare left"
    spares += f" ({taken})" if taken else ""
    return NoSpareError(
        f"no compatible spare for lost {nodes([m[0] for m in missing])}: {reasons}; {spares}",
        lost=tuple(m[0] for m in missing),
        needs=dict(missing),
        path="cluster.spare_nodes",
    )


def _moved(
    plan: Plan, solver: TopologySolver, placements: list[Placement], spare: int, name: str
) -> list[Placement]:
    """The placements of one component on one lost node, on the spare instead.

    Link, NUMA node and CPUs are the spare's, as its snapshot gives them.
    """
    node_id = plan.inventory.nodes[spare].node_id
    fresh = [
        dataclasses.replace(
            p, node_rank=spare, node_id=node_id, link=None, numa_node=None, cpus=None
        )
        for p in placements
    ]
    if solver.active:
        solver.annotate(
            fresh,
            numa_node=_asked_numa(plan, name, placements),
            path=f"cluster.component_placement.{name}",
            whole_nodes=all(not p.hardware_ranks for p in fresh),
        )
    return fresh


def _asked_numa(plan: Plan, name: str, placements: Sequence[Placement]) -> int | None:
    """The NUMA node the moved node- and hardware-placed processes asked for.

    From the rule when the plan comes from its rules; in a plan from an earlier
    ``replan`` (which no longer re-reads them), the NUMA node the processes were given.
    """
    if any(p.hardware_type is None and p.hardware_ranks for p in placements):
        return None  # accelerator placements: their NUMA node is their accelerators'
    if not plan.assigned:
        rule = plan.config.components().get(name)
        return None if rule is None else rule.numa_node
    if not plan.moves:
        return None  # from assignments: no rule asked
    asked = {p.numa_node for p in placements}
    return asked.pop() if len(asked) == 1 else None


def _move(
    plan: Plan, held: Mapping[int, Mapping[str, list[int]]], chosen: Mapping[int, Choice]
) -> tuple[dict[str, Sequence[Placement]], list[Move]]:
    """The components with every lost node's processes on its spare, and the moves."""
    edited: dict[str, dict[int, Placement]] = {}
    moves: list[Move] = []
    solver = TopologySolver(plan.inventory)
    domains = any(node.nvlink_domain is not None for node in plan.inventory.nodes)
    for lost_rank in sorted(held):
        spare = chosen[lost_rank].spare
        for name, moved_ranks in held[lost_rank].items():
            placements = plan.components[name]
            fresh = _moved(plan, solver, [placements[r] for r in moved_ranks], spare, name)
            edited.setdefault(name, {}).update(zip(moved_ranks, fresh, strict=True))
        moves.append(
            Move(
                lost_rank,
                spare,
                plan.inventory.nodes[lost_rank].node_id,
                plan.inventory.nodes[spare].node_id,
                MappingProxyType({k: tuple(v) for k, v in held[lost_rank].items()}),
                chosen[lost_rank].why if domains else "",
            )
        )
    components = {
        name: _replaced(placements, edited[name]) if name in edited else placements
        for name, placements in plan.components.items()
    }
    return components, moves


def _replaced(
    placements: Sequence[Placement], fresh: Mapping[int, Placement]
) -> Sequence[Placement]:
    """The placements with the moved records in; compact placements stay compact."""
    if isinstance(placements, Placements):
        return placements.with_moved(fresh)
    return tuple(fresh.get(rank, p) for rank, p in enumerate(placements))


def replan(plan: Plan, lost: Iterable[int] | str | int) -> Replan:
    """Move the processes of lost nodes to spare nodes.

    Each lost node's processes move together to one compatible spare (same
    accelerators, node groups and group environment; see :meth:`Plan.spares`; and NVLink
    between each moved process's accelerators where its rule says ``topology: nvlink``):
    lost nodes in rank order, each to the lowest-ranked compatible spare still free in
    its own NVLink domain, else in the domain that keeps its ``nvlink_group`` groups
    whole, else anywhere (a warning names the groups now spanning domains; an error with
    ``cluster.nvlink_on_loss: refuse``). The moved plan's warnings are the plan's, with
    the "already runs" warnings of busy accelerators as the new placements give them. A
    moved
    process keeps its rank, local rank, local world size, accelerator ids on its node,
    visible devices and group env; only its node and what derives from it change (node
    id, link, NUMA node and CPUs as the spare's snapshot gives them, hardware configs,
    and ``MASTER_ADDR`` of a component whose rank 0 moved). Pure and deterministic.

    >>> from placement_core import Inventory, plan, replan
    >>> p = plan({"cluster": {"num_nodes": 3, "spare_nodes": "2",
    ...     "component_placement": {"actor": "0-15"}}}, Inventory.uniform(3, 8))
    >>> r = replan(p, [1])
    >>> r.lines()
    ['actor 8-15: node 1 -> node 2']
    >>> actor = r.plan.components["actor"]
    >>> actor[7].node_rank, actor[8].node_rank, r.spares_left
    (0, 2, ())

    Args:
        plan: The plan that lost the nodes (a plan from an earlier ``replan`` works too).
        lost: The lost nodes: a rank list (``"1,3-4"``), an int or ints.

    Returns:
        The new plan and the moves; a lost spare is dropped from ``spare_nodes``.

    Raises:
        PlacementRuleError: ``lost`` is empty or names a node outside the plan.
        PlacementSyntaxError: ``lost`` is a rank list that does not parse.
        NoSpareError: A lost node has no compatible spare left (or the config declares
            none); the message names it and what a spare would need. Nothing is moved.
        NoSpareError: Also with ``cluster.nvlink_on_loss: refuse`` when no spare keeps
            a lost node's ``nvlink_group`` groups in one domain (path
            ``cluster.nvlink_on_loss``).
    """
    ranks = _lost_ranks(plan, lost)
    lost_set = frozenset(ranks)
    spares = plan.config.spare_nodes
    spare_set = frozenset(spares)
    dropped = tuple(r for r in ranks if r in spare_set)
    free = [r for r in spares if r not in lost_set]
    held = _on_lost(plan, lost_set)
    if held and not spares and not plan.moves:
        raise NoSpareError(
            f"lost {nodes(sorted(held))} held processes, but the config declares no spare "
            "nodes to move them to: add cluster.spare_nodes (a rank list, or NVLink domain "
            "-> how many of its last nodes) to plan a node loss",
            lost=tuple(sorted(held)),
            needs={},
            path="lost",
        )
    chosen, spanning = _choose_spares(plan, held, free, lost_set)
    components, moves = _move(plan, held, chosen)
    used = {choice.spare for choice in chosen.values()}
    left = tuple(r for r in free if r not in used)
    warnings = _warnings(plan, components, spanning)
    new = Plan(
        plan.config.model_copy(update={"spare_input": left}),
        plan.inventory,
        MappingProxyType(components),
        warnings,
        True,
        tuple(sorted({*plan.lost_nodes, *ranks})),
        (*plan.moves, *moves),
    )
    new._cache["fabric_health"] = plan_health(plan)  # the same inventory
    idle = tuple(r for r in ranks if r not in held and r not in spare_set)
    return Replan(new, plan, ranks, tuple(moves), dropped, idle)


def _warnings(
    plan: Plan, components: Mapping[str, Sequence[Placement]], spanning: str | None
) -> tuple[str, ...]:
    """The plan's warnings with the busy accelerators' warnings redone for the moved
    placements (a busy spare now used warns; a busy node moved off no longer does)."""
    before = busy_accelerators(plan.inventory, plan.components)
    after = busy_accelerators(plan.inventory, components)
    stale = {busy.describe() for busy in before}
    kept = [w for w in plan.warnings if w not in stale]
    kept += [busy.describe() for busy in after]
    if spanning is not None:
        kept.append(spanning)
    return tuple(kept)
