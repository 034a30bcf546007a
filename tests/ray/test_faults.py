"""Hostile input and faults on placement-ray: every case ends in bounded time, typed.

Classes covered: a GPU handed to two workers (shares on every GPU), a call that one rank
fails while the others block, a lost node (only its own workers affected), the job's
view holder lost, and the messages (pins, dead nodes, colour codes, word boundaries).

Node loss uses a small cluster of its own per test, whose node 3 the test removes.
"""

from __future__ import annotations

import os
import threading
import time
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import ray
from hypothesis import given, settings
from hypothesis import strategies as st
from ray.util.placement_group import placement_group_table

from placement_core import plan, plan_from_assignments
from placement_core._inventory import Inventory
from placement_ray._cluster import Cluster
from placement_ray._colocation import GpuShare, check_shares
from placement_ray._feasibility import check_feasible
from placement_ray._launch import _pending, default_shares, launch
from placement_ray._placement_groups import create_placement_group
from placement_ray._text import ELLIPSIS, clean, shorten, strip_ansi
from placement_ray._worker_group import DEFAULT_CALL_TIMEOUT_S, WorkerGroup, _short
from placement_ray.demo.workers import DemoWorker
from placement_ray.errors import (
    ArgumentError,
    InfeasiblePlacementGroupError,
    NodeLostError,
    OversubscribedGPUError,
    PlacementGroupTimeoutError,
    WorkerCallError,
    WorkerStartError,
    WorkerTimeoutError,
)
from placement_ray.testing import SimulatedCluster

from .conftest import LOSSY, restore_nodes

# ------------------------------------------------------------------ shared GPUs
TWO_ON_GPU_1 = {"cluster": {"num_nodes": 1, "component_placement": {"x": "0-1:0", "y": "1"}}}


def _sums(the_plan: Any, gpu_share: Any = None) -> dict[tuple[int, int], float]:
    sums: dict[tuple[int, int], float] = defaultdict(float)
    for w in _pending(the_plan, gpu_share):
        for gpu in w.placement.hardware_ranks:
            sums[(w.placement.node_rank, gpu)] += w.share
    return dict(sums)


def test_a_worker_counts_on_every_gpu_it_uses() -> None:
    the_plan = plan(TWO_ON_GPU_1, Inventory.uniform(1, 2))
    assert default_shares(the_plan) == {"x": 0.5, "y": 0.5}
    assert _sums(the_plan) == {(0, 0): 0.5, (0, 1): 1.0}


def test_explicit_shares_overflowing_a_later_gpu_are_refused_by_name() -> None:
    the_plan = plan(TWO_ON_GPU_1, Inventory.uniform(1, 2))
    pending = _pending(the_plan, {"x": 1.0, "y": 1.0})
    with pytest.raises(OversubscribedGPUError) as caught:
        check_shares(
            GpuShare(w.name, w.placement.node_rank, g, w.share)
            for w in pending
            for g in w.placement.hardware_ranks
        )
    assert [(where, total) for where, total, _ in caught.value.gpus] == [("node 0 GPU 1", 2.0)]
    assert "node 0 GPU 1: 2 = x rank 0 1, y rank 0 1" in str(caught.value)


def test_rlinf_time_shared_colocation_splits_each_gpu_evenly() -> None:
    config = {
        "cluster": {"num_nodes": 1, "component_placement": {"actor": "all", "rollout": "0-1"}}
    }
    the_plan = plan(config, Inventory.uniform(1, 4), colocate=[["actor", "rollout"]])
    assert default_shares(the_plan) == {"actor": 0.5, "rollout": 0.5}
    assert max(_sums(the_plan).values()) == 1.0


def test_a_default_share_takes_what_explicit_shares_leave() -> None:
    the_plan = plan(TWO_ON_GPU_1, Inventory.uniform(1, 2))
    assert default_shares(the_plan, {"y": 0.75}) == {"x": 0.25, "y": 0.75}


