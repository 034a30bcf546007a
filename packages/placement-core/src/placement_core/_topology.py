"""Topology selection: link levels, the best grouping of a node's accelerators, CPU shares.

Pure functions over accelerator indices and pairwise link labels; no inventory or plan
knowledge (``_topology_plan.py`` applies them to plans).

Link labels are those of ``nvidia-smi topo -m`` as placement-native writes them:
``NV<n>`` (``n`` NVLinks, more is better), then the PCIe path from best to worst:
``X`` (one board), ``PIX`` (one PCIe switch), ``PXB`` (several switches), ``PHB`` (a host
bridge), ``NODE`` (host bridges within one NUMA node), ``SYS`` (across sockets). Anything
else (``?``, a missing pair) is unknown and scores below ``SYS``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from itertools import combinations

__all__ = [
    "PCIE_LEVELS",
    "UNKNOWN_SCORE",
    "best_groups",
    "group_score",
    "link_score",
    "split_cpus",
    "worst_label",
]

#: PCIe levels from worst to best; NVLink (``NV<n>``) beats them all.
PCIE_LEVELS = ("SYS", "NODE", "PHB", "PXB", "PIX", "X")
_PCIE_SCORE = {level: i + 1 for i, level in enumerate(PCIE_LEVELS)}
_NVLINK_BASE = 1000
#: Score of an unknown link: worse than ``SYS``.
UNKNOWN_SCORE = 0
#: Candidate groups the exact search may weigh per solve before it settles for the best
#: found so far (an 8-accelerator node needs at most a few hundred).
SEARCH_BUDGET = 20_000
#: Above this many accelerators a greedy pass replaces the exact search.
EXACT_LIMIT = 16

Pair = tuple[int, int]


def link_score(label: str | None) -> int:
    """How good a link is: higher is better, ``UNKNOWN_SCORE`` for unknown labels.

    >>> link_score("NV4") > link_score("NV2") > link_score("PIX") > link_score("SYS")
    True
    """
    if label is None:
        return UNKNOWN_SCORE
    score = _PCIE_SCORE.get(label)
    if score is not None:
        return score
    if label.startswith("NV") and label[2:].isdigit() and int(label[2:]) > 0:
        return _NVLINK_BASE + int(label[2:])
    return UNKNOWN_SCORE


def _pair(a: int, b: int) -> Pair:
    return (a, b) if a < b else (b, a)


def worst_label(group: Sequence[int], labels: Mapping[Pair, str]) -> str | None:
    """The worst pairwise link label among ``group``; None for one member or any unknown pair.

    >>> worst_label((0, 1, 2), {(0, 1): "NV4", (0, 2): "PIX", (1, 2): "NV2"})
    'PIX'
    """
    worst: str | None = None
    worst_score = -1
    for a, b in combinations(group, 2):
        label = labels.get(_pair(a, b))
        score = link_score(label)
        if score == UNKNOWN_SCORE:
            return None
        if worst is None or score < worst_score:
            worst, worst_score = label, score
    return worst


def group_score(group: Sequence[int], scores: Mapping[Pair, int]) -> int:
    """The score of a group's worst pairwise link (a large value for one member)."""
    worst = 1 << 30
    for a, b in combinations(group, 2):
        score = scores.get(_pair(a, b), UNKNOWN_SCORE)
        if score < worst:
            worst = score
    return worst


def best_groups(
    members: Sequence[int], size: int, scores: Mapping[Pair, int]
) -> tuple[tuple[int, ...], ...]:
    """Partition ``members`` into groups of ``size`` with the best worst links.

    Partitions are compared by their groups' worst-link scores sorted ascending,
    lexicographically: first the worst group is made as good as possible, then the next
    worst, and so on. Among equal partitions the one listed first in index order wins
    (groups ordered by their lowest member, each ascending), so with uniform links the
    result is the consecutive blocks ``members[0:size], members[size:2*size], ...``.

    Up to ``EXACT_LIMIT`` members the search is exact (branch and bound over partitions
    in index order) unless it weighs more than ``SEARCH_BUDGET`` candidate groups; then
    it returns the best found so far. Larger sets are grouped greedily (each group: the
    lowest free member, then the free member that keeps its worst link best). Either way
    the result is never worse than the consecutive blocks.

    Args:
        members: Distinct accelerator indices; their count must be a multiple of ``size``.
        size: Accelerators per group (>= 1).
        scores: Link score per pair ``(a, b)``, ``a < b`` (see :func:`link_score`).

    Returns:
        The groups, ordered by lowest member, each ascending.

    >>> best_groups([0, 1, 2, 3], 2, {(0, 2): 1005, (1, 3): 1005, (0, 1): 5, (2, 3): 5,
    ...                                (0, 3): 1, (1, 2): 1})
    ((0, 2), (1, 3))
    """
    ordered = tuple(sorted(members))
    if len(ordered) % size:
        raise ValueError(f"{len(ordered)} members do not split into groups of {size}")
    blocks = tuple(ordered[i : i + size] for i in range(0, len(ordered), size))
    if size == 1 or len(blocks) == 1:
        return blocks
    blocks_key = _key(blocks, scores)
    if len(ordered) > EXACT_LIMIT:
        greedy = _greedy(ordered, size, scores)
        return greedy if _key(greedy, scores) > blocks_key else blocks
    search = _Search(ordered, size, scores)
    search.best, search.best_key = blocks, blocks_key
    if blocks_key[0] < search.ceiling:  # else nothing can beat the blocks
        search.run()
    return search.best


