"""Spare nodes: which used node each spare can take over, and rules that must not use them.

See docs/guides/node-loss.md.

A spare (``cluster.spare_nodes``) can stand in for a node when everything a worker
there depends on is the same: the accelerators (type, model and node-local indices, so
the same count), the node groups the node belongs to, the interpreter and env vars each
of those groups gives it, and its hardware devices (type and count). That makes
"can replace" an equivalence: nodes with equal :func:`node_profile` replace each other.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from operator import attrgetter
from types import MappingProxyType

from ._checks import nodes
from ._config import ClusterConfig
from ._errors import PlacementRuleError
from ._inventory import Inventory
from ._ranks import format_rank_list
from ._spaces import ResourceSpace

__all__ = [
    "Move",
    "Profile",
    "Spares",
    "describe_profile",
    "node_profile",
    "node_profiles",
    "refuse_spares",
    "spare_cover",
    "without_spares",
]


@dataclass(frozen=True, slots=True)
class Profile:
    """What a node offers the workers placed on it; equal profiles replace each other.

    Attributes:
        accelerators: ``(index, type, model)`` of each accelerator.
        groups: Per explicit node group holding the node, in config order:
            ``(label, interpreter, sorted env_vars)``.
        hardware: ``(type, count)`` of its hardware devices, sorted.
    """

    accelerators: tuple[tuple[int, str, str | None], ...]
    groups: tuple[tuple[str, str | None, tuple[tuple[str, str], ...]], ...]
    hardware: tuple[tuple[str, int], ...]


_Described = tuple[tuple[int, str, str | None], ...]
_Groups = tuple[tuple[str, str | None, tuple[tuple[str, str], ...]], ...]
_Hardware = tuple[tuple[str, int], ...]


def node_profile(config: ClusterConfig, inventory: Inventory, node_rank: int) -> Profile:
    """The profile of one node (hardware attached to the inventory or not)."""
    return node_profiles(config, inventory, [node_rank])[node_rank]


def node_profiles(
    config: ClusterConfig, inventory: Inventory, ranks: Iterable[int]
) -> dict[int, Profile]:
    """The profiles of many nodes, in one pass over the node groups and their hardware
    (linear in the config and the nodes asked, however many devices each group has)."""
    wanted = frozenset(ranks)
    groups: dict[int, list[tuple[str, str | None, tuple[tuple[str, str], ...]]]] = {}
    hardware: dict[int, dict[str, int]] = {}
    for group in config.node_groups:
        for rank in wanted.intersection(group.node_ranks):
            interpreter, env = config.node_environment(group.label, rank)
            groups.setdefault(rank, []).append(
                (group.label, interpreter, tuple(sorted(env.items())))
            )
        if group.hardware is not None:
            kind = group.hardware.type
            for device in group.hardware.configs:
                if device.node_rank in wanted:
                    counts = hardware.setdefault(device.node_rank, {})
                    counts[kind] = counts.get(kind, 0) + 1
    # Nodes share accelerator tuples in uniform inventories: describe each tuple once.
    # Equal profiles come out as one object, so that callers grouping nodes by profile
    # (spare choice, spare cover) find them by identity instead of comparing fields.
    accelerators: dict[int, _Described] = {}
    interned: dict[_Described, _Described] = {}
    made: dict[tuple[int, _Groups, _Hardware], Profile] = {}
    out: dict[int, Profile] = {}
    nodes = inventory.nodes
    for rank in wanted:
        accs = nodes[rank].accelerators
        described = accelerators.get(id(accs))
        if described is None:
            described = tuple(map(_ACCELERATOR, accs))
            described = accelerators[id(accs)] = interned.setdefault(described, described)
        key = (
            id(described),
            tuple(groups[rank]) if rank in groups else (),
            tuple(sorted(hardware[rank].items())) if rank in hardware else (),
        )
        profile = made.get(key)
        if profile is None:
            profile = made[key] = Profile(described, key[1], key[2])
        out[rank] = profile
    return out


_ACCELERATOR = attrgetter("index", "type", "model")


def describe_profile(profile: Profile) -> str:
    """What a node must have to replace a node of this profile, in a few words.

    ``8x nvidia A800 (indices 0-7); node groups a800 (interpreter /opt/x, GLOO_SOCKET_IFNAME=eth0)``
    """
    kinds = dict.fromkeys((kind, model) for _, kind, model in profile.accelerators)
    parts = []
    if not kinds:
        parts.append("no accelerators")
    for kind, model in kinds:
        count = sum((k, m) == (kind, model) for _, k, m in profile.accelerators)
        parts.append(f"{count}x {kind}" + (f" {model}" if model else ""))
    ids = [index for index, _, _ in profile.accelerators]
    if ids and ids != list(range(len(ids))):
        parts[-1] += f" (indices {format_rank_list(sorted(ids))})"
    groups = []
    for label, interpreter, env in profile.groups:
        settings = [f"interpreter {interpreter}"] if interpreter else []
        settings += [f"{key}={value}" for key, value in env]
        groups.append(label + (f" ({', '.join(settings)})" if settings else ""))
    parts.append(f"node groups {', '.join(groups)}" if groups else "no node group")
    parts += [f"{count}x {kind}" for kind, count in profile.hardware]
    return "; ".join(parts)


@dataclass(frozen=True, slots=True)
class Spares:
    """A plan's spare nodes and the used nodes each one can take over.

    Attributes:
        replaces: Spare node rank -> the used nodes it can replace (same accelerators,
            node groups and group environment), ascending; spares ascending.
        uncovered: Used nodes that no spare can replace: losing one ends the job (a
            note, not an error).
        needs: Per uncovered node, what a spare would need to replace it.
    """

    replaces: Mapping[int, tuple[int, ...]]
    uncovered: tuple[int, ...]
    needs: Mapping[int, str]

    def __reduce__(self) -> tuple[object, ...]:
        return (Spares, (dict(self.replaces), self.uncovered, dict(self.needs)))

    def lines(self) -> list[str]:
        """``spare node 16: can replace nodes 0-15`` (spares that replace the same nodes
        share a line: ``spare nodes 16-17: each can replace nodes 0-15``), then a note per
        need."""
        # Spares of one profile share one tuple: group by identity, then by value.
        by_id: dict[int, tuple[tuple[int, ...], list[int]]] = {}
        for spare, used in self.replaces.items():
            by_id.setdefault(id(used), (used, []))[1].append(spare)
        by_used: dict[tuple[int, ...], list[int]] = {}
        for used, spares in by_id.values():
            by_used.setdefault(used, []).extend(spares)
        out = [
            f"spare {nodes(sorted(spares))}: {'each ' if len(spares) > 1 else ''}"
            + (f"can replace {nodes(used)}" if used else "can replace no used node")
            for used, spares in by_used.items()
        ]
        by_need: dict[str, list[int]] = {}
        for rank in self.uncovered:
            by_need.setdefault(self.needs[rank], []).append(rank)
        out += [
            f"note: no spare can replace {nodes(ranks)} (a spare would need {need})"
            for need, ranks in by_need.items()
        ]
        return out


def spare_cover(config: ClusterConfig, inventory: Inventory, used: Iterable[int]) -> Spares:
    """Which of the ``used`` nodes each of the config's spares can replace."""
    spares = config.spare_nodes
    if not spares:
        return Spares(MappingProxyType({}), (), MappingProxyType({}))
    used = sorted(set(used))
    profiles = node_profiles(config, inventory, [*spares, *used])
    by_profile: dict[Profile, list[int]] = {}
    for rank in spares:
        by_profile.setdefault(profiles[rank], []).append(rank)
    replaceable: dict[Profile, list[int]] = {profile: [] for profile in by_profile}
    uncovered: list[int] = []
    needs: dict[int, str] = {}
    described: dict[Profile, str] = {}
    for rank in used:
        profile = profiles[rank]
        able = replaceable.get(profile)
        if able is None:
            uncovered.append(rank)
            if profile not in described:
                described[profile] = describe_profile(profile)
            needs[rank] = described[profile]
        else:
            able.append(rank)
    replaces: dict[int, tuple[int, ...]] = {}
    for profile, ranks in by_profile.items():
        shared = tuple(replaceable[profile])
        replaces.update(dict.fromkeys(ranks, shared))
    return Spares(
        MappingProxyType(dict(sorted(replaces.items()))),
        tuple(uncovered),
        MappingProxyType(needs),
    )


