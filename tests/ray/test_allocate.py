"""allocate: one actor on a given node and GPUs; interpreters checked; start timeouts."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
import ray
from ray.util.placement_group import PlacementGroup

from placement_ray._allocate import allocate, check_interpreters, wait_started
from placement_ray._cluster import Cluster
from placement_ray._placement_groups import create_placement_group
from placement_ray._request import Seat, WorkerOptions, WorkerRequest
from placement_ray.demo.workers import DemoWorker
from placement_ray.errors import (
    ArgumentError,
    InterpreterError,
    WorkerStartError,
    WorkerStartTimeoutError,
)


def request(
    name: str,
    node_rank: int,
    gpus: Sequence[int] = (),
    env: Mapping[str, str] | None = None,
    args: Sequence[Any] = (),
    *,
    bundle: tuple[PlacementGroup, int] | None = None,
    more_bundles: Sequence[int] = (),
    gpu_share: float | None = None,
    interpreter: str | None = None,
) -> WorkerRequest:
    """A request made by hand (no placement), so allocate's own checks can be reached."""
    return WorkerRequest(
        component="worker",
        rank=0,
        name=name,
        placement=None,
        options=WorkerOptions(DemoWorker, args=tuple(args), gpu_share=gpu_share),
        seat=Seat(node_rank, tuple(gpus), bundle, tuple(more_bundles)),
        env=dict(env or {}),
        interpreter=interpreter,
    )


def test_worker_runs_on_its_node_and_sees_exactly_its_gpus(placement_cluster: Cluster) -> None:
    worker = allocate(
        request("probe", 2, [1, 3], {"MY_VAR": "x"}, ("lbl",)), cluster=placement_cluster
    )
    (report,) = wait_started([worker], timeout_s=60)
    assert report["node_id"] == placement_cluster.node(2).node_id
    assert report["node_rank_label"] == "2"
    assert report["env"]["CUDA_VISIBLE_DEVICES"] == "1,3"
    assert report["env"]["MY_VAR"] == "x"
    assert (
        ray.get(worker.handle.getenv.remote("RAY_EXPERIMENTAL_NOSET_CUDA_VISIBLE_DEVICES")) == "1"
    )
    assert ray.get(worker.handle.ping.remote(7)) == (-1, 7)


def test_worker_in_a_bundle_holds_a_share_of_its_first_gpu(placement_cluster: Cluster) -> None:
    group = create_placement_group(placement_cluster, [{"GPU": 1}, {"GPU": 1}], pin_to=[1, 1])
    first, second = group.slots
    worker = allocate(
        request(
            "tp2",
            1,
            [first.gpu_id, second.gpu_id],
            bundle=(group.pg, first.index),
            more_bundles=[second.index],
            gpu_share=0.3,
        ),
        cluster=placement_cluster,
    )
    (report,) = wait_started([worker], timeout_s=60)
    assert tuple(report["ray_gpu_ids"]) == (first.gpu_id,)
    assert report["env"]["CUDA_VISIBLE_DEVICES"] == f"{first.gpu_id},{second.gpu_id}"
    assert worker.gpu_share == 0.3
    assert worker.bundle_index == first.index
    assert placement_cluster.shares.used(group.pg.id.hex()) == {
        first.index: 0.3,
        second.index: 0.3,
    }


@pytest.mark.parametrize(
    ("node_rank", "gpus", "match"),
    [
        (3, [0], "node_rank"),
        (-1, [0], "node_rank"),
        (0, [4], "accelerator_ids"),
        (0, [1, 1], "accelerator_ids"),
    ],
)
def test_bad_node_or_gpu_is_an_error_before_any_actor(
    cluster: Cluster, node_rank: int, gpus: list[int], match: str
) -> None:
    with pytest.raises(ArgumentError, match=match):
        allocate(request("bad", node_rank, gpus), cluster=cluster)


def test_env_that_contradicts_the_gpus_is_an_error(cluster: Cluster) -> None:
    with pytest.raises(ArgumentError, match="contradicts"):
        allocate(request("bad", 0, [0], {"CUDA_VISIBLE_DEVICES": "3"}), cluster=cluster)


def test_missing_interpreter_is_an_error_naming_node_and_path(cluster: Cluster) -> None:
    with pytest.raises(InterpreterError) as caught:
        check_interpreters(cluster, [(1, "/nonexistent/venv/bin/python"), (0, "python3")])
    assert caught.value.problems == (
        (0, "python3", "is not an absolute path"),
        (1, "/nonexistent/venv/bin/python", "does not exist on this node"),
    )
    assert "node 1: /nonexistent/venv/bin/python does not exist" in str(caught.value)


def test_interpreter_without_ray_is_an_error(cluster: Cluster, tmp_path: Path) -> None:
    fake = tmp_path / "python"
    fake.write_text("#!/bin/sh\necho '3.0 -'\n")
    fake.chmod(0o755)
    with pytest.raises(InterpreterError, match=r"is Python 3\.0"):
        check_interpreters(cluster, [(0, str(fake))])


def test_allocate_checks_the_interpreter_before_starting(cluster: Cluster) -> None:
    with pytest.raises(InterpreterError, match="does not exist"):
        allocate(request("w", 0, interpreter="/nope/python"), cluster=cluster)


def test_start_that_cannot_fit_times_out_naming_worker_and_cause(
    placement_cluster: Cluster,
) -> None:
    group = create_placement_group(placement_cluster, [{"GPU": 1}], pin_to=[0])
    bundle = (group.pg, group.slots[0].index)
    gpus = [group.slots[0].gpu_id]
    fits = allocate(
        request("first", 0, gpus, bundle=bundle, gpu_share=0.7), cluster=placement_cluster
    )
    stuck = allocate(
        request("second", 0, gpus, bundle=bundle, gpu_share=0.7), cluster=placement_cluster
    )
    wait_started([fits], timeout_s=120)  # on a loaded machine the one that fits may be slow
    with pytest.raises(WorkerStartTimeoutError) as caught:
        wait_started([fits, stuck], timeout_s=5)
    ((who, why),) = caught.value.workers
    assert who.startswith("second on node 0")
    assert "no room for GPU share 0.7" in why


def test_worker_whose_init_raises_is_reported(placement_cluster: Cluster) -> None:
    worker = allocate(request("broken", 0, args=("a", "b", "c")), cluster=placement_cluster)
    with pytest.raises(WorkerStartError, match=r"broken on node 0.*died starting"):
        wait_started([worker], timeout_s=60)
