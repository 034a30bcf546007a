"""What makes recovery's spare choice fast keeps its answers: fabric health decoded per
distinct registration, equal node profiles as one object, the plan's fabric health kept
by ``replan`` and by pickling."""

from __future__ import annotations

import pickle

from hypothesis import given, settings
from hypothesis import strategies as st

from placement_core import Accelerator, Fabric, Inventory, Node, Plan, load_config, plan, replan
from placement_core._fabric import degraded_nodes, node_health
from placement_core._fabric_plan import fabric_health
from placement_core._replan import plan_health
from placement_core._spares import node_profiles

CLUSTER = "6f1d2c3b-4a59-4e8f-9a7b-0c1d2e3f4a5b"
HEALTHY = 2 | 2 << 2 | 2 << 4 | 2 << 6 | 1 << 8
DEGRADED_BW = HEALTHY & ~0b11 | 1

# Masks every field of which decodes: each two-bit field 0-2, the configuration 0-5.
masks = st.builds(
    lambda a, b, c, d, e: a | b << 2 | c << 4 | d << 6 | e << 8,
    *[st.integers(0, 2)] * 4,
    st.integers(0, 5),
)
fabrics = st.none() | st.builds(
    Fabric,
    st.just(CLUSTER),
    st.integers(0, 2),
    st.sampled_from(["not_supported", "not_started", "in_progress", "completed"]),
    st.sampled_from(["success", "not_ready", "unknown_error"]),
    masks,
)
trays = st.lists(fabrics, min_size=1, max_size=4).map(
    lambda fs: tuple(Accelerator(index=i, fabric=f) for i, f in enumerate(fs))
)


@settings(max_examples=80, deadline=None)
@given(st.lists(trays, min_size=1, max_size=8), st.lists(st.integers(0, 7), max_size=8))
def test_degraded_nodes_are_the_nodes_whose_own_health_is_degraded(
    shapes: list[tuple[Accelerator, ...]], shared: list[int]
) -> None:
    # Some nodes share one accelerator tuple, as a uniform inventory's nodes do.
    picks = [shapes[i % len(shapes)] for i in [*range(len(shapes)), *shared]]
    nodes = [Node(rank, f"n{rank}", accelerators=accs) for rank, accs in enumerate(picks)]
    expected = {n.rank: h for n in nodes if (h := node_health(n)) is not None}
    assert degraded_nodes(nodes) == expected


def test_a_cluster_without_fabric_records_has_no_degraded_node() -> None:
    nodes = [
        Node(rank, f"n{rank}", accelerators=(Accelerator(0), Accelerator(1))) for rank in range(5)
    ]
    assert degraded_nodes(nodes) == {}


def _rack_node(rank: int, mask: int = HEALTHY) -> Node:
    accelerators = tuple(
        Accelerator(
            index=i,
            model="GB200",
            fabric=Fabric(CLUSTER, rank // 2, "completed", "success", mask if i == 0 else HEALTHY),
        )
        for i in range(2)
    )  # a tuple per node, as snapshots give them
    return Node(rank, f"n{rank}", accelerators=accelerators, nvlink_domain=f"{CLUSTER}/{rank // 2}")


def test_nodes_with_equal_profiles_get_one_profile_object() -> None:
    inventory = Inventory(tuple(_rack_node(rank) for rank in range(6)))
    config = load_config({"cluster": {"num_nodes": 6, "component_placement": {"a": "0-1"}}})
    profiles = node_profiles(config, inventory, range(6))
    assert len({id(p) for p in profiles.values()}) == 1


def test_nodes_with_different_profiles_keep_different_profiles() -> None:
    nodes = [
        _rack_node(0),
        _rack_node(1),
        Node(2, "n2", accelerators=(Accelerator(0, model="H100"), Accelerator(1, model="H100"))),
    ]
    config = load_config(
        {
            "cluster": {
                "num_nodes": 3,
                "node_groups": [{"label": "first", "node_ranks": "0"}],
                "component_placement": {"a": "0-1"},
            }
        }
    )
    profiles = node_profiles(config, Inventory(tuple(nodes)), range(3))
    assert profiles[0] != profiles[1] != profiles[2] != profiles[0]


def _degraded_plan() -> Plan:
    nodes = tuple(_rack_node(rank, DEGRADED_BW if rank == 5 else HEALTHY) for rank in range(6))
    config = {
        "cluster": {
            "num_nodes": 6,
            "spare_nodes": "4-5",
            "fabric_health": "warn",
            "component_placement": {"actor": {"placement": "0-7", "nvlink_group": 2}},
        }
    }
    return plan(config, Inventory(nodes))


def test_a_pickled_plan_keeps_its_fabric_health() -> None:
    planned = _degraded_plan()
    again = pickle.loads(pickle.dumps(planned))
    assert again._cache["fabric_health"] == fabric_health(planned.inventory)
    assert 5 in again._cache["fabric_health"].nodes


def test_a_replanned_plan_keeps_the_fabric_health_of_its_inventory() -> None:
    result = replan(_degraded_plan(), 1)
    assert result.plan._cache["fabric_health"] == fabric_health(result.plan.inventory)


def test_a_plan_without_its_fabric_health_decodes_it_on_first_need() -> None:
    planned = _degraded_plan()
    planned._cache.clear()
    assert plan_health(planned) == fabric_health(planned.inventory)
