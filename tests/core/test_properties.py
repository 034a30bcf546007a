"""Property tests: invariants of rule resolution, strategies and placement records."""

from __future__ import annotations

import itertools
from collections import defaultdict

from hypothesis import given, settings
from hypothesis import strategies as st

from placement_core import plan
from placement_core._config import load_config
from placement_core._errors import PlacementRuleError
from placement_core._inventory import Accelerator, Inventory, Node
from placement_core._ranks import format_rank_list, parse_rank_list
from placement_core._records import Placement, build_placements
from placement_core._rules import parse_rule, resolve_rule
from placement_core._sources import inventory_for
from placement_core._spaces import build_space
from placement_core._strategies import flexible, packed

SETTINGS = settings(max_examples=80, deadline=None)


@st.composite
def inventories(draw: st.DrawFn, min_gpus: int = 0) -> Inventory:
    counts = draw(st.lists(st.integers(min_gpus, 8), min_size=1, max_size=5))
    if not any(counts):
        counts[0] = 1
    nodes = [
        Node(rank, f"node-{rank}", accelerators=tuple(Accelerator(i) for i in range(count)))
        for rank, count in enumerate(counts)
    ]
    return Inventory(tuple(nodes))


@st.composite
def rules(draw: st.DrawFn, size: int) -> tuple[str, int]:
    """A well-formed rule over resources ``0..size-1`` and its process count."""
    cuts = sorted(draw(st.sets(st.integers(1, size - 1), max_size=4))) if size > 1 else []
    bounds = [0, *cuts, size]
    segments: list[str] = []
    processes = 0
    for lo, hi in itertools.pairwise(bounds):
        if draw(st.booleans()):
            continue  # leave a gap: not every resource must be used
        count = hi - lo
        divisors = [d for d in range(1, count + 1) if count % d == 0]
        mode = draw(st.sampled_from(["implicit", "span", "share"]))
        if mode == "implicit":
            segments.append(f"{lo}-{hi - 1}")
            processes += count
            continue
        n = draw(st.sampled_from(divisors)) if mode == "span" else count * draw(st.integers(1, 3))
        segments.append(f"{lo}-{hi - 1}:{processes}-{processes + n - 1}")
        processes += n
    if not segments:
        segments.append(f"0-{size - 1}")
        processes = size
    return ",".join(segments), processes


def global_ids(inventory: Inventory, p: Placement) -> list[int]:
    offsets, total = {}, 0
    for node in inventory.nodes:
        offsets[node.rank] = total
        total += len(node.accelerators)
    return [offsets[p.node_rank] + i for i in p.hardware_ranks]


def check_local_ranks(placements: tuple[Placement, ...]) -> None:
    by_node: dict[int, list[Placement]] = defaultdict(list)
    for p in placements:
        by_node[p.node_rank].append(p)
    order = list(dict.fromkeys(p.node_rank for p in placements))
    for node_rank, group in by_node.items():
        assert [p.local_rank for p in group] == list(range(len(group)))
        assert {p.local_world_size for p in group} == {len(group)}
        assert {p.placement_node_rank for p in group} == {order.index(node_rank)}


@SETTINGS
@given(st.data())
def test_every_process_is_placed_once_with_ranks_0_to_n(data: st.DataObject) -> None:
    inventory = data.draw(inventories())
    space = build_space(inventory, None, "cluster")
    text, processes = data.draw(rules(space.size))
    try:
        placements = build_placements(resolve_rule(parse_rule(text), space), inventory)
    except PlacementRuleError as error:
        reason = error.reason
        assert "would span nodes" in reason
        return
    assert [p.rank for p in placements] == list(range(processes))
    for p in placements:
        assert p.hardware_ranks
        assert set(p.hardware_ranks) <= set(inventory.nodes[p.node_rank].accelerator_ids)
        assert p.visible_accelerators == p.hardware_ranks
        assert isinstance(p.local_accelerator_rank, int)
    check_local_ranks(placements)


@SETTINGS
@given(
    inventories(),
    st.integers(0, 40),
    st.integers(1, 40),
    st.integers(1, 4),
    st.integers(1, 4),
)
def test_packed_covers_its_range_exactly_and_never_spans_nodes(
    inventory: Inventory, start: int, length: int, per_process: int, stride: int
) -> None:
    end = start + length * per_process * stride - 1
    size = sum(len(n.accelerators) for n in inventory.nodes)
    try:
        placements = packed(start, end, per_process, stride).place(inventory)
    except PlacementRuleError as error:
        reason = error.reason
        assert "would span nodes" in reason or "out of range" in reason
        return
    assert end < size
    used = sorted(g for p in placements for g in global_ids(inventory, p))
    assert used == list(range(start, end + 1))
    for p in placements:
        assert len(p.hardware_ranks) == per_process
        ids = p.hardware_ranks
        assert all(b - a == stride for a, b in itertools.pairwise(ids))
    check_local_ranks(placements)


@SETTINGS
@given(inventories(min_gpus=1), st.randoms(use_true_random=False), st.data())
def test_results_do_not_depend_on_the_order_nodes_are_listed(
    inventory: Inventory, random: object, data: st.DataObject
) -> None:
    space = build_space(inventory, None, "cluster")
    text, _ = data.draw(rules(space.size))
    shuffled_nodes = list(inventory.nodes)
    random.shuffle(shuffled_nodes)  # type: ignore[attr-defined]
    shuffled = Inventory(tuple(shuffled_nodes))

    def run(inv: Inventory) -> object:
        try:
            return build_placements(
                resolve_rule(parse_rule(text), build_space(inv, None, None)), inv
            )
        except PlacementRuleError as error:
            return str(error)

    assert run(inventory) == run(shuffled)