def _key(groups: Sequence[Sequence[int]], scores: Mapping[Pair, int]) -> tuple[int, ...]:
    return tuple(sorted(group_score(g, scores) for g in groups))


def _greedy(
    members: tuple[int, ...], size: int, scores: Mapping[Pair, int]
) -> tuple[tuple[int, ...], ...]:
    free = list(members)
    groups: list[tuple[int, ...]] = []
    while free:
        group = [free.pop(0)]
        # worst link from each free member to the group so far
        reach = {m: scores.get(_pair(group[0], m), UNKNOWN_SCORE) for m in free}
        while len(group) < size:
            best = max(free, key=lambda m: (reach[m], -m))
            free.remove(best)
            group.append(best)
            for m in free:
                reach[m] = min(reach[m], scores.get(_pair(best, m), UNKNOWN_SCORE))
        groups.append(tuple(sorted(group)))
    return tuple(groups)


class _Search:
    """Branch and bound over partitions, lowest free member first, partners ascending."""

    def __init__(self, members: tuple[int, ...], size: int, scores: Mapping[Pair, int]) -> None:
        self.members = members
        self.size = size
        self.scores = scores
        self.ceiling = max(
            (scores.get(_pair(a, b), UNKNOWN_SCORE) for a, b in combinations(members, 2)),
            default=UNKNOWN_SCORE,
        )
        self.groups_total = len(members) // size
        self.best: tuple[tuple[int, ...], ...] = ()
        self.best_key: tuple[int, ...] = ()
        self.steps = 0

    def run(self) -> None:
        self._extend(self.members, [], [])

    def _bound(self, keys: list[int], free: tuple[int, ...]) -> tuple[int, ...]:
        """The best sorted key any completion of this partial partition could reach."""
        ceiling = max(
            (self.scores.get(_pair(a, b), UNKNOWN_SCORE) for a, b in combinations(free, 2)),
            default=self.ceiling,
        )
        remaining = self.groups_total - len(keys)
        return tuple(sorted([*keys, *([ceiling] * remaining)]))

    def _extend(
        self, free: tuple[int, ...], groups: list[tuple[int, ...]], keys: list[int]
    ) -> None:
        if not free:
            key = tuple(sorted(keys))
            if key > self.best_key:
                self.best, self.best_key = tuple(groups), key
            return
        if self.steps > SEARCH_BUDGET or self._bound(keys, free) <= self.best_key:
            return
        first, rest = free[0], free[1:]
        for partners in combinations(rest, self.size - 1):
            self.steps += 1
            if self.steps > SEARCH_BUDGET:
                return
            group = (first, *partners)
            score = group_score(group, self.scores)
            if score < self.best_key[0]:
                continue  # this group alone would make the worst link worse
            taken = set(partners)
            groups.append(group)
            keys.append(score)
            self._extend(tuple(m for m in rest if m not in taken), groups, keys)
            groups.pop()
            keys.pop()


def _ranges(cpus: Sequence[int]) -> Iterator[list[int]]:
    run: list[int] = []
    for cpu in cpus:
        if run and cpu != run[-1] + 1:
            yield run
            run = []
        run.append(cpu)
    if run:
        yield run


def split_cpus(cpus: Sequence[int], parts: int) -> tuple[tuple[int, ...], ...]:
    """Split a CPU set into ``parts`` disjoint shares, as even as possible.

    Each contiguous range is cut into ``parts`` slices and share ``i`` takes slice ``i`` of
    every range, so with the usual numbering (cores ``0-23``, their hyperthreads
    ``96-119``) a share keeps both threads of its cores. When a range is shorter than
    ``parts`` the sorted set is cut into consecutive slices instead; with fewer CPUs than
    parts, shares have one CPU each and repeat (no disjoint split exists).

    >>> split_cpus([0, 1, 2, 3, 8, 9, 10, 11], 2)
    ((0, 1, 8, 9), (2, 3, 10, 11))
    """
    ordered = sorted(set(cpus))
    if parts <= 1:
        return (tuple(ordered),)
    total = len(ordered)
    if total < parts:
        return tuple((ordered[i * total // parts],) for i in range(parts))
    ranges = list(_ranges(ordered))
    if all(len(r) >= parts for r in ranges):
        return tuple(
            tuple(cpu for r in ranges for cpu in r[len(r) * i // parts : len(r) * (i + 1) // parts])
            for i in range(parts)
        )
    return tuple(
        tuple(ordered[total * i // parts : total * (i + 1) // parts]) for i in range(parts)
    )