_ASSIGNMENT = st.tuples(
    st.integers(0, 1), st.sets(st.integers(0, 3), min_size=1, max_size=3).map(tuple)
)


@settings(max_examples=60, deadline=None)
@given(
    st.dictionaries(
        st.sampled_from(["a", "b", "c", "d"]),
        st.lists(_ASSIGNMENT, min_size=1, max_size=4),
        min_size=1,
        max_size=4,
    )
)
def test_default_shares_fit_every_gpu_of_any_assignment(
    assignments: dict[str, list[tuple[int, tuple[int, ...]]]],
) -> None:
    the_plan = plan_from_assignments(assignments, Inventory.uniform(2, 4))
    totals = _sums(the_plan)
    assert all(total <= 1 + 1e-9 for total in totals.values()), totals
    check_shares(
        GpuShare(w.name, w.placement.node_rank, g, w.share)
        for w in _pending(the_plan, None)
        for g in w.placement.hardware_ranks
    )


@settings(max_examples=60, deadline=None)
@given(
    st.dictionaries(
        st.sampled_from(["a", "b", "c"]),
        st.lists(_ASSIGNMENT, min_size=1, max_size=3),
        min_size=1,
        max_size=3,
    ),
    st.data(),
)
def test_explicit_shares_are_refused_exactly_when_a_gpu_overflows(
    assignments: dict[str, list[tuple[int, tuple[int, ...]]]], data: Any
) -> None:
    the_plan = plan_from_assignments(assignments, Inventory.uniform(2, 4))
    shares = {c: data.draw(st.sampled_from([0.25, 0.5, 1.0])) for c in assignments}
    totals = _sums(the_plan, shares)
    overflow = any(total > 1 + 1e-9 for total in totals.values())
    items = [
        GpuShare(w.name, w.placement.node_rank, g, w.share)
        for w in _pending(the_plan, shares)
        for g in w.placement.hardware_ranks
    ]
    if overflow:
        with pytest.raises(OversubscribedGPUError):
            check_shares(items)
    else:
        check_shares(items)


def test_launch_refuses_overflowing_shares_before_anything_starts(
    placement_cluster: Cluster,
) -> None:
    the_plan = plan_from_assignments(
        {"x": [(0, (0, 1))], "y": [(0, (1,))]}, placement_cluster.inventory
    )
    before = set(placement_group_table())
    with pytest.raises(OversubscribedGPUError, match="node 0 GPU 1"):
        launch(the_plan, {"x": DemoWorker, "y": DemoWorker}, placement_cluster, gpu_share=1.0)
    assert set(placement_group_table()) == before


def test_launch_shows_the_plans_sharing_warning_and_books_every_gpu(
    placement_cluster: Cluster, caplog: pytest.LogCaptureFixture
) -> None:
    placement = {"x": "0-1:0", "y": "1-2:0"}  # partly overlapping: the plan warns
    config = {"cluster": {"num_nodes": 3, "component_placement": placement}}
    with caplog.at_level("WARNING", logger="placement_ray._launch"):
        job = launch(config, {"x": DemoWorker, "y": DemoWorker}, placement_cluster, timeout_s=300)
    with job:
        assert "partly overlap" in caplog.text
        group = job.placement_group(0)
        used = placement_cluster.shares.used(group.pg.id.hex())
        x, y = job["x"][0], job["y"][0]
        assert (x.gpu_share, y.gpu_share) == (0.5, 0.5)
        second = next(s.index for s in group.slots if s.gpu_id == x.gpu_ids[1])
        assert used[second] == pytest.approx(1.0)


# ------------------------------------------------------------------ fail-fast calls
class Collective(DemoWorker):
    """Rank ``victim`` fails one way or another; the others block as in a collective."""

    def step(self, victim: int, how: str) -> int:
        rank = int(os.environ["RANK"])
        if rank != victim:
            time.sleep(3600)
        if how == "raise":
            raise ValueError(f"\x1b[31mrank {rank} broke\x1b[0m")
        os._exit(1)

    def block(self) -> None:
        time.sleep(3600)


