"""The lease ledger's state machine (no Ray): all or nothing, shares, queue order, errors."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from placement_ray import JobNameTakenError, LeaseError, LedgerVersionError
from placement_ray._lease_state import (
    LEDGER_VERSION,
    LeaseBook,
    NodeCapacity,
    Request,
    Slot,
    choose_nodes,
)

NODES = [NodeCapacity(f"n{r}", r, tuple((i, f"GPU-{r}-{i}") for i in range(4))) for r in range(3)]


def book() -> LeaseBook:
    return LeaseBook(NODES)


def ask(job: str, slots: list[tuple[int, int]], priority: int = 0, share: float = 1.0) -> Request:
    need = tuple(sum(1 for n, _ in slots if n == node) for node in sorted({n for n, _ in slots}))
    chosen = tuple(Slot(f"n{n}", i, share) for n, i in slots)
    return Request(job, f"owner-{job}", priority, chosen, need, share)


def frozen(b: LeaseBook) -> str:
    return json.dumps(b.to_record(), sort_keys=True)


def test_a_lease_is_granted_whole_when_its_accelerators_are_free() -> None:
    b = book()
    assert b.acquire(ask("a", [(0, 0), (0, 1)]), now=1.0)
    assert [(s.node_id, s.accelerator) for s in b.leases["a"].slots] == [("n0", 0), ("n0", 1)]


def test_a_lease_overlapping_another_is_queued_and_takes_nothing() -> None:
    b = book()
    b.acquire(ask("a", [(0, 1)]), now=1.0)
    assert not b.acquire(ask("b", [(0, 0), (0, 1)]), now=2.0)
    assert "b" not in b.leases
    assert [w.job for w in b.queue()] == ["b"]
    assert b.free()["n0"] == [0, 2, 3]


def test_shares_of_two_jobs_on_one_accelerator_fit_up_to_one() -> None:
    b = book()
    assert b.acquire(ask("a", [(1, 0)], share=0.5), now=1.0)
    assert b.acquire(ask("b", [(1, 0)], share=0.5), now=2.0)
    assert not b.acquire(ask("c", [(1, 0)], share=0.5), now=3.0)


def test_release_lets_the_highest_priority_waiter_that_fits_go_first() -> None:
    b = book()
    b.acquire(ask("holder", [(n, i) for n in range(3) for i in range(4)]), now=0.0)
    b.acquire(ask("low", [(0, 0)], priority=0), now=1.0)
    b.acquire(ask("high", [(0, 0)], priority=5), now=2.0)
    assert [w.job for w in b.queue()] == ["high", "low"]
    b.release("holder")
    assert not b.acquire(ask("low", [(0, 0)], priority=0), now=3.0)  # high fits: it goes first
    assert b.acquire(ask("high", [(0, 0)], priority=5), now=3.0)


def test_a_small_job_fills_a_gap_no_waiter_ahead_can_use() -> None:
    b = book()
    b.acquire(ask("holder", [(n, i) for n in range(3) for i in range(3)]), now=0.0)
    b.acquire(ask("big", [(0, 0), (0, 1), (0, 2), (0, 3)], priority=9), now=1.0)
    assert b.acquire(ask("small", [(0, 3)]), now=2.0)


def test_choose_nodes_keeps_rank_order_and_skips_nodes_without_room() -> None:
    free = {"n0": [0], "n1": [0, 1, 2], "n2": [0, 1]}
    ranks = {"n0": 0, "n1": 1, "n2": 2}
    assert choose_nodes((2, 2), 1.0, free, ranks) == ["n1", "n2"]
    assert choose_nodes((3, 2), 1.0, free, ranks) == ["n1", "n2"]
    assert choose_nodes((2, 3), 1.0, free, ranks) is None


def test_confirm_moves_an_unconfirmed_lease_off_what_ray_reserved() -> None:
    b = book()
    b.acquire(ask("a", [(0, 0)]), now=1.0)
    b.acquire(ask("b", [(0, 1)]), now=1.0)
    b.confirm("b", [Slot("n0", 0)])  # Ray gave b's bundle GPU 0
    assert [s.accelerator for s in b.leases["b"].slots] == [0]
    assert [s.accelerator for s in b.leases["a"].slots] == [1]
    assert b.leases["b"].confirmed
    assert not b.leases["a"].confirmed


def test_confirm_onto_an_accelerator_guessed_foreign_drops_the_guess() -> None:
    b = book()
    b.foreign = {"n0": (2, 3)}  # Ray holds two of n0's GPUs for other work: which, it hides
    b.acquire(ask("a", [(0, 0)]), now=1.0)
    b.confirm("a", [Slot("n0", 2)])  # Ray gave a GPU 2: the other work holds another one
    assert [s.accelerator for s in b.leases["a"].slots] == [2]
    assert b.foreign == {"n0": (1, 3)}  # still two, none of them a's


def test_a_dead_owner_loses_its_lease_and_its_place_in_the_queue() -> None:
    b = book()
    b.acquire(ask("a", [(0, 0)]), now=1.0)
    b.acquire(ask("b", [(0, 0)]), now=2.0)
    assert b.reclaim({"owner-a", "owner-b"}) == ["a", "b"]
    assert b.leases == {}
    assert b.waiters == {}


def test_the_record_round_trips() -> None:
    b = book()
    b.acquire(ask("a", [(0, 0), (2, 3)], priority=2), now=1.5)
    b.acquire(ask("b", [(0, 0)]), now=2.5)
    again = LeaseBook.from_record(json.loads(json.dumps(b.to_record())))
    assert frozen(again) == frozen(b)


@pytest.mark.parametrize(
    ("request_", "match"),
    [
        (ask("a", [(7, 0)]), r"slots\[0\].node_id: unknown node 'n7'"),
        (ask("a", [(0, 9)]), r"slots\[0\].accelerator: node n0 \(rank 0\) has no accelerator 9"),
        (ask("a", [(0, 0)], priority=-1), r"priority: expected an int >= 0.*got -1"),
        (ask("a", [(0, 0)], share=1.5), r"share: expected a share in \(0, 1\], got 1.5"),
        (ask("a", [(0, 0), (0, 0)]), r"slots\[1\]: node n0 accelerator 0 is listed twice"),
        (ask("a/b", [(0, 0)]), r"job: expected a non-empty name without '/'"),
    ],
)
def test_bad_input_is_refused_by_name_and_nothing_is_lost(request_: Request, match: str) -> None:
    b = book()
    b.acquire(ask("other", [(1, 1)]), now=1.0)
    before = frozen(b)
    with pytest.raises(LeaseError, match=match):
        b.acquire(request_, now=2.0)
    assert frozen(b) == before


def test_a_name_held_by_another_live_job_is_refused() -> None:
    b = book()
    b.acquire(ask("a", [(0, 0)]), now=1.0)
    before = frozen(b)
    taken = Request("a", "someone-else", 0, (Slot("n1", 0),), (1,))
    with pytest.raises(JobNameTakenError, match=r"'a' is taken by a live job \(owner owner-a\)"):
        b.acquire(taken, now=2.0)
    assert frozen(b) == before


def test_a_record_of_a_newer_version_is_refused() -> None:
    record = {**book().to_record(), "version": LEDGER_VERSION + 1}
    with pytest.raises(LedgerVersionError, match=r"version 2, this placement-ray speaks version 1"):
        LeaseBook.from_record(record)


def test_errors_pickle() -> None:
    import pickle

    error = JobNameTakenError("taken", job="a", owner="o")
    again = pickle.loads(pickle.dumps(error))
    assert (str(again), again.job, again.owner) == ("taken", "a", "o")


# ----------------------------------------------------------------------- the model
JOB = st.fixed_dictionaries(
    {
        "priority": st.integers(0, 3),
        "need": st.lists(st.integers(1, 4), min_size=1, max_size=2).map(tuple),
        "share": st.sampled_from([0.5, 1.0]),
    }
)


def _model_free(b: LeaseBook, share: float) -> dict[str, list[int]]:
    used: dict[tuple[str, int], float] = {}
    for lease in b.leases.values():
        for s in lease.slots:
            used[(s.node_id, s.accelerator)] = used.get((s.node_id, s.accelerator), 0) + s.share
    return {
        n.node_id: [i for i, _ in n.accelerators if used.get((n.node_id, i), 0) + share <= 1]
        for n in NODES
    }


def _model_plan(b: LeaseBook, need: tuple[int, ...], share: float) -> list[Slot] | None:
    """The client: nodes in rank order, each position the next with room, lowest ids."""
    free = _model_free(b, share)
    slots: list[Slot] = []
    rank = 0
    for count in need:
        while rank < len(NODES) and len(free[NODES[rank].node_id]) < count:
            rank += 1
        if rank == len(NODES):
            return None
        node = NODES[rank].node_id
        slots += [Slot(node, i, share) for i in free[node][:count]]
        rank += 1
    return slots


def _arrive_then_leave(order: list[str]) -> list[tuple[str, str]]:
    """Each job named twice: its first place is its arrival, its second its leaving (every
    interleaving is drawn directly, none rejected)."""
    events: list[tuple[str, str]] = []
    arrived: set[str] = set()
    for job in order:
        events.append(("leave" if job in arrived else "arrive", job))
        arrived.add(job)
    return events


@settings(max_examples=1000, deadline=None)
@given(jobs=st.lists(JOB, min_size=3, max_size=5), data=st.data())
def test_model_no_double_booking_and_waiters_start_in_priority_order(
    jobs: list[dict[str, object]], data: st.DataObject
) -> None:
    names = [f"j{i}" for i in range(len(jobs))]
    spec = dict(zip(names, jobs, strict=True))
    b = book()
    started: dict[str, int] = dict.fromkeys(names, 0)
    arrival: dict[str, int] = {}
    now = [0.0]

    def attempt(job: str) -> bool:
        j = spec[job]
        need, share, priority = j["need"], j["share"], j["priority"]
        assert isinstance(need, tuple)
        assert isinstance(share, float)
        assert isinstance(priority, int)
        slots = _model_plan(b, need, share) or []
        ahead = [
            w
            for w in b.waiters.values()
            if w.job != job
            and (-w.priority, arrival[w.job]) < (-priority, arrival[job])
            and _model_plan(b, w.need, w.share) is not None
        ]
        now[0] += 1
        granted = b.acquire(Request(job, f"o-{job}", priority, tuple(slots), need, share), now[0])
        if granted:
            assert not ahead, f"{job} started before {ahead[0].job}, which fits and is ahead"
            started[job] += 1
        return granted

    def settle() -> None:
        while True:
            order = data.draw(st.permutations(sorted(b.waiters)))
            if not any(attempt(job) for job in order):
                return

    events = data.draw(st.permutations(names * 2).map(_arrive_then_leave))
    for kind, job in events:
        if kind == "arrive":
            arrival[job] = len(arrival)
            attempt(job)
        elif data.draw(st.booleans()):
            b.release(job)  # shutdown (or giving up the wait)
        else:
            b.reclaim({f"o-{job}"})  # the driver died
        settle()
        used: dict[tuple[str, int], float] = {}
        for lease in b.leases.values():
            for s in lease.slots:
                used[(s.node_id, s.accelerator)] = used.get((s.node_id, s.accelerator), 0) + s.share
        assert max(used.values(), default=0) <= 1 + 1e-9, used
        stuck = [w.job for w in b.waiters.values() if _model_plan(b, w.need, w.share) is not None]
        assert not stuck, f"{stuck} fit but still wait"
    assert all(count <= 1 for count in started.values())
    assert b.leases == {}
    assert b.waiters == {}