def without_spares(space: ResourceSpace, spares: Iterable[int]) -> ResourceSpace:
    """The space without the spare nodes' resources, numbered on from 0 in order.

    A rule's ``all`` means every resource a component may use, so it is resolved against
    this space: the spares are left out rather than refused.
    """
    kept = [run for run in space.runs if run.node_rank not in frozenset(spares)]
    if len(kept) == len(space.runs):
        return space
    runs = []
    start = 0
    for run in kept:
        runs.append(replace(run, start=start))
        start += len(run.local_ids)
    return ResourceSpace(space.groups, runs)


def refuse_spares(
    config: ClusterConfig, space: ResourceSpace, used: Sequence[int], path: str
) -> None:
    """Refuse a rule that places processes on spare nodes.

    Args:
        config: The config (its ``spare_nodes``).
        space: The rule's resource space.
        used: The nodes the rule's processes are on.
        path: The rule's YAML path.

    Raises:
        PlacementRuleError: Some of ``used`` are spares; the message says which resource
            ranks of the space are on spares and which are not.
    """
    spares = frozenset(config.spare_nodes)
    taken = sorted(spares.intersection(used))
    if not taken:
        return
    on_spares: list[int] = []
    others: list[int] = []
    for run in space.runs:
        ranks = range(run.start, run.start + len(run.local_ids))
        (on_spares if run.node_rank in spares else others).extend(ranks)
    raise PlacementRuleError(
        f"the rule places processes on spare {nodes(taken)} (cluster.spare_nodes "
        f"{format_rank_list(config.spare_nodes)}), which no component may use: "
        f"{space.describe()} has {format_rank_list(on_spares)} on spare nodes; place on "
        f"{format_rank_list(others) or 'other nodes'} instead",
        path=path,
    )