def _launch_collective(cluster: Cluster) -> Any:
    config = {"cluster": {"num_nodes": 3, "component_placement": {"actor": "0-3"}}}
    return launch(config, {"actor": Collective}, cluster, timeout_s=300)


def test_a_raising_rank_ends_the_call_while_the_others_block(placement_cluster: Cluster) -> None:
    with _launch_collective(placement_cluster) as job, pytest.raises(WorkerCallError) as caught:
        job["actor"].execute("step", 2, "raise", timeout_s=300)
    error = caught.value
    assert [rank for rank, _, _ in error.failed] == [2]
    assert sorted(error.pending) == [0, 1, 3]
    text = str(error)
    assert "actor.step raised on rank 2: actor rank 2 on node 0 (GPUs [2]" in text
    assert "rank 2 broke" in text
    assert "\x1b" not in text


def test_a_dying_rank_ends_the_call_naming_it(placement_cluster: Cluster) -> None:
    with _launch_collective(placement_cluster) as job, pytest.raises(WorkerCallError) as caught:
        job["actor"].execute("step", 1, "exit", timeout_s=300)
    assert [rank for rank, _, _ in caught.value.failed] == [1]
    assert "lost its worker on rank 1: actor rank 1 on node 0" in str(caught.value)


def test_a_timeout_names_the_pending_ranks(placement_cluster: Cluster) -> None:
    with _launch_collective(placement_cluster) as job, pytest.raises(WorkerTimeoutError) as caught:
        job["actor"].execute("block", timeout_s=1.0)
    assert caught.value.pending == (0, 1, 2, 3)


def test_calls_have_a_finite_default_timeout() -> None:
    import inspect

    default = inspect.signature(WorkerGroup.execute).parameters["timeout_s"].default
    assert default == DEFAULT_CALL_TIMEOUT_S
    assert 0 < DEFAULT_CALL_TIMEOUT_S < float("inf")


@pytest.mark.parametrize("bad", [0, -1, float("nan"), True, "5"])
def test_a_bad_call_timeout_is_refused(placement_cluster: Cluster, bad: Any) -> None:
    with pytest.raises(ArgumentError, match="timeout_s"):
        WorkerGroup("actor", [], cluster=placement_cluster).execute("ping", timeout_s=bad)


# ------------------------------------------------------------------ node loss
@pytest.fixture
def extra_node(placement_cluster_factory: Any) -> Iterator[tuple[SimulatedCluster, Cluster]]:
    """The lossy cluster (4 labelled nodes x 2 GPUs), whose node 3 the test may kill; it is
    started again after the test."""
    simulated = placement_cluster_factory.simulated(**LOSSY)
    try:
        yield simulated, simulated.view()
    finally:
        restore_nodes(simulated, (3,))


@pytest.mark.placement_cluster(**LOSSY)
def test_a_lost_node_takes_only_its_own_workers(extra_node: Any) -> None:
    simulated, view = extra_node
    assignments = {"actor": [(0, (0,)), (0, (1,)), (3, (0,)), (3, (1,))]}
    job = launch(plan_from_assignments(assignments, view.inventory), {"actor": DemoWorker}, view)
    with job:
        assert sorted(job.placement_groups) == [0, 3]
        group = job["actor"]
        lost = [(w.rank, w.node_rank, w.gpu_ids) for w in group if w.node_rank == 3]
        simulated.kill_node(3)
        with pytest.raises(NodeLostError) as caught:
            group.execute("ping", timeout_s=300)
        affected = [(a["rank"], a["node_rank"], a["gpu_ids"]) for a in caught.value.affected]
        assert affected == lost
        assert group.execute("ping", "alive", ranks=[0, 1], timeout_s=300) == [
            (0, "alive"),
            (1, "alive"),
        ]
        assert placement_group_table(job.placement_group(0).pg)["state"] == "CREATED"


class SlowStart:
    """Marks that its ``__init__`` began, then takes long enough for its node to go."""

    def __init__(self, marker: str) -> None:
        Path(marker).write_text("started", encoding="utf-8")
        time.sleep(3600)


