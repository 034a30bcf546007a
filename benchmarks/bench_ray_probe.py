"""Benchmark: from requesting a placement group to holding its bundle order.

On a simulated Ray cluster of 8 nodes x 8 logical GPUs (all on 127.0.0.1, labelled
``node-rank``), time from asking for the group to holding its bundles ordered by
(node rank, physical GPU id), two ways, side by side in one run:

* placement-ray: ``create_placement_group`` (bundle -> node from Ray's table; no probe where
  the group holds whole nodes, tiny fractional probe tasks in per-node waves elsewhere);
* slime-style: one ``num_gpus=1`` actor per bundle returning its node IP and GPU id, then
  a sort by (IP as numbers, GPU id), as slime's ``InfoActor`` / ``sort_key`` do.

Scenarios: whole nodes (64 bundles, target >= 10x) and partial nodes (6 of 8 GPUs per
node, 48 bundles pinned 6 per node, target >= 4x). The table also says whether each
order keeps nodes apart: with a shared IP the slime-style sort interleaves them.

The job's one-time node discovery (one task per node) is done before the timings and is
reported on its own line. Before each timed run both methods get the same start: one idle
Ray worker per node, as right after the job's discovery. placement-ray is also timed right
after a slime-style run, with no such preparation ("after slime-style"), to show its probes
do not depend on it; the targets use the prepared runs.

    python benchmarks/bench_ray_probe.py [--runs 3] [--nodes 8] [--gpus 8] [--partial 6]
"""

from __future__ import annotations

import os

os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")  # before `import ray`

import argparse
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

import ray
from _ray_cluster import simulated_cluster, wait_idle, warm_pool
from _targets import target_line
from ray.util.placement_group import placement_group, remove_placement_group
from ray.util.scheduling_strategies import (
    PlacementGroupSchedulingStrategy,
)

from placement_ray import Cluster
from placement_ray._placement_groups import NODE_ID_LABEL, create_placement_group

BUNDLE = {"GPU": 1.0, "CPU": 1.0}


@ray.remote(num_gpus=1)
class InfoActor:
    """slime's probe: one full-GPU actor per bundle."""

    def get_ip_and_gpu_id(self) -> tuple[str, int]:
        return ray.util.get_node_ip_address(), int(ray.get_gpu_ids()[0])


def slime_sort_key(item: tuple[int, str, int]) -> tuple[list[int], int]:
    _, ip, gpu = item
    return [int(p) for p in ip.split(".")], gpu


def slime_style(
    cluster: Cluster, pins: Sequence[int] | None, count: int
) -> tuple[list[tuple[int, int]], int]:
    """slime's way; returns the order as (node rank, gpu) and the number of probes."""
    selectors = None
    if pins is not None:
        selectors = [{NODE_ID_LABEL: cluster.node(r).node_id} for r in pins]
    pg = placement_group([BUNDLE] * count, strategy="PACK", bundle_label_selector=selectors)
    ray.get(pg.ready(), timeout=300)
    actors = [
        InfoActor.options(  # type: ignore[attr-defined]
            scheduling_strategy=PlacementGroupSchedulingStrategy(
                placement_group=pg, placement_group_bundle_index=i
            )
        ).remote()
        for i in range(count)
    ]
    seen = ray.get([a.get_ip_and_gpu_id.remote() for a in actors], timeout=600)
    ordered = sorted(((i, ip, gpu) for i, (ip, gpu) in enumerate(seen)), key=slime_sort_key)
    table = ray.util.placement_group_table(pg)["bundles_to_node_id"]
    order = [(cluster.rank_of(table[i]), gpu) for i, _, gpu in ordered]
    for actor in actors:
        ray.kill(actor)
    remove_placement_group(pg)
    return order, count


