"""A simulated cluster that does not come up in time: one clear error, a wait that
adapts to a loaded machine, a repr that works, and the pytest plugin's one error per shape.

No cluster is started here: Ray's node start is made to fail (as it does on a machine
loaded far beyond its cores) or the live-node count is scripted.
"""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from ray.cluster_utils import Cluster as RayCluster

import placement_ray.testing as kit
from placement_ray import ClusterError

RAY_TIMEOUT = (
    "The current node timed out during startup. This could happen because some of the "
    "raylet failed to startup or the GCS has become overloaded."
)


def _slow_start(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls: list[int] = []

    def add_node(self: Any, **_: Any) -> Any:
        calls.append(1)
        raise Exception(RAY_TIMEOUT)  # what Ray's node start raises

    monkeypatch.setattr(RayCluster, "add_node", add_node)
    return calls


def test_a_node_that_does_not_start_is_one_short_cluster_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls = _slow_start(monkeypatch)
    with pytest.raises(ClusterError) as caught:
        kit.SimulatedCluster(nodes=2)
    text = str(caught.value)
    assert text.startswith("the simulated cluster of 2 nodes did not come up: node 0 did not")
    assert "timed out during startup" in text
    assert "load average" in text
    assert len(text.splitlines()) == 1
    assert caught.value.__cause__ is None
    # Ray gives a node a fixed 30 s: the kit starts the cluster again a few times, then
    # says how often it tried.
    assert len(calls) == kit._START_ATTEMPTS
    assert f"{kit._START_ATTEMPTS} attempt(s)" in text


def test_a_separate_head_that_does_not_start_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    _slow_start(monkeypatch)
    monkeypatch.setattr(kit, "_START_ATTEMPTS", 1)
    with pytest.raises(ClusterError, match=r"did not come up: the head node did not start"):
        kit.SimulatedCluster(nodes=2, separate_head=True)


def test_the_repr_of_a_cluster_that_never_started_names_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _slow_start(monkeypatch)
    half = kit.SimulatedCluster.__new__(kit.SimulatedCluster)
    half.spec = kit.ClusterSpec(nodes=3)
    assert repr(half) == "SimulatedCluster(3 nodes, address=not started)"
    half.spec = kit.ClusterSpec(nodes=3, separate_head=True)
    assert repr(half) == "SimulatedCluster(3 nodes and a separate head, address=not started)"


def test_a_node_whose_raylet_died_ends_the_wait_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    from ray._private import services

    def unregistered(gcs_address: str, node_id: str) -> Any:
        raise RuntimeError("node info not available")  # what Ray's lookup raises meanwhile

    monkeypatch.setattr(services, "get_node", unregistered)
    start = time.monotonic()
    with kit._patient_node_start(600), pytest.raises(RuntimeError, match="exited before it"):
        services.get_node("127.0.0.1:1", "ab" * 28)  # no raylet of that node runs here
    assert time.monotonic() - start < 5


_STAND_IN = "import time; print('up', flush=True); time.sleep(60)"


def test_a_running_raylet_is_found_by_its_node_id(monkeypatch: pytest.MonkeyPatch) -> None:
    node_id = "cd" * 28
    stand_in = subprocess.Popen(  # a process whose command line is a raylet's
        [sys.executable, "-c", _STAND_IN, f"--node_id={node_id}"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert stand_in.stdout is not None
        assert stand_in.stdout.readline() == "up\n"  # exec'd: /proc shows its command line
        assert kit._raylet_running(node_id)
        assert not kit._raylet_running("ef" * 28)
    finally:
        stand_in.kill()
        stand_in.wait()


def test_the_wait_goes_on_while_nodes_keep_coming_up() -> None:
    counts = itertools.chain([0, 1, 1, 2, 2, 3], itertools.repeat(4))
    start = time.monotonic()
    # Each node takes longer than timeout_s / 2 but the total is well over timeout_s.
    kit.wait_for_nodes(lambda: next(counts), 4, 0.12, poll_s=0.05)
    assert time.monotonic() - start >= 0.2


def test_a_stuck_cluster_times_out_saying_how_many_came_up() -> None:
    with pytest.raises(TimeoutError, match=r"2 of 4 nodes alive after \d+s \(no progress"):
        kit.wait_for_nodes(lambda: 2, 4, 0.1, poll_s=0.02)


def test_a_cluster_that_keeps_crawling_is_capped_at_four_timeouts() -> None:
    counts = itertools.count()  # one more node every poll, never enough
    start = time.monotonic()
    with pytest.raises(TimeoutError):
        kit.wait_for_nodes(lambda: next(counts), 10**9, 0.1, poll_s=0.01)
    assert time.monotonic() - start < 1.0


PLUGIN_TESTS = """
import pytest
from ray.cluster_utils import Cluster

def add_node(self, **_):
    raise Exception("The current node timed out during startup.")

Cluster.add_node = add_node

pytestmark = pytest.mark.placement_cluster(nodes=2)

@pytest.mark.parametrize("i", range(5))
def test_one(placement_cluster, i):
    pass

@pytest.mark.placement_cluster(nodes=3)
def test_other_shape(placement_cluster):
    pass
"""


def test_the_plugin_reports_a_shape_that_did_not_come_up_once(tmp_path: Path) -> None:
    (tmp_path / "test_inner.py").write_text(PLUGIN_TESTS)
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-rs", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
        check=False,
    )
    out = result.stdout
    assert "4 skipped, 2 errors" in out, out[-3000:]
    assert "did not come up earlier" in out
    assert len(out.splitlines()) < 200


def test_starting_nodes_keeps_rays_current_cluster_file_and_info_lines_quiet(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    import logging

    import ray._private.utils as ray_utils

    caplog.set_level(logging.INFO)
    with kit._quiet_ray():
        ray_utils.write_ray_address("127.0.0.1:6379", str(tmp_path))
        logging.getLogger("ray._private.node").info("Failed to get node info")
    assert list(tmp_path.iterdir()) == []
    assert "Failed to get node info" not in caplog.text
    ray_utils.write_ray_address("127.0.0.1:6379", str(tmp_path))  # restored after
    assert list(tmp_path.iterdir()) != []


SITECUSTOMIZE = """
import ray.cluster_utils

def add_node(self, **_):
    raise Exception("The current node timed out during startup.")

ray.cluster_utils.Cluster.add_node = add_node
"""


def test_the_demo_says_its_cluster_did_not_come_up_in_one_line(tmp_path: Path) -> None:
    (tmp_path / "sitecustomize.py").write_text(SITECUSTOMIZE)
    env = {
        **os.environ,
        "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",
        "PYTHONPATH": str(tmp_path),
    }
    result = subprocess.run(
        [sys.executable, "-m", "placement_ray.demo"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
        env=env,
        check=False,
    )
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("error: the simulated cluster of 4 nodes did not come up: node 0")


def test_starting_nodes_give_their_agents_the_start_s_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    name = "RAY_agent_register_timeout_ms"
    monkeypatch.delenv(name, raising=False)
    with kit._patient_agents(240):
        assert os.environ[name] == "240000"  # what the raylets started now read
    assert name not in os.environ
    monkeypatch.setenv(name, "5000")
    with kit._patient_agents(240):
        assert os.environ[name] == "5000"  # the user's own value wins
    assert os.environ[name] == "5000"
