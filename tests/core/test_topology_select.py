"""The topology selection algorithm: link order, best grouping, CPU splits."""

from __future__ import annotations

from itertools import combinations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from placement_core._topology import best_groups, group_score, link_score, split_cpus, worst_label

LEVELS = ["SYS", "NODE", "PHB", "PXB", "PIX", "NV1", "NV2", "NV4", "NV18"]


def test_link_order_is_nvlink_count_then_pcie_path() -> None:
    ordered = ["?", "SYS", "NODE", "PHB", "PXB", "PIX", "NV1", "NV4", "NV18"]
    assert [link_score(label) for label in ordered] == sorted(
        link_score(label) for label in ordered
    )
    assert len({link_score(label) for label in ordered}) == len(ordered)


@pytest.mark.parametrize("label", [None, "?", "NV0", "NVx", "bogus"])
def test_unknown_labels_score_below_sys(label: str | None) -> None:
    assert link_score(label) < link_score("SYS")


def test_worst_label_is_none_for_one_member_or_an_unknown_pair() -> None:
    labels = {(0, 1): "PIX"}
    assert worst_label((0,), labels) is None
    assert worst_label((0, 1, 2), labels) is None
    assert worst_label((0, 1), labels) == "PIX"


def test_nvlink_bridges_win_over_index_order() -> None:
    labels = dict.fromkeys(combinations(range(4), 2), "SYS")
    labels |= {(0, 1): "PIX", (2, 3): "PIX", (0, 2): "NV4", (1, 3): "NV4"}
    scores = {pair: link_score(label) for pair, label in labels.items()}
    assert best_groups(range(4), 2, scores) == ((0, 2), (1, 3))


def test_uniform_links_keep_consecutive_blocks() -> None:
    scores = {pair: link_score("NV18") for pair in combinations(range(8), 2)}
    assert best_groups(range(8), 4, scores) == ((0, 1, 2, 3), (4, 5, 6, 7))


def test_ties_prefer_lowest_indices() -> None:
    # 0 reaches 2 and 3 equally well; the lower partner wins.
    scores = {pair: link_score("SYS") for pair in combinations(range(4), 2)}
    scores |= {(0, 2): link_score("PIX"), (0, 3): link_score("PIX")}
    scores |= {(1, 3): link_score("PIX"), (1, 2): link_score("PIX")}
    assert best_groups(range(4), 2, scores) == ((0, 2), (1, 3))


def test_the_worst_group_comes_first_then_the_next() -> None:
    # {0,1} NV4 + {2,3} SYS loses to {0,2} PIX + {1,3} PIX: the worst link counts first.
    scores = {pair: link_score("SYS") for pair in combinations(range(4), 2)}
    scores |= {(0, 1): link_score("NV4"), (0, 2): link_score("PIX"), (1, 3): link_score("PIX")}
    assert best_groups(range(4), 2, scores) == ((0, 2), (1, 3))


def test_members_not_divisible_by_the_group_size_is_an_error() -> None:
    with pytest.raises(ValueError, match="5 members do not split into groups of 2"):
        best_groups(range(5), 2, {})


def _partitions(members: tuple[int, ...], size: int) -> list[list[tuple[int, ...]]]:
    if not members:
        return [[]]
    first, rest = members[0], members[1:]
    out = []
    for partners in combinations(rest, size - 1):
        left = tuple(m for m in rest if m not in partners)
        out += [[(first, *partners), *tail] for tail in _partitions(left, size)]
    return out


@st.composite
def topologies(draw: st.DrawFn) -> tuple[int, int, dict[tuple[int, int], int]]:
    size = draw(st.sampled_from([2, 3, 4]))
    count = size * draw(st.integers(1, 8 // size if size < 4 else 2))
    labels = draw(st.lists(st.sampled_from(LEVELS), min_size=1, max_size=4, unique=True))
    scores = {
        pair: link_score(draw(st.sampled_from(labels))) for pair in combinations(range(count), 2)
    }
    return count, size, scores


@settings(max_examples=150, deadline=None)
@given(topologies())
def test_best_groups_is_the_exact_optimum(
    topology: tuple[int, int, dict[tuple[int, int], int]],
) -> None:
    count, size, scores = topology
    chosen = best_groups(range(count), size, scores)
    assert sorted(i for g in chosen for i in g) == list(range(count))
    assert all(len(g) == size and list(g) == sorted(g) for g in chosen)

    def key(groups: object) -> tuple[int, ...]:
        return tuple(sorted(group_score(g, scores) for g in groups))  # type: ignore[attr-defined]

    every = _partitions(tuple(range(count)), size)
    best = max(key(p) for p in every)
    assert key(chosen) == best
    # Ties: the first optimal partition in index order.
    assert list(chosen) == next(p for p in every if key(p) == best)


@settings(max_examples=100, deadline=None)
@given(topologies())
def test_best_groups_never_worse_than_index_order(
    topology: tuple[int, int, dict[tuple[int, int], int]],
) -> None:
    count, size, scores = topology
    blocks = [tuple(range(i, i + size)) for i in range(0, count, size)]
    chosen = best_groups(range(count), size, scores)
    assert min(group_score(g, scores) for g in chosen) >= min(
        group_score(g, scores) for g in blocks
    )


def test_larger_nodes_are_grouped_greedily_and_never_worse() -> None:
    count = 24
    scores = {(a, b): link_score("SYS") for a, b in combinations(range(count), 2)}
    for a in range(0, count, 2):
        scores[(a, a + 1)] = link_score("NODE")
    for a in range(count // 2):
        scores[(a, a + count // 2)] = link_score("NV4")
    chosen = best_groups(range(count), 2, scores)
    assert chosen == tuple((a, a + count // 2) for a in range(count // 2))


def test_cpu_split_keeps_hyperthread_siblings_together() -> None:
    cpus = [*range(24), *range(96, 120)]
    assert split_cpus(cpus, 2) == (
        (*range(12), *range(96, 108)),
        (*range(12, 24), *range(108, 120)),
    )


@given(st.sets(st.integers(0, 255), min_size=1, max_size=64), st.integers(1, 12))
def test_cpu_split_is_disjoint_and_complete_when_cpus_suffice(cpus: set[int], parts: int) -> None:
    shares = split_cpus(sorted(cpus), parts)
    assert len(shares) == parts
    if len(cpus) >= parts:
        assert all(shares)
        assert sorted(c for share in shares for c in share) == sorted(cpus)
    else:
        assert all(len(share) == 1 and share[0] in cpus for share in shares)