def ours(
    cluster: Cluster, pins: Sequence[int] | None, count: int
) -> tuple[list[tuple[int, int]], int]:
    group = create_placement_group(
        cluster, [BUNDLE] * count, pin_to=list(pins) if pins else None, timeout_s=300
    )
    order = list(zip(group.node_ranks, group.gpu_ids, strict=True))
    group.remove()
    return order, group.probed


def nodes_kept_apart(order: list[tuple[int, int]]) -> bool:
    """True when each node's bundles are contiguous and ascending by GPU."""
    return order == sorted(order)


def timed(
    method: Callable[..., tuple[list[tuple[int, int]], int]], *args: Any, warm: bool = True
) -> tuple[float, list[tuple[int, int]], int]:
    wait_idle()
    if warm:
        warm_pool(args[0])
    started = time.perf_counter()
    order, probed = method(*args)
    elapsed = time.perf_counter() - started
    return elapsed, order, probed


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="runs per method and scenario")
    parser.add_argument("--nodes", type=int, default=8)
    parser.add_argument("--gpus", type=int, default=8, help="logical GPUs per node")
    parser.add_argument("--partial", type=int, default=6, help="GPUs per node, partial case")
    args = parser.parse_args(argv)

    with simulated_cluster(args.nodes, args.gpus):
        started = time.perf_counter()
        cluster = Cluster(args.nodes, timeout_s=300, export_env=False)
        print(
            f"node discovery (once per job, not in the timings): "
            f"{time.perf_counter() - started:.2f}s"
        )
        whole = args.nodes * args.gpus
        pins = [r for r in range(args.nodes) for _ in range(args.partial)]
        scenarios = [
            (f"whole nodes, {whole} bundles", None, whole, 10.0),
            (
                f"partial {args.partial}/{args.gpus} per node, {len(pins)} bundles",
                pins,
                len(pins),
                4.0,
            ),
        ]
        rows = []
        targets: list[str] = []
        ok = True
        for title, scenario_pins, count, target in scenarios:
            results: dict[str, list[tuple[float, list[tuple[int, int]], int]]] = {
                "placement-ray": [],
                "placement-ray, after slime-style": [],
                "slime-style": [],
            }
            for _ in range(args.runs):  # interleaved, so all see the same cluster state
                results["placement-ray"].append(timed(ours, cluster, scenario_pins, count))
                results["slime-style"].append(timed(slime_style, cluster, scenario_pins, count))
                results["placement-ray, after slime-style"].append(
                    timed(ours, cluster, scenario_pins, count, warm=False)
                )
            medians = {k: statistics.median(r[0] for r in v) for k, v in results.items()}
            speedup = medians["slime-style"] / medians["placement-ray"]
            after = medians["slime-style"] / medians["placement-ray, after slime-style"]
            met = speedup >= target
            ok = ok and met
            targets.append(
                target_line(
                    f"ordered placement group, {title}",
                    f"{medians['placement-ray']:.3f} s",
                    f"slime-style {medians['slime-style']:.3f} s",
                    speedup,
                    f"speed-up >= {target:g}x",
                    met,
                )
            )
            for method, runs in results.items():
                order = runs[-1][1]
                rows.append(
                    (
                        title,
                        method,
                        f"{medians[method]:.3f}",
                        " ".join(f"{r[0]:.2f}" for r in runs),
                        str(runs[-1][2]),
                        "yes" if nodes_kept_apart(order) else "NO (interleaved)",
                        ",".join(str(node) for node, _ in order[: 2 * args.nodes]) + ",...",
                    )
                )
            rows.append(
                (
                    title,
                    "speedup",
                    f"{speedup:.1f}x",
                    f"target >= {target:g}x",
                    "",
                    "met" if met else "MISSED",
                    f"(after slime-style: {after:.1f}x)",
                )
            )
        header = (
            "scenario",
            "method",
            "median s",
            "runs s",
            "probes",
            "nodes kept apart",
            "node rank of bundles in order",
        )
        widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
        for row in [header, *rows]:
            print("  ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=True)))
        print("\n".join(targets))
        return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