@SETTINGS
@given(st.lists(st.integers(1, 8), min_size=1, max_size=6), st.randoms(use_true_random=False))
def test_plans_do_not_depend_on_the_order_snapshots_are_given_when_ranks_are_set(
    counts: list[int], random: object
) -> None:
    snapshots = [
        {
            "schema": 1,
            "hostname": f"host-{rank}",
            "ip": "10.0.0.1",  # shared IPs must not decide the order either
            "cpus": 8,
            "node_rank": rank,
            "accelerators": [{"index": i, "type": "nvidia"} for i in range(count)],
        }
        for rank, count in enumerate(counts)
    ]
    shuffled = snapshots[:]
    random.shuffle(shuffled)  # type: ignore[attr-defined]
    raw = {
        "cluster": {
            "num_nodes": len(counts),
            "component_placement": {
                "actor": "all",
                "agent": {"node_group": "node", "placement": "all"},
            },
        }
    }
    config = load_config(raw)

    def components(given: list[dict[str, object]]) -> object:
        return plan(config, inventory_for(config, snapshots=given)).components

    assert components(snapshots) == components(shuffled)


@SETTINGS
@given(
    st.lists(
        st.lists(st.integers(0, 15), min_size=1, max_size=3, unique=True), min_size=1, max_size=6
    )
)
def test_flexible_ranks_by_first_resource_and_keeps_the_callers_lists(
    lists: list[list[int]],
) -> None:
    inventory = Inventory.uniform(2, 8)
    before = [list(x) for x in lists]
    try:
        placements = flexible(lists).place(inventory)
    except PlacementRuleError as error:
        reason = error.reason
        assert "would span nodes" in reason
        return
    assert lists == before
    firsts = [min(g for g in global_ids(inventory, p)) for p in placements]
    assert firsts == sorted(firsts)
    assert sorted(sorted(global_ids(inventory, p)) for p in placements) == sorted(
        sorted(x) for x in lists
    )


@SETTINGS
@given(st.lists(st.integers(0, 200), min_size=1, max_size=30))
def test_rank_lists_round_trip_through_their_text(ranks: list[int]) -> None:
    text = format_rank_list(sorted(set(ranks)))
    assert parse_rank_list(text) == tuple(sorted(set(ranks)))
    assert format_rank_list(parse_rank_list(text)) == text


@st.composite
def rank_list_texts(draw: st.DrawFn) -> str:
    """Well-formed rank-list text as people write it: unordered, overlapping, spaced."""
    items: list[str] = []
    for _ in range(draw(st.integers(1, 8))):
        lo = draw(st.integers(0, 100))
        hi = draw(st.integers(lo, lo + 20))
        item = draw(st.sampled_from([str(lo), f"{lo}-{hi}", f" {lo} - {hi} ", ""]))
        items.append(item)
    if not any(item.strip() for item in items):
        items.append(str(draw(st.integers(0, 100))))
    return ",".join(items)


@SETTINGS
@given(rank_list_texts())
def test_rank_list_text_survives_parse_render_parse(text: str) -> None:
    ranks = parse_rank_list(text)
    assert parse_rank_list(format_rank_list(ranks)) == ranks


@SETTINGS
@given(st.integers(1, 6), st.integers(1, 4), st.integers(1, 50))
def test_node_space_shares_processes_evenly(nodes: int, used: int, per_node: int) -> None:
    used = min(used, nodes)
    inventory = Inventory.uniform(nodes, 2)
    text = f"0-{used - 1}:0-{used * per_node - 1}"
    placements = build_placements(
        resolve_rule(parse_rule(text), build_space(inventory, None, "node")), inventory
    )
    assert [p.node_rank for p in placements] == [r // per_node for r in range(used * per_node)]
    check_local_ranks(placements)


@SETTINGS
@given(st.integers(1, 4), st.integers(1, 8), st.data())
def test_one_gpu_processes_sharing_accelerators_never_warn(
    nodes: int, gpus: int, data: st.DataObject
) -> None:
    size = nodes * gpus
    a_lo = data.draw(st.integers(0, size - 1))
    a_hi = data.draw(st.integers(a_lo, size - 1))
    b_lo = data.draw(st.integers(0, size - 1))
    b_hi = data.draw(st.integers(b_lo, size - 1))
    raw = {
        "cluster": {
            "num_nodes": nodes,
            "component_placement": {
                "a": {"node_group": "node", "placement": f"0-{nodes - 1}"},
                "b": f"{a_lo}-{a_hi}",
                "c": f"{b_lo}-{b_hi}",
            },
        }
    }
    result = plan(raw, Inventory.uniform(nodes, gpus))
    assert [p.rank for p in result.components["b"]] == list(range(a_hi - a_lo + 1))
    overlap = max(0, min(a_hi, b_hi) - max(a_lo, b_lo) + 1)
    assert result.warnings == ()
    assert result.sharing()["b"] == (("c",) if overlap else ())
    occupancy = result.occupancy()
    shared = sum(len(node.shared_accelerators) for node in occupancy.nodes)
    assert shared == overlap
