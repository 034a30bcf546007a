"""Which spare takes over each lost node: by profile, then by NVLink domain.

See docs/guides/node-loss.md and docs/concepts/nvlink-domains.md#spares-by-domain.

Lost nodes are taken in rank order. A spare can take a lost node over when their
profiles are equal (:mod:`placement_core._spares`) and, for a rule with ``topology:
nvlink``, the spare links each moved process's accelerators over NVLink. Among those,
the spare is, in this order:

1. ``same domain``: the lowest-ranked free spare in the lost node's NVLink domain;
2. ``keeps groups``: else the lowest in the one domain that holds the rest of every
   ``nvlink_group`` the lost node's processes belong to;
3. ``other domain``: else the lowest-ranked free spare, a healthy one before one in a
   degraded domain; the groups that now span two domains are named in a warning (or an
   error with ``cluster.nvlink_on_loss: refuse``).

Each profile keeps its spares in per-domain queues and two rank-ordered queues (healthy,
degraded) with a shared "taken" set: each spare is passed over at most once per queue,
so choosing for L lost nodes among S spares costs about L + S, plus the size of the
``nvlink_group`` groups the lost nodes belong to.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from ._errors import NoSpareError
from ._fabric_plan import FabricHealth
from ._inventory import Node
from ._nvlink import domain_key
from ._plan import Plan
from ._ranks import format_rank_list
from ._records import Placement
from ._spares import Profile, node_profiles
from ._topology import worst_label
from ._topology_plan import TopologySolver, is_nvlink

__all__ = ["Choice", "SpareChooser", "spanning_problem"]

Why = Literal["same domain", "keeps groups", "other domain"]
_GROUPS_SHOWN = 4


@dataclass(frozen=True, slots=True)
class Choice:
    """The spare chosen for one lost node, and why that one.

    Attributes:
        spare: The spare's rank.
        why: ``same domain``, ``keeps groups`` or ``other domain``.
        spanning: ``component ranks`` of each ``nvlink_group`` group that now spans
            domains (only for ``other domain``).
    """

    spare: int
    why: Why
    spanning: tuple[str, ...] = ()


@dataclass(slots=True)
class _Queue:
    ranks: list[int]
    at: int = 0

    def first(self, taken: set[int], fits: _Fits) -> int | None:
        """The lowest spare not taken that fits; passes taken spares for good."""
        while self.at < len(self.ranks) and self.ranks[self.at] in taken:
            self.at += 1
        for i in range(self.at, len(self.ranks)):
            rank = self.ranks[i]
            if rank not in taken and fits(rank):
                return rank
        return None


class _Fits:
    """Whether a spare links the moved processes' accelerators as their rules ask."""

    def __init__(
        self, solver: Callable[[], TopologySolver], groups: Sequence[tuple[int, ...]]
    ) -> None:
        self.solver = solver
        self.groups = groups

    def __call__(self, spare: int) -> bool:
        if not self.groups:
            return True
        links = self.solver().links(spare)
        if links is None or not links.labels:
            return False
        return all(is_nvlink(worst_label(g, links.labels)) for g in self.groups)


@dataclass(slots=True)
class _Pool:
    by_domain: dict[str | int, _Queue] = field(default_factory=dict)
    healthy: _Queue = field(default_factory=lambda: _Queue([]))
    degraded: _Queue = field(default_factory=lambda: _Queue([]))


def _pools(
    free: Sequence[int],
    profiles: Mapping[int, Profile],
    nodes: Sequence[Node],
    degraded: Mapping[str | int, object],
) -> dict[Profile, _Pool]:
    """Per profile, its free spares in per-domain and healthy/degraded queues, in the
    order of ``free``."""
    # node_profiles gives equal profiles as one object: look them up by identity rather
    # than hash and compare a profile's fields once per spare.
    by_id: dict[int, _Pool] = {}
    pools: dict[Profile, _Pool] = {}
    for rank in free:
        profile = profiles[rank]
        pool = by_id.get(id(profile))
        if pool is None:
            pool = by_id[id(profile)] = pools.setdefault(profile, _Pool())
        domain = nodes[rank].nvlink_domain
        key: str | int = rank if domain is None else domain  # domain_key, inlined
        queue = pool.by_domain.get(key)
        if queue is None:
            queue = pool.by_domain[key] = _Queue([])
        queue.ranks.append(rank)
        (pool.degraded if key in degraded else pool.healthy).ranks.append(rank)
    return pools


