"""OpenRLHF's own launcher and vLLM-engine code on the drop-in, and without it.

Actor ranks and the GPUs they see are read from inside OpenRLHF's actors; the stand-in
engine actor reports the bundles OpenRLHF handed it.
"""

from __future__ import annotations

from typing import Any

import pytest
import ray
from compat_workers import EngineProbe, OpenRLHFProbe
from openrlhf.trainer.ray import launcher as orl_launcher
from openrlhf.trainer.ray import utils as orl_utils
from openrlhf.trainer.ray import vllm_engine as orl_engine
from shapes import IPS

from placement_ray import Cluster
from placement_ray._placement_groups import create_placement_group
from placement_ray.compat.openrlhf import (
    RayActorGroup,
    create_vllm_engines,
    get_bundle_indices,
    placement_group,
)

pytestmark = [pytest.mark.slow, pytest.mark.placement_cluster(**IPS)]

ACTOR = ray.remote(OpenRLHFProbe)
BUNDLE = {"GPU": 1.0, "CPU": 1.0}


@pytest.fixture
def engine_probe(monkeypatch: pytest.MonkeyPatch) -> None:
    """OpenRLHF's vLLM actor replaced by one that reports its bundles (no vLLM here)."""
    monkeypatch.setattr(orl_engine, "RolloutRayActor", ray.remote(EngineProbe))


def actor_seen(group: Any, cluster: Cluster) -> list[tuple[int, int, str]]:
    reports = ray.get([a.seen.remote() for a in group._actor_handlers])
    return [(s["worker_rank"], cluster.rank_of(s["node_id"]), s["visible"]) for s in reports]


def interleaved(cluster: Cluster) -> Any:
    """A group whose bundles alternate nodes 2, 0, 2, 0 (as PACK may leave them)."""
    return create_placement_group(cluster, [BUNDLE] * 4, pin_to=[2, 0, 2, 0]).pg


def engines(pg: Any, tp: int, n: int, **kwargs: Any) -> list[Any]:
    made = create_vllm_engines(n, tp, "model", 0, False, False, True, 128, pg, **kwargs)
    return ray.get([e.seen.remote() for e in made])


def test_actor_ranks_follow_node_gpu_order(placement_cluster: Cluster) -> None:
    group = RayActorGroup(2, 2, ACTOR, cluster=placement_cluster, timeout_s=120)
    # Node 1 (127.0.0.9) has one GPU.
    assert actor_seen(group, placement_cluster) == [
        (0, 0, "0"),
        (1, 0, "1"),
        (2, 1, "0"),
        (3, 2, "0"),
    ]


def test_actor_ranks_on_an_interleaved_group_follow_node_order(placement_cluster: Cluster) -> None:
    pg = interleaved(placement_cluster)
    group = RayActorGroup(2, 2, ACTOR, pg=pg, num_gpus_per_actor=0.2, cluster=placement_cluster)
    assert [n for _, n, _ in actor_seen(group, placement_cluster)] == [0, 0, 2, 2]


def test_engines_keep_their_tensor_parallel_bundles_on_one_node(
    placement_cluster: Cluster, engine_probe: None
) -> None:
    reports = engines(None, 2, 2, cluster=placement_cluster)
    nodes = [{placement_cluster.rank_of(s["node_id"])} for s in reports]
    assert [s["bundle_indices"] for s in reports] == [[0, 1], [2, 3]]
    assert nodes == [{0}, {2}]  # node 1 has one GPU: the second engine skips it


def test_colocated_engines_and_actor_ranks_agree(
    placement_cluster: Cluster, engine_probe: None
) -> None:
    pg = placement_group([BUNDLE] * 4, engine_size=2, cluster=placement_cluster)
    reports = engines(pg, 2, 2, cluster=placement_cluster)
    group = RayActorGroup(2, 2, ACTOR, pg=pg, num_gpus_per_actor=0.2, cluster=placement_cluster)
    ranks = actor_seen(group, placement_cluster)
    assert [s["bundle_indices"] for s in reports] == [[0, 1], [2, 3]]
    assert [placement_cluster.rank_of(s["node_id"]) for s in reports] == [ranks[0][1], ranks[2][1]]


def test_bundle_indices_of_an_interleaved_group_follow_node_order(
    placement_cluster: Cluster,
) -> None:
    pg = interleaved(placement_cluster)
    assert get_bundle_indices(pg, 0, 2, cluster=placement_cluster) == [1, 3]
    assert get_bundle_indices(pg, 1, 2, cluster=placement_cluster) == [0, 2]


# OpenRLHF's own pieces, without the drop-in: each test asserts the bug is still there.


def test_bug_openrlhf_ranks_take_bundle_r_wherever_it_is(placement_cluster: Cluster) -> None:
    pg = interleaved(placement_cluster)
    group = orl_launcher.RayActorGroup(2, 2, ACTOR, pg=pg, num_gpus_per_actor=0.2)
    assert [n for _, n, _ in actor_seen(group, placement_cluster)] == [2, 0, 2, 0]


def test_bug_openrlhf_engine_bundles_disagree_with_actor_ranks(placement_cluster: Cluster) -> None:
    pg = interleaved(placement_cluster)
    engine0 = orl_utils.get_bundle_indices(pg, 0, 2)
    actor_ranks_0_1 = [0, 1]  # OpenRLHF's ranks 0 and 1 sit on bundles 0 and 1
    assert sorted(engine0) != actor_ranks_0_1
