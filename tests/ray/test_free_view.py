"""Planning on what is free (no Ray): the need, what counts as taken, the free view."""

from __future__ import annotations

from placement_core import Accelerator, AcceleratorProcess, Inventory, Node, load_config, plan
from placement_ray import Cluster
from placement_ray._free_view import free_view, need_of, plan_slots, ray_taken
from placement_ray._lease_state import LeaseBook, NodeCapacity, Request, Slot


def view(*nodes: Node) -> Cluster:
    """A ``Cluster`` of these nodes, without Ray (only its view is used here)."""
    cluster = object.__new__(Cluster)
    cluster.inventory = Inventory(nodes)
    cluster._rank_of = {n.node_id: n.rank for n in nodes}
    return cluster


def node(rank: int, gpus: int = 4, busy: tuple[int, ...] = ()) -> Node:
    accelerators = tuple(
        Accelerator(i, processes=(AcceleratorProcess(100 + i),) if i in busy else ())
        for i in range(gpus)
    )
    return Node(rank, f"n{rank}", accelerators=accelerators)


def book_of(cluster: Cluster) -> LeaseBook:
    return LeaseBook(
        NodeCapacity(n.node_id, n.rank, tuple((a.index, None) for a in n.accelerators))
        for n in cluster.nodes
    )


def test_the_need_is_accelerators_per_node_with_spares_whole() -> None:
    cluster = view(node(0), node(1), node(2))
    config = load_config(
        {"cluster": {"num_nodes": 3, "spare_nodes": [2], "component_placement": {"a": "0-5"}}}
    )
    assert need_of(config, cluster, ()) == (4, 2, 4)


def test_gpus_ray_holds_beyond_the_leases_count_as_taken_highest_first() -> None:
    cluster = view(node(0), node(1))
    book = book_of(cluster)
    book.acquire(Request("mine", "o", 0, (Slot("n0", 0),), (1,)), 1.0)
    available = {"n0": {"GPU": 1.0}, "n1": {"GPU": 4.0}}  # Ray holds 3 on n0, 1 of them leased
    assert ray_taken(cluster, book, available) == {"n0": (2, 3)}


def test_busy_gpus_in_the_snapshot_count_as_taken() -> None:
    cluster = view(node(0, busy=(1,)), node(1))
    available = {"n0": {"GPU": 4.0}, "n1": {"GPU": 4.0}}
    assert ray_taken(cluster, book_of(cluster), available) == {"n0": (1,)}


def test_the_free_view_renumbers_the_chosen_nodes_and_keeps_their_free_gpus() -> None:
    cluster = view(node(0), node(1), node(2))
    book = book_of(cluster)
    book.acquire(Request("other", "o", 0, tuple(Slot("n0", i) for i in range(3)), (3,)), 1.0)
    book.foreign = {"n1": (0,)}
    free = free_view(cluster, (2, 4), book)
    assert free is not None
    assert [(n.rank, n.node_id, n.accelerator_ids) for n in free.nodes] == [
        (0, "n1", (1, 2, 3)),
        (1, "n2", (0, 1, 2, 3)),
    ]
    assert free.rank_of("n2") == 1


def test_a_need_that_does_not_fit_has_no_free_view() -> None:
    cluster = view(node(0), node(1))
    book = book_of(cluster)
    book.acquire(Request("other", "o", 0, (Slot("n1", 0),), (1,)), 1.0)
    assert free_view(cluster, (4, 4), book) is None


def test_a_plan_on_the_free_view_uses_free_gpus_only() -> None:
    cluster = view(node(0), node(1))
    book = book_of(cluster)
    book.acquire(Request("other", "o", 0, (Slot("n0", 0), Slot("n0", 1)), (2,)), 1.0)
    free = free_view(cluster, (2,), book)
    assert free is not None
    config = {"cluster": {"num_nodes": 1, "component_placement": {"a": "0-1"}}}
    slots = plan_slots(plan(config, free.inventory))
    assert [(s.node_id, s.accelerator) for s in slots] == [("n0", 2), ("n0", 3)]


def test_a_reservation_ends_its_lease_once_with_its_groups() -> None:
    from placement_ray._reservation import Reservation

    class Lease:
        ended = 0

        def release(self) -> None:
            self.ended += 1

    lease = Lease()
    reservation = Reservation(view(node(0)))
    reservation.lease = lease
    reservation.release()
    reservation.release()
    assert lease.ended == 1


def test_every_gpu_of_a_node_ray_no_longer_lists_counts_as_taken() -> None:
    cluster = view(node(0), node(1))
    available = {"n0": {"GPU": 4.0}}  # n1 is lost: Ray lists live nodes only
    assert ray_taken(cluster, book_of(cluster), available) == {"n1": (0, 1, 2, 3)}


def test_a_node_whose_gpus_ray_holds_all_counts_them_all_as_taken() -> None:
    cluster = view(node(0), node(1))
    available = {"n0": {"GPU": 4.0}, "n1": {"CPU": 4.0}}  # Ray drops a resource at zero
    assert ray_taken(cluster, book_of(cluster), available) == {"n1": (0, 1, 2, 3)}
