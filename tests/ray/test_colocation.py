"""GPU shares: quantised, checked per GPU before anything exists; who shares which GPU."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from ray.util.placement_group import placement_group_table

from placement_core import plan
from placement_core._inventory import Inventory
from placement_ray._cluster import Cluster
from placement_ray._colocation import (
    GpuShare,
    check_shares,
    default_share,
    validate_share,
)
from placement_ray._launch import default_shares, launch, map_gpus
from placement_ray.demo.workers import DemoWorker
from placement_ray.errors import ArgumentError, OversubscribedGPUError


@pytest.mark.parametrize(("given_share", "kept"), [(1, 1.0), (0.4, 0.4), (0.33333, 0.3333)])
def test_share_is_rounded_down_to_rays_quantum(given_share: float, kept: float) -> None:
    assert validate_share("gpu_share", given_share) == kept


@pytest.mark.parametrize("bad", [0, -0.1, 1.5, float("nan"), True, "0.5", None, 0.00001])
def test_share_outside_zero_one_is_an_error_naming_the_argument(bad: object) -> None:
    with pytest.raises(ArgumentError, match="gpu_share"):
        validate_share("gpu_share", bad)


@pytest.mark.parametrize(("sharers", "share"), [(1, 1.0), (2, 0.5), (3, 0.3333), (8, 0.125)])
def test_default_share_lets_every_sharer_fit(sharers: int, share: float) -> None:
    assert default_share(sharers) == share
    assert sharers * default_share(sharers) <= 1


def test_trainer_critic_and_rollout_fit_one_gpu() -> None:
    totals = check_shares(
        [GpuShare("actor rank 0", 0, 3, 0.4), GpuShare("critic rank 0", 0, 3, 0.4)],
        already={(0, 3): 0.2},
    )
    assert totals == {(0, 3): pytest.approx(1.0)}


def test_oversubscribed_gpu_names_the_gpu_every_worker_and_its_share() -> None:
    with pytest.raises(OversubscribedGPUError) as caught:
        check_shares(
            [GpuShare("actor rank 0", 1, 2, 0.8), GpuShare("rollout rank 0", 1, 2, 0.4)],
            already={(1, 2): 0.1},
        )
    message = str(caught.value)
    assert "node 1 GPU 2: 1.3" in message
    assert "actor rank 0 0.8" in message
    assert "rollout rank 0 0.4" in message
    assert "in use earlier 0.1" in message
    assert caught.value.gpus[0][0] == "node 1 GPU 2"


@given(
    st.lists(st.tuples(st.integers(0, 2), st.integers(0, 3), st.integers(1, 10_000)), max_size=12)
)
def test_check_passes_exactly_when_every_gpu_sums_to_at_most_one(
    items: list[tuple[int, int, int]],
) -> None:
    shares = [GpuShare(f"w{i}", n, g, q / 10_000) for i, (n, g, q) in enumerate(items)]
    per_gpu: dict[tuple[int, int], int] = {}
    for n, g, q in items:
        per_gpu[(n, g)] = per_gpu.get((n, g), 0) + q
    fits = all(total <= 10_000 for total in per_gpu.values())
    if fits:
        assert set(check_shares(shares)) == set(per_gpu)
    else:
        with pytest.raises(OversubscribedGPUError):
            check_shares(shares)


def test_launch_checks_sums_before_creating_anything(placement_cluster: Cluster) -> None:
    config = {
        "cluster": {
            "num_nodes": 3,
            "component_placement": {"actor,critic": "0-1", "rollout": "0-1"},
        }
    }
    before = set(placement_group_table())
    with pytest.raises(OversubscribedGPUError, match="node 0 GPU 0"):
        launch(
            config,
            dict.fromkeys(("actor", "critic", "rollout"), DemoWorker),
            placement_cluster,
            gpu_share={"actor": 0.4, "critic": 0.4, "rollout": 0.3},
        )
    assert set(placement_group_table()) == before


def test_default_shares_split_each_gpu_between_every_worker_using_it() -> None:
    strided = plan(
        {
            "cluster": {
                "num_nodes": 1,
                "component_placement": {
                    "actor": "0-7",
                    "rollout": {"node_group": "cluster", "placement": "0-7:0-3", "stride": 2},
                },
            }
        },
        Inventory.uniform(1, 8),
    )
    assert default_shares(strided) == {"actor": 0.5, "rollout": 0.5}
    assert default_shares(strided, {"rollout": 0.2}) == {"actor": 0.8, "rollout": 0.2}
    three = plan(
        {
            "cluster": {
                "num_nodes": 1,
                "component_placement": {"actor,critic": "0-1", "rollout": "0-1"},
            }
        },
        Inventory.uniform(1, 2),
    )
    assert default_shares(three) == dict.fromkeys(("actor", "critic", "rollout"), 0.3333)


def test_default_shares_reject_unknown_components() -> None:
    alone = plan(
        {"cluster": {"num_nodes": 1, "component_placement": {"actor": "0-1"}}},
        Inventory.uniform(1, 2),
    )
    assert default_shares(alone) == {"actor": 1.0}
    with pytest.raises(ArgumentError, match=r"unknown component\(s\) \['critic'\]"):
        default_shares(alone, {"critic": 0.5})


@given(
    st.dictionaries(
        st.integers(0, 3),
        st.tuples(st.sets(st.integers(0, 7), min_size=1), st.sets(st.integers(0, 7), min_size=1)),
        min_size=1,
    )
)
def test_gpu_map_is_an_order_keeping_bijection_per_node(
    nodes: dict[int, tuple[set[int], set[int]]],
) -> None:
    planned, held = [], []
    bundle = 0
    for node, (wanted, got) in nodes.items():
        size = min(len(wanted), len(got))
        wanted_ids, got_ids = sorted(wanted)[:size], sorted(got)[:size]
        planned += [(node, g) for g in wanted_ids]
        for physical in reversed(got_ids):  # Ray's bundle order is not GPU order
            held.append((node, physical, bundle))
            bundle += 1
    mapping = map_gpus(planned, held)
    assert set(mapping) == set(planned)
    for node in nodes:
        keys = sorted(k for k in mapping if k[0] == node)
        physical = [mapping[k][0] for k in keys]
        assert physical == sorted({p for n, p, _ in held if n == node})
        if [g for _, g in keys] == physical:
            assert all(mapping[k][0] == k[1] for k in keys)  # identity where Ray held them
    assert len({b for _, b in mapping.values()}) == len(mapping)


def test_gpu_map_rejects_a_node_holding_another_number_of_gpus() -> None:
    with pytest.raises(ArgumentError, match="do not match the planned GPUs"):
        map_gpus([(0, 0), (0, 1)], [(0, 5, 0)])