@dataclass(frozen=True, slots=True)
class Move:
    """One lost node's processes, moved whole to a spare (see :func:`placement_core.replan`).

    Attributes:
        lost: The lost node's rank.
        spare: The rank of the spare that took its processes over.
        lost_node_id: The lost node's identity (Ray node id live, ``node-<rank>`` offline).
        spare_node_id: The spare's identity.
        ranks: Component -> the ranks that moved, ascending; config order. Each keeps its
            rank, local rank, accelerator ids and group env on the spare.
        domain: Where the spare lies, when any node has an NVLink domain: ``same domain``
            (the lost node's), ``keeps groups`` (the domain of the rest of its
            ``nvlink_group`` groups) or ``other domain``; empty otherwise.
    """

    lost: int
    spare: int
    lost_node_id: str
    spare_node_id: str
    ranks: Mapping[str, tuple[int, ...]]
    domain: str = ""

    def lines(self) -> list[str]:
        """``actor 8-15: node 1 -> node 16`` per component, ``rank 0`` moves said so, and
        the spare's domain when nodes have domains (``(spare in the same NVLink
        domain)``)."""
        where = self.where
        return [
            f"{component} {format_rank_list(ranks)}: node {self.lost} -> node {self.spare}"
            + (f" (rank 0: the master node is now node {self.spare})" if ranks[0] == 0 else "")
            + where
            for component, ranks in self.ranks.items()
        ]

    @property
    def where(self) -> str:
        """`` (spare in the same NVLink domain)`` (or ``... of the rest of its
        nvlink_group``, ``... another NVLink domain``); empty without domains."""
        return _WHERE.get(self.domain, "")

    def __reduce__(self) -> tuple[object, ...]:
        # MappingProxyType does not pickle; moves cross Ray process boundaries.
        return (
            Move,
            (
                self.lost,
                self.spare,
                self.lost_node_id,
                self.spare_node_id,
                dict(self.ranks),
                self.domain,
            ),
        )


_WHERE = {
    "same domain": " (spare in the same NVLink domain)",
    "keeps groups": " (spare in the NVLink domain of the rest of its nvlink_group)",
    "other domain": " (spare in another NVLink domain)",
}
