"""Benchmark: fabric health in the plan, and choosing spares by NVLink domain.

Three parts, each printed side by side with its baseline:

1. **Health.** 10,000 nodes x 4 GPUs in NVLink domains of 18 nodes (NVL72 racks), every
   GPU with its own fabric record as node snapshots give it, ``actor: {placement: all,
   nvlink_group: 8}``. ``degraded`` has 3% of the domains degraded (one GPU of one node
   each reports degraded bandwidth): the plan decodes every GPU's fabric and leaves those
   domains free. Baselines: ``no fabric`` (the same domains, no fabric record: nothing to
   decode) and ``healthy`` (every record healthy). Target: ``degraded`` within 1.2x of
   ``no fabric`` (median time, judged on the CPU time as ``_targets.py`` says; the wall
   clock printed beside).
2. **Recovery's choice.** The choice of a spare for one lost node among 1,000 spares
   (``--spares``) in 56 domains, as a live recovery makes it (core's ``SpareChooser``: the
   profiles, the domain queues, the choice), and the same step of ``replan`` on a plan
   just unpickled (as a live recovery gets it from the driver), beside the time to plan
   those 11,000 nodes. Target: both under 10 ms.
3. **Spare choice and ``Plan.spares()`` at scale** (issue 30: they were cubic and
   quadratic): ``replan`` losing 1,000 and 10,000 nodes of a plan with as many spares,
   and ``Plan.spares()`` of 10,000 nodes with one robot each. The growth 1k -> 10k is
   printed; linear is about 10x.

Usage: ``python benchmarks/bench_fabric_spares.py [--nodes 10000] [--repeats 5]``
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

from _targets import target_line

GPUS = 4
RACK = 18
GROUP = 8
DEGRADED_SHARE = 0.03
HEALTH_TARGET = 1.2
CHOICE_TARGET_S = 0.010
CLUSTER = "6f1d2c3b-4a59-4e8f-9a7b-0c1d2e3f4a5b"
HEALTHY_MASK = 0b1010_1010 | 1 << 8  # every field false, configuration none
DEGRADED_BW = HEALTHY_MASK & ~0b11 | 1


def _median(run: Callable[[], object], repeats: int) -> tuple[float, float]:
    run()  # warm-up
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return statistics.median(times), min(times)


def _interleaved(
    runs: dict[str, Callable[[], object]], repeats: int
) -> dict[str, tuple[float, float, float]]:
    """``(median wall, best wall, median CPU)`` seconds of each run, timed round by round
    after a warm-up.

    Each run starts from a collected heap (the collector stays on during it): the three
    inventories of 10,000 nodes keep some 300,000 objects alive, and a full collection
    owed to the previous run's allocations (20-30 ms here) otherwise lands in whichever
    run comes next, which moved the median by 1.2-1.6x from one run of this script to the
    next.
    """
    times: dict[str, list[float]] = {name: [] for name in runs}
    cpu: dict[str, list[float]] = {name: [] for name in runs}
    for round_ in range(repeats + 1):
        for name, run in runs.items():
            gc.collect()
            start, start_cpu = time.perf_counter(), time.process_time()
            run()
            if round_:
                times[name].append(time.perf_counter() - start)
                cpu[name].append(time.process_time() - start_cpu)
    return {
        name: (statistics.median(t), min(t), statistics.median(cpu[name]))
        for name, t in times.items()
    }


def _racks(num_nodes: int, fabric: str) -> Any:
    """``fabric``: ``none``, ``healthy`` or ``degraded`` (3% of the racks)."""
    from placement_core import Accelerator, Fabric, Inventory, Node

    racks = -(-num_nodes // RACK)
    sick = set(range(0, racks, round(1 / DEGRADED_SHARE))) if fabric == "degraded" else set()
    nodes = []
    for rank in range(num_nodes):
        rack = rank // RACK
        domain = f"{CLUSTER}/{rack}"
        accelerators = tuple(
            Accelerator(
                index=i,
                model="GB200",
                fabric=None
                if fabric == "none"
                else Fabric(
                    CLUSTER,
                    rack,
                    "completed",
                    "success",
                    DEGRADED_BW if rack in sick and rank % RACK == 0 and i == 0 else HEALTHY_MASK,
                ),
            )
            for i in range(GPUS)
        )  # a tuple per node, as snapshots give them
        nodes.append(Node(rank, f"node-{rank}", accelerators=accelerators, nvlink_domain=domain))
    return Inventory(tuple(nodes)), len(sick)


def health_part(num_nodes: int, repeats: int) -> list[str]:
    from placement_core import load_config, plan

    config = load_config(
        {
            "cluster": {
                "num_nodes": num_nodes,
                "component_placement": {"actor": {"placement": "all", "nvlink_group": GROUP}},
            }
        }
    )
    rows = []
    inventories = {name: _racks(num_nodes, name) for name in ("none", "healthy", "degraded")}
    inventory, sick = inventories["degraded"]
    free = [w for w in plan(config, inventory).warnings if "degraded" in w]
    if len(free) != sick:
        raise SystemExit(f"expected {sick} degraded racks left free, got {len(free)}")
    # Interleaved round by round, so load on the machine hits the three alike.
    figures = _interleaved(
        {name: lambda inv=inv: plan(config, inv) for name, (inv, _) in inventories.items()},
        repeats,
    )
    base = figures["none"][2]
    labels = {"none": "no fabric", "healthy": "healthy", "degraded": "3% degraded"}
    for name, (median, best, cpu) in figures.items():
        rows.append(
            f"  {labels[name]:<12} {median:>8.3f} {best:>8.3f} {cpu:>8.3f} {cpu / base:>7.2f}x"
        )
    ratio = figures["degraded"][2] / base
    verdict = "met" if ratio <= HEALTH_TARGET else "MISSED"
    rows.append(f"  target: 3% degraded within {HEALTH_TARGET}x of no fabric (CPU): {verdict}")
    rows.append(
        target_line(
            f"plan() {num_nodes:,} nodes, 3% of racks degraded, CPU",
            f"{figures['degraded'][2]:.3f} s",
            f"no fabric {base:.3f} s",
            ratio,
            f"<= {HEALTH_TARGET}x",
            ratio <= HEALTH_TARGET,
        )
    )
    return rows


def choice_part(spares: int, repeats: int) -> list[str]:
    import pickle

    from placement_core import Inventory, plan
    from placement_core._fabric_plan import fabric_health
    from placement_core._replan import _choose_spares, _on_lost, plan_health
    from placement_core._spare_choice import SpareChooser

    used = 10_000
    num_nodes = used + spares
    inventory, _ = _racks(num_nodes, "none")
    config = {
        "cluster": {
            "num_nodes": num_nodes,
            "spare_nodes": f"{used}-{num_nodes - 1}",
            "component_placement": {
                "actor": {"placement": f"0-{used * GPUS - 1}", "nvlink_group": GROUP}
            },
        }
    }
    planned = plan(config, Inventory(inventory.nodes))
    lost = frozenset({used // 2})
    held = _on_lost(planned, lost)
    free = list(planned.config.spare_nodes)
    health = plan_health(planned)

    def choose() -> object:
        chooser = SpareChooser(planned, free, lost, health)
        return chooser.choose(used // 2, held[used // 2])

    median, best = _median(choose, repeats)
    # A live recovery runs in another process than the planner: its plan was pickled
    # (the fabric health decoded at plan time travels with it).
    cold = []
    for _ in range(repeats):
        unpickled = pickle.loads(pickle.dumps(planned))
        start = time.perf_counter()
        _choose_spares(unpickled, held, free, lost)
        cold.append(time.perf_counter() - start)
    cold_median = statistics.median(cold)
    decode = _median(lambda: fabric_health(planned.inventory), repeats)[0]
    whole = _median(lambda: plan(config, Inventory(inventory.nodes)), 3)[0]
    verdict = "met" if max(median, cold_median) < CHOICE_TARGET_S else "MISSED"
    return [
        f"  one lost node, {spares:,} spares (SpareChooser): median {median * 1000:.2f} ms, "
        f"best {best * 1000:.2f} ms",
        f"  replan's choice step on an unpickled plan: median {cold_median * 1000:.2f} ms, "
        f"best {min(cold) * 1000:.2f} ms",
        f"  (a plan that lost its fabric health decodes it first: {decode * 1000:.2f} ms for "
        f"{num_nodes:,} nodes)",
        f"  the {num_nodes:,}-node plan itself: {whole:.3f} s; choice / plan = "
        f"{cold_median / whole:.4f}",
        f"  target: both < {CHOICE_TARGET_S * 1000:.0f} ms: {verdict}",
        target_line(
            f"spare choice for 1 lost node among {spares:,} spares, unpickled plan",
            f"{cold_median * 1000:.2f} ms (in process {median * 1000:.2f} ms)",
            f"the {num_nodes:,}-node plan {whole:.3f} s",
            cold_median / whole,
            f"< {CHOICE_TARGET_S * 1000:.0f} ms",
            max(median, cold_median) < CHOICE_TARGET_S,
        ),
    ]


def scale_part(repeats: int) -> list[str]:
    from placement_core import Inventory, plan, replan

    rows = []
    replans: dict[int, float] = {}
    spares_of: dict[int, float] = {}
    for lost in (1_000, 10_000):
        num_nodes = 2 * lost
        config = {
            "cluster": {
                "num_nodes": num_nodes,
                "spare_nodes": f"{lost}-{num_nodes - 1}",
                "component_placement": {"actor": f"0-{lost * 8 - 1}"},
            }
        }
        planned = plan(config, Inventory.uniform(num_nodes, 8))
        replans[lost] = _median(lambda p=planned, n=lost: replan(p, f"0-{n - 1}"), repeats)[0]
        robots = {
            "type": "Franka",
            "configs": [
                {"robot_ip": f"10.0.{r // 250}.{r % 250}", "node_rank": r} for r in range(num_nodes)
            ],
        }
        with_robots = {
            "cluster": {
                "num_nodes": num_nodes,
                "spare_nodes": f"{lost}-{num_nodes - 1}",
                "node_groups": [{"label": "arm", "node_ranks": "all", "hardware": robots}],
                "component_placement": {"ctl": {"node_group": "arm", "placement": f"0-{lost - 1}"}},
            }
        }
        robot_plan = plan(with_robots, Inventory.uniform(num_nodes, 0))

        def spares(p: Any = robot_plan) -> object:
            p._cache.pop("spares", None)
            return p.spares()

        spares_of[lost] = _median(spares, repeats)[0]
        rows.append(
            f"  {lost:>6,} lost of {num_nodes:>6,} nodes: replan {replans[lost]:>7.3f} s   "
            f"Plan.spares() with {num_nodes:,} robots {spares_of[lost]:>7.3f} s"
        )
    rows.append(
        f"  growth 1k -> 10k: replan {replans[10_000] / replans[1_000]:.1f}x, Plan.spares() "
        f"{spares_of[10_000] / spares_of[1_000]:.1f}x (linear: ~10x)"
    )
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--nodes", type=int, default=10_000)
    parser.add_argument("--spares", type=int, default=1_000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    print(
        f"1. health: {args.nodes:,} nodes x {GPUS} GPUs, racks of {RACK}, actor all with "
        f"nvlink_group {GROUP}; median of {args.repeats}"
    )
    print(f"  {'fabric':<12} {'median s':>8} {'best s':>8} {'CPU s':>8} {'CPU x none':>8}")
    rows = health_part(args.nodes, args.repeats)
    print("\n".join(rows))
    print("2. recovery's spare choice")
    choice = choice_part(args.spares, max(args.repeats, 20))
    print("\n".join(choice))
    print("3. spare choice and Plan.spares() at scale")
    print("\n".join(scale_part(max(1, args.repeats // 2))))
    missed = [row for row in (*rows, *choice) if "MISSED" in row]
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