@pytest.mark.placement_cluster(**LOSSY)
def test_node_loss_during_init_says_so(extra_node: Any, tmp_path: Path) -> None:
    simulated, view = extra_node
    marker = tmp_path / "started"
    os.mkfifo(marker)  # the actor's write wakes the remover: no polling
    the_plan = plan_from_assignments({"slow": [(3, (0,))]}, view.inventory)

    def remove_once_started() -> None:
        with marker.open(encoding="utf-8") as fifo:  # blocks until __init__ began
            fifo.read()
        simulated.kill_node(3)

    remover = threading.Thread(target=remove_once_started, daemon=True)
    remover.start()
    with pytest.raises(WorkerStartError) as caught:
        launch(the_plan, {"slow": SlowStart}, view, kwargs={"slow": {"marker": str(marker)}})
    remover.join(timeout=300)
    assert "slow rank 0 on node 3" in str(caught.value)
    assert "was lost during its __init__" in str(caught.value)


@pytest.mark.placement_cluster(**LOSSY)
def test_the_jobs_view_stays_beside_the_head_and_is_rebuilt_when_lost(
    extra_node: Any,
) -> None:
    simulated, view = extra_node
    from ray._private import state

    info = state.actors(actor_id=view._state_actor._actor_id.hex())
    assert info["Address"]["NodeID"] == view.cluster_id  # the head, though it has no CPU
    simulated.kill_node(3)
    again = Cluster(None, job=view.job, timeout_s=60, export_env=False)
    assert again.num_nodes == 4
    ray.kill(view._state_actor, no_restart=True)
    rebuilt = Cluster(3, job=view.job, timeout_s=60, export_env=False)
    try:
        assert rebuilt.num_nodes == 3
    finally:
        rebuilt.shutdown()


# ------------------------------------------------------------------ messages
def test_a_pinned_bundle_timeout_says_it_is_pinned(placement_cluster: Cluster) -> None:
    full = create_placement_group(placement_cluster, [{"GPU": 4.0}], pin_to=[1])
    try:
        with pytest.raises(PlacementGroupTimeoutError) as caught:
            create_placement_group(placement_cluster, [{"GPU": 1.0}], pin_to=[1], timeout_s=1.0)
    finally:
        full.remove()
    text = str(caught.value)
    assert "bundle 0: {GPU: 1}, pinned to node 1" in text
    assert "free resources on other nodes cannot hold it" in text


def test_a_dead_node_is_called_dead() -> None:
    with pytest.raises(InfeasiblePlacementGroupError) as caught:
        check_feasible([{"GPU": 1.0}], [{"GPU": 4.0}, {}], pins=[1], dead=[1])
    text = str(caught.value)
    assert "pinned to node 1, which is dead" in text
    assert "{} in total" not in text
    assert "node 1: dead" in text


def test_colour_codes_are_stripped_from_rays_text() -> None:
    assert strip_ansi("\x1b[31mValueError\x1b[0m: \x1b[1;32mboom\x1b[0m") == "ValueError: boom"
    assert "\x1b" not in _short(RuntimeError("\x1b[36m(pid=1)\x1b[0m lost"))


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.text(alphabet="abcXYZ09-_.", min_size=1, max_size=12), min_size=1, max_size=40),
    st.integers(min_value=2, max_value=80),
)
def test_shortened_text_ends_on_a_word_boundary(words: list[str], limit: int) -> None:
    text = " ".join(words)
    short = shorten(text, limit)
    assert len(short) <= limit
    if short == text:
        return
    assert short.endswith(ELLIPSIS)
    kept = short[: -len(ELLIPSIS)]
    assert text.startswith(kept)
    if " " in text[: limit - len(ELLIPSIS) + 1]:
        assert text[len(kept)] == " "


def test_long_ray_text_is_cut_between_words() -> None:
    text = clean("word " * 400, 50)
    assert text.endswith("word" + ELLIPSIS)
    assert len(text) <= 50