class SpareChooser:
    """Chooses spares for lost nodes of one plan, one lost node at a time."""

    def __init__(
        self, plan: Plan, free: Sequence[int], lost: frozenset[int], health: FabricHealth
    ) -> None:
        self.plan = plan
        self.nodes = plan.inventory.nodes
        self.lost = lost
        self.taken: set[int] = set()
        self.moved: dict[int, int] = {}
        self._solver: TopologySolver | None = None
        self.rules = plan.config.components()
        self.profiles: dict[int, Profile] = node_profiles(
            plan.config, plan.inventory, [*free, *lost]
        )
        self.pools = _pools(free, self.profiles, self.nodes, health.domains)
        self.counters: dict[tuple[str, int], Counter[str | int]] = {}

    def choose(self, lost: int, held: Mapping[str, Sequence[int]]) -> Choice | None:
        """The spare for ``lost``, whose processes are ``held`` (component -> ranks);
        None when no compatible spare is left."""
        pool = self.pools.get(self.profiles[lost])
        if pool is None:
            return None
        fits = _Fits(self._topology, self._nvlink_groups(held))
        touched = self._touched(held)
        mates = {key for counter in touched.values() for key in counter}
        own = domain_key(self.nodes[lost])
        choice: Choice | None = None
        queue = pool.by_domain.get(own)
        spare = None if queue is None else queue.first(self.taken, fits)
        if spare is not None:
            choice = Choice(spare, "same domain")
        elif len(mates) == 1 and (queue := pool.by_domain.get(next(iter(mates)))) is not None:
            spare = queue.first(self.taken, fits)
            choice = None if spare is None else Choice(spare, "keeps groups")
        if choice is None:
            spare = pool.healthy.first(self.taken, fits)
            if spare is None:
                spare = pool.degraded.first(self.taken, fits)
            if spare is None:
                return None
            choice = Choice(spare, "other domain")
        self.taken.add(choice.spare)
        self.moved[lost] = choice.spare
        spanning = self._record(choice.spare, held, touched)
        return Choice(choice.spare, choice.why, spanning) if spanning else choice

    def _topology(self) -> TopologySolver:
        # Made on first need: only a ``topology: nvlink`` rule asks for links.
        if self._solver is None:
            self._solver = TopologySolver(self.plan.inventory)
        return self._solver

    def _nvlink_groups(self, held: Mapping[str, Sequence[int]]) -> list[tuple[int, ...]]:
        """The accelerator groups a spare must join over NVLink (``topology: nvlink``)."""
        out: list[tuple[int, ...]] = []
        for name, ranks in held.items():
            rule = self.rules.get(name)
            if rule is None or rule.topology != "nvlink" or self.plan.assigned:
                continue
            placements = self.plan.components[name]
            out += [
                placements[r].hardware_ranks
                for r in ranks
                if placements[r].hardware_type is None and len(placements[r].hardware_ranks) > 1
            ]
        return sorted(set(out))

    def _touched(
        self, held: Mapping[str, Sequence[int]]
    ) -> dict[tuple[str, int], Counter[str | int]]:
        """Per ``nvlink_group`` group the held ranks belong to, the domains of its other
        members (where they run now; members on lost nodes not yet moved left out)."""
        out: dict[tuple[str, int], Counter[str | int]] = {}
        for name, ranks in held.items():
            rule = self.rules.get(name)
            if rule is None or rule.nvlink_group is None:
                continue
            placements = self.plan.components[name]
            size = len(placements) if rule.nvlink_group == "all" else rule.nvlink_group
            if size <= 1:
                continue
            for k in dict.fromkeys(r // size for r in ranks):
                counter = self.counters.get((name, k))
                if counter is None:
                    # Index by index: slicing the columnar records would build them all.
                    members: Iterable[Placement] = (
                        placements
                        if size >= len(placements)
                        else map(placements.__getitem__, range(k * size, (k + 1) * size))
                    )
                    counter = self.counters[(name, k)] = self._count(members)
                out[(name, k)] = counter
        return out

    def _count(self, members: Iterable[Placement]) -> Counter[str | int]:
        counter: Counter[str | int] = Counter()
        last = -1
        for p in members:
            if p.node_rank == last:
                continue  # a group's members on one node count once
            last = p.node_rank
            if p.node_rank in self.lost:
                if p.node_rank not in self.moved:
                    continue
                counter[domain_key(self.nodes[self.moved[p.node_rank]])] += 1
            else:
                counter[domain_key(self.nodes[p.node_rank])] += 1
        return counter

    def _record(
        self,
        spare: int,
        held: Mapping[str, Sequence[int]],
        touched: Mapping[tuple[str, int], Counter[str | int]],
    ) -> tuple[str, ...]:
        """Count the moved members in the spare's domain; the groups now spanning."""
        key = domain_key(self.nodes[spare])
        spanning: list[str] = []
        for (name, k), counter in touched.items():
            counter[key] += 1
            if len(counter) > 1:
                rule = self.rules[name]
                size = (
                    len(self.plan.components[name])
                    if rule.nvlink_group == "all"
                    else int(rule.nvlink_group)  # type: ignore[arg-type]
                )
                spanning.append(f"{name} {format_rank_list(range(k * size, (k + 1) * size))}")
        return tuple(spanning)


def spanning_problem(spanning: Mapping[int, Choice], *, refuse: bool) -> str | None:
    """The warning naming the groups a replan leaves across domains; None when none.

    Raises:
        NoSpareError: ``refuse`` (``cluster.nvlink_on_loss: refuse``) and some group
            spans domains: no spare in the right domain is left for those lost nodes.
    """
    if not spanning:
        return None
    groups = [g for choice in spanning.values() for g in choice.spanning]
    shown = ", ".join(groups[:_GROUPS_SHOWN])
    if len(groups) > _GROUPS_SHOWN:
        shown += f" and {len(groups) - _GROUPS_SHOWN} more"
    moves = ", ".join(
        f"node {lost} -> spare {c.spare}" for lost, c in list(spanning.items())[:_GROUPS_SHOWN]
    )
    text = (
        f"no spare in the right NVLink domain was left ({moves}): nvlink_group "
        f"{'groups' if len(groups) > 1 else 'group'} {shown} now span two or more domains "
        "(slower, or failing where the group needs multi-node NVLink)"
    )
    if refuse:
        need = "a free spare in the NVLink domain of the rest of its nvlink_group groups"
        raise NoSpareError(
            text + "; cluster.nvlink_on_loss: refuse forbids it (declare spares per domain: "
            "spare_nodes: {rack-a: 1, ...})",
            lost=tuple(sorted(spanning)),
            needs=dict.fromkeys(sorted(spanning), need),
            path="cluster.nvlink_on_loss",
        )
    return text
