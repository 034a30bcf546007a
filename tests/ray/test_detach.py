"""Detached launches outlive their driver; ``attach`` rebuilds them in a new driver."""

from __future__ import annotations

import json
import time

import pytest
import ray

from placement_ray import Cluster, LaunchNotFoundError, PlacementRayWarning, attach, launch
from placement_ray.demo.workers import DemoWorker
from placement_ray.errors import ArgumentError, NodeLostError, WorkerCallError

from .conftest import run_python

CONFIG = {"cluster": {"num_nodes": 3, "component_placement": {"actor": "0-3"}}}

DRIVER = """
import json, ray
ray.init(address={address!r}, namespace={namespace!r}, log_to_driver=False)
from placement_ray import Cluster, launch
from placement_ray.demo.workers import DemoWorker
job = launch({config!r}, {{"actor": DemoWorker}}, Cluster(), name="keep", detached=True)
print(json.dumps(job.manifest()))
"""

ELSEWHERE = """
import ray
ray.init(address={address!r}, namespace="placement-elsewhere", log_to_driver=False)
from placement_ray import Cluster, LaunchNotFoundError, attach
try:
    attach("mine", Cluster(timeout_s=120))
except LaunchNotFoundError as error:
    print(error.elsewhere, error)
"""


def test_a_detached_launch_outlives_its_driver_and_attach_rebuilds_it(
    placement_cluster: Cluster,
) -> None:
    code = DRIVER.format(
        address=placement_cluster.address, namespace=placement_cluster.namespace, config=CONFIG
    )
    before = json.loads(run_python(code, {}, timeout_s=300).strip().splitlines()[-1])
    job = attach("keep", placement_cluster)
    after = job.manifest()
    assert after["components"] == before["components"]
    assert [e["actor_name"] for e in after["components"]["actor"]] == [
        f"keep/actor/{r}" for r in range(4)
    ]
    assert job["actor"].execute("ping", "again", timeout_s=300) == [(r, "again") for r in range(4)]
    job.shutdown()
    with pytest.raises(LaunchNotFoundError, match="no detached launch 'keep'"):
        attach("keep", placement_cluster)


def test_attaching_to_a_name_that_does_not_exist_is_a_clear_error(
    placement_cluster: Cluster,
) -> None:
    with pytest.raises(LaunchNotFoundError) as caught:
        attach("never-launched", placement_cluster)
    assert f"namespace {placement_cluster.namespace!r}" in str(caught.value)


def test_attaching_from_another_namespace_names_the_launchs_namespace(
    placement_cluster: Cluster,
) -> None:
    job = launch(CONFIG, {"actor": DemoWorker}, placement_cluster, name="mine", detached=True)
    with job:
        with pytest.raises(ArgumentError, match="already runs"):
            launch(CONFIG, {"actor": DemoWorker}, placement_cluster, name="mine", detached=True)
        out = run_python(ELSEWHERE.format(address=placement_cluster.address), {}, 300)
    assert f"('{placement_cluster.namespace}',)" in out
    assert f"lives in namespace '{placement_cluster.namespace}'" in out


@pytest.mark.parametrize(
    ("options", "field"),
    [({"detached": True}, "detached"), ({"name": "a/b"}, "name"), ({"name": ""}, "name")],
)
def test_bad_names_are_refused(
    placement_cluster: Cluster, options: dict[str, object], field: str
) -> None:
    with pytest.raises(ArgumentError, match=field):
        launch(CONFIG, {"actor": DemoWorker}, placement_cluster, **options)  # type: ignore[arg-type]


def test_attach_with_a_worker_gone_warns_and_the_first_call_names_the_loss(
    placement_cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    code = DRIVER.format(
        address=placement_cluster.address, namespace=placement_cluster.namespace, config=CONFIG
    )
    run_python(code, {}, timeout_s=300)
    ray.kill(ray.get_actor("keep/actor/3", namespace=placement_cluster.namespace))
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # Ray frees the dead actor's name shortly after
        try:
            ray.get_actor("keep/actor/3", namespace=placement_cluster.namespace)
        except ValueError:
            break
        time.sleep(0.2)
    with pytest.warns(PlacementRayWarning, match=r"attach: 1 worker\(s\) are gone.*recover\(\)"):
        job = attach("keep", placement_cluster)
    try:
        group = job["actor"]
        with pytest.raises(WorkerCallError, match=r"rank\(s\) \[3\] is gone") as caught:
            group.execute("ping", "x", timeout_s=300)
        assert not isinstance(caught.value, ArgumentError)
        lost = NodeLostError("1 of the job's 3 nodes are lost: ...", dead_nodes=[(1, "n1")])

        def node_lost(**_: object) -> None:
            raise lost

        monkeypatch.setattr(group, "check_health", node_lost)
        with pytest.raises(NodeLostError) as caught_lost:
            group.execute("ping", "x", timeout_s=300)
        assert caught_lost.value is lost
    finally:
        job.shutdown()
