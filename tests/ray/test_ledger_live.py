"""The lease ledger actor on the session cluster: bad input, restarts, versions, listing.

These tests hold leases of their own (owner: the test driver) for nodes of the session
cluster, through the ledger actor directly, and release them before they end.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest
import ray
from ray.experimental import internal_kv

from placement_ray import (
    ArgumentError,
    Cluster,
    JobNameTakenError,
    LeaseError,
    LedgerVersionError,
    create_placement_groups,
    launch,
    leases,
)
from placement_ray._free_view import capacities
from placement_ray._lease_state import LEDGER_VERSION, LeaseBook, Request, Slot
from placement_ray._ledger import LEDGER_NAMESPACE, LeaseLedger, ledger_actor, ledger_call


@pytest.fixture
def held(placement_cluster: Cluster) -> Iterator[tuple[Any, Request]]:
    """The ledger, and a lease ``kept`` on node 0's GPUs 0-1 owned by this driver."""
    ledger = ledger_actor()
    ray.get(ledger.register.remote(capacities(placement_cluster)))
    node = placement_cluster.node(0).node_id
    owner = ray.get_runtime_context().get_job_id()
    request = Request("kept", owner, 3, (Slot(node, 0), Slot(node, 1)), (2,))
    granted, _ = ray.get(ledger.acquire.remote(request, {}, 1.0))
    assert granted
    yield ledger, request
    ledger_call(ledger, "release", "kept")


def book(ledger: Any) -> dict[str, Any]:
    record: dict[str, Any] = ledger_call(ledger, "snapshot")
    record.pop("change")
    return record


def test_a_lease_is_listed_per_accelerator(
    placement_cluster: Cluster, held: tuple[Any, Request]
) -> None:
    records = [r for r in leases(placement_cluster) if r.job == "kept"]
    assert [(r.node_rank, r.accelerator, r.share, r.priority) for r in records] == [
        (0, 0, 1.0, 3),
        (0, 1, 1.0, 3),
    ]


@pytest.mark.parametrize(
    ("slot", "error", "match"),
    [
        (Slot("no-such-node", 0), LeaseError, r"slots\[0\].node_id: unknown node 'no-such-node'"),
        (None, LeaseError, r"slots\[0\].accelerator: node \w+ \(rank 1\) has no accelerator 9"),
    ],
)
def test_a_lease_for_an_unknown_node_or_gpu_is_refused_and_nothing_is_lost(
    placement_cluster: Cluster,
    held: tuple[Any, Request],
    slot: Slot | None,
    error: type[Exception],
    match: str,
) -> None:
    ledger, _ = held
    slot = slot or Slot(placement_cluster.node(1).node_id, 9)
    before = book(ledger)
    request = Request("bad", "someone", 0, (slot,), (1,))
    with pytest.raises(error, match=match):
        ray.get(ledger.acquire.remote(request, {}, 2.0))
    assert book(ledger) == before


def test_a_name_taken_by_a_live_job_is_refused(held: tuple[Any, Request]) -> None:
    ledger, kept = held
    before = book(ledger)
    other = Request("kept", "another-driver", 0, kept.slots, kept.need)
    with pytest.raises(JobNameTakenError, match=r"'kept' is taken by a live job"):
        ray.get(ledger.acquire.remote(other, {}, 2.0))
    assert book(ledger) == before


def test_a_negative_priority_is_refused_before_anything(placement_cluster: Cluster) -> None:
    config = {"cluster": {"num_nodes": 1, "component_placement": {"actor": "0"}}}
    with pytest.raises(LeaseError, match=r"priority: expected an int >= 0.*got -1"):
        launch(config, {"actor": object}, placement_cluster, share_cluster=True, priority=-1)


def test_a_detached_launch_cannot_share_the_cluster(placement_cluster: Cluster) -> None:
    config = {"cluster": {"num_nodes": 1, "component_placement": {"actor": "0"}}}
    with pytest.raises(ArgumentError, match=r"share_cluster: a detached launch outlives"):
        launch(
            config,
            {"actor": object},
            placement_cluster,
            share_cluster=True,
            detached=True,
            name="x",
        )


def test_a_restarted_ledger_keeps_every_lease(held: tuple[Any, Request]) -> None:
    ledger, _ = held
    before = book(ledger)
    ray.kill(ledger, no_restart=False)  # Ray starts it again; it reads its book back
    assert book(ledger_actor()) == before


def test_a_ledger_of_a_newer_version_is_refused_and_its_book_kept(
    placement_cluster: Cluster,
) -> None:
    key = b"placement-leases/test-newer"
    newer = json.dumps({**LeaseBook().to_record(), "version": LEDGER_VERSION + 1})
    internal_kv._internal_kv_put(key, newer, overwrite=True, namespace=LEDGER_NAMESPACE)
    try:
        actor = ray.remote(LeaseLedger).options(num_cpus=0).remote(key)  # type: ignore[attr-defined]
        with pytest.raises(LedgerVersionError, match=r"stored lease ledger is version 2"):
            ray.get(actor.hello.remote(LEDGER_VERSION))
        ray.kill(actor)
        kept = internal_kv._internal_kv_get(key, namespace=LEDGER_NAMESPACE)
        assert json.loads(kept)["version"] == LEDGER_VERSION + 1
    finally:
        internal_kv._internal_kv_del(key, namespace=LEDGER_NAMESPACE)


def test_the_jobs_command_prints_the_leases_as_json(
    placement_cluster: Cluster, held: tuple[Any, Request]
) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAY_ADDRESS", "PLACEMENT_"))}
    env["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "placement_ray",
            "jobs",
            "--address",
            placement_cluster.address,
            "--json",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
        check=True,
    )
    table = json.loads(done.stdout)
    kept = [r for r in table["leases"] if r["job"] == "kept"]
    assert set(kept[0]) == {
        "job",
        "node_id",
        "node_rank",
        "accelerator",
        "uuid",
        "share",
        "priority",
        "since",
    }
    assert [r["accelerator"] for r in kept] == [0, 1]
    assert table["queue"] == []


def test_the_jobs_command_draws_who_holds_each_gpu_with_map(
    placement_cluster: Cluster, held: tuple[Any, Request]
) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAY_ADDRESS", "PLACEMENT_"))}
    env["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
    command = [sys.executable, "-m", "placement_ray", "jobs", "--address"]
    done = subprocess.run(
        [*command, placement_cluster.address, "--map"],
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
        check=True,
    )
    row = next(line for line in done.stdout.splitlines() if line.startswith("0 "))
    assert row.split()[2:4] == ["kept", "kept"]


def test_a_slime_layout_on_a_shared_cluster_takes_free_gpus_and_ends_its_lease(
    placement_cluster: Cluster, held: tuple[Any, Request]
) -> None:
    layout = create_placement_groups(
        1, 4, 4, colocate=True, cluster=placement_cluster, share_cluster=True, queue_timeout_s=60
    )
    try:
        mine = [r for r in leases(placement_cluster) if r.job == placement_cluster.job]
        # node 0 holds only 2 free GPUs (the lease ``kept``): the layout's 4 go to node 1
        assert [(r.node_rank, r.accelerator) for r in mine] == [(1, i) for i in range(4)]
        assert {placement_cluster.rank_of(s.node_id) for s in layout.group.slots} == {1}
    finally:
        layout.remove()
    assert [r.job for r in leases(placement_cluster)] == ["kept", "kept"]
