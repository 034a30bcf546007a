"""Property tests of replan: for any plan and any lost set that the spares can cover,
every rank keeps its environment except node-derived values, only spares are used, and
no accelerator is shared beyond what the plan shared."""

from __future__ import annotations

import dataclasses
from collections import Counter
from typing import Any

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from placement_core import Inventory, NoSpareError, PlacementRuleError, Plan, plan, replan
from placement_core._inventory import Accelerator, Node

SETTINGS = settings(max_examples=120, deadline=None)
NODE_DERIVED = {"MASTER_ADDR"}


@st.composite
def segments(draw: st.DrawFn, size: int) -> str:
    """A well-formed rule over resources ``0..size-1`` (processes may share or span)."""
    first = draw(st.integers(0, size - 1))
    last = draw(st.integers(first, size - 1))
    count = last - first + 1
    mode = draw(st.sampled_from(["one", "span", "share"]))
    if mode == "one":
        return f"{first}-{last}"
    if mode == "span":
        per = draw(st.sampled_from([d for d in range(1, count + 1) if count % d == 0]))
        return f"{first}-{last}:0-{count // per - 1}"
    return f"{first}-{last}:0-{count * draw(st.integers(2, 3)) - 1}"


@st.composite
def cases(draw: st.DrawFn) -> tuple[Plan, list[int]]:
    """A plan on used nodes ``0..u-1`` with spares after them, and a lost set."""
    used = draw(st.integers(1, 4))
    spares = draw(st.integers(1, 4))
    per_node = draw(st.integers(1, 4))
    models = draw(
        st.lists(st.sampled_from(["A800", "H100"]), min_size=used + spares, max_size=used + spares)
    )
    nodes = tuple(
        Node(
            r,
            f"node-{r}",
            ip=f"10.0.0.{r}",
            accelerators=tuple(Accelerator(i, model=m) for i in range(per_node)),
        )
        for r, m in enumerate(models)
    )
    rules: dict[str, Any] = {
        f"c{i}": draw(segments(used * per_node)) for i in range(draw(st.integers(1, 3)))
    }
    if draw(st.booleans()):
        rules["env"] = {"node_group": "node", "placement": f"0-{used - 1}:0-{used * 2 - 1}"}
    document = {
        "cluster": {
            "num_nodes": used + spares,
            "spare_nodes": f"{used}-{used + spares - 1}",
            "component_placement": rules,
        }
    }
    try:
        before = plan(document, Inventory(nodes))
    except PlacementRuleError:
        assume(False)
        raise
    lost = draw(st.lists(st.integers(0, used + spares - 1), min_size=1, unique=True))
    return before, lost


def covered(before: Plan, lost: list[int]) -> bool:
    """Whether the spares not lost can take over every lost node that holds processes."""
    spares = set(before.config.spare_nodes)
    held = {p.node_rank for ps in before.components.values() for p in ps} & set(lost)
    kind = {n.rank: n.accelerators[0].model for n in before.inventory.nodes}
    needed = Counter(kind[r] for r in held)
    free = Counter(kind[r] for r in spares - set(lost))
    return all(free[model] >= count for model, count in needed.items())


@SETTINGS
@given(cases())
def test_enough_spares_always_replan_and_too_few_never_do(case: tuple[Plan, list[int]]) -> None:
    before, lost = case
    if covered(before, lost):
        replan(before, lost)
        return
    with pytest.raises(NoSpareError) as caught:
        replan(before, lost)
    assert set(caught.value.lost) <= set(lost)


@SETTINGS
@given(cases())
def test_every_rank_keeps_its_environment_but_node_derived_values(
    case: tuple[Plan, list[int]],
) -> None:
    before, lost = case
    assume(covered(before, lost))
    after = replan(before, lost).plan
    for name, placements in before.components.items():
        master = after.inventory.nodes[after.components[name][0].node_rank].address
        for p in placements:
            old, new = before.env(name, p.rank), after.env(name, p.rank)
            assert {k: v for k, v in old.items() if k not in NODE_DERIVED} == {
                k: v for k, v in new.items() if k not in NODE_DERIVED
            }
            assert new["MASTER_ADDR"] == master


@SETTINGS
@given(cases())
def test_records_change_only_their_node(case: tuple[Plan, list[int]]) -> None:
    before, lost = case
    assume(covered(before, lost))
    after = replan(before, lost).plan
    for name, placements in before.components.items():
        for old, new in zip(placements, after.components[name], strict=True):
            if old.node_rank in lost:
                assert new == dataclasses.replace(
                    old, node_rank=new.node_rank, node_id=f"node-{new.node_rank}"
                )
            else:
                assert new == old


@SETTINGS
@given(cases())
def test_only_free_spares_are_used_one_per_lost_node(case: tuple[Plan, list[int]]) -> None:
    before, lost = case
    assume(covered(before, lost))
    result = replan(before, lost)
    free = set(before.config.spare_nodes) - set(lost)
    targets = [move.spare for move in result.moves]
    assert set(targets) <= free
    assert len(set(targets)) == len(targets)
    assert sorted(m.lost for m in result.moves) == [m.lost for m in result.moves]
    for move in result.moves:
        kinds = {before.inventory.nodes[r].accelerators[0].model for r in (move.lost, move.spare)}
        assert len(kinds) == 1
    used = {p.node_rank for ps in result.plan.components.values() for p in ps}
    assert not used & set(lost)
    assert set(result.plan.config.spare_nodes) == free - set(targets)


@SETTINGS
@given(cases())
def test_no_accelerator_is_shared_beyond_the_plan(case: tuple[Plan, list[int]]) -> None:
    before, lost = case
    assume(covered(before, lost))
    result = replan(before, lost)
    origin = {move.spare: move.lost for move in result.moves}
    old, new = before.occupancy(), result.plan.occupancy()
    for node in new.nodes:
        source = origin.get(node.node_rank, node.node_rank)
        if source in lost and source == node.node_rank:
            assert not any(node.accelerators.values())
            assert not node.node
            continue
        assert dict(node.accelerators) == dict(old[source].accelerators)
        assert node.node == old[source].node


@SETTINGS
@given(cases(), st.randoms())
def test_replan_does_not_depend_on_the_order_of_the_lost_nodes(
    case: tuple[Plan, list[int]], random: Any
) -> None:
    before, lost = case
    assume(covered(before, lost))
    shuffled = list(lost)
    random.shuffle(shuffled)
    assert replan(before, lost).plan.components == replan(before, shuffled).plan.components
