"""Benchmark: what keeping groups inside NVLink domains costs the planner.

10,000 nodes x 4 GPUs in NVLink domains of 18 nodes (NVL72 racks; the last rack is
partly filled), a trainer on every GPU and a rollout of one 4-GPU engine per node. The
trainer is planned side by side:

- ``plain``: ``actor: all``, no constraint (the baseline);
- ``all+group``: ``actor: {placement: all, nvlink_group: 8}``: the planner places the
  groups rack by rack and checks them;
- ``ranks+group``: ``actor: {placement: 0-39999, nvlink_group: 8}``: an explicit rank
  list, checked;
- ``ordered+group``: as ``all+group``, on an inventory whose racks are shuffled (the
  same rack sizes, nodes of one rack scattered over the ranks) with ``node_order:
  nvlink_domain``, so the plan also renumbers all 10,000 nodes.

Every variant runs ``--repeats`` times, interleaved round by round after one warm-up
round, in one process; the inventory is
built once per variant, outside the timing (as a caller that plans several configs on
one cluster would). Reported: the median wall and CPU time of each and their ratios to
``plain`` in the same mode.

Target: every constrained variant within 2x the median time of ``plain``, in the
default mode, judged on the CPU time (see ``_targets.py``), the wall clock printed beside.

Usage: ``python benchmarks/bench_nvlink.py [--nodes 10000] [--repeats 7]``
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
import time
from typing import Any

from _targets import target_line

GPUS_PER_NODE = 4
NODES_PER_DOMAIN = 18
GROUP = 8
TARGET_RATIO = 2.0


def _config(num_nodes: int, actor: Any, **section: Any) -> dict[str, Any]:
    return {
        "cluster": {
            "num_nodes": num_nodes,
            "component_placement": {
                "actor": actor,
                "rollout": f"all:0-{num_nodes - 1}",
            },
            **section,
        }
    }


#: Shuffles the racks: node ``i`` sits where node ``i * SHUFFLE mod n`` would (a prime
#: that divides no benchmark size, so this is a permutation).
SHUFFLE = 7919


def _inventory(num_nodes: int, shuffled: bool) -> Any:
    from placement_core import Inventory

    def rack(rank: int) -> str:
        position = rank * SHUFFLE % num_nodes if shuffled else rank
        return f"rack-{position // NODES_PER_DOMAIN}"

    base = Inventory.uniform(num_nodes, GPUS_PER_NODE, model="GB200")
    return Inventory(
        tuple(dataclasses.replace(node, nvlink_domain=rack(node.rank)) for node in base.nodes)
    )


def variants(num_nodes: int) -> dict[str, tuple[Any, Any]]:
    """Per variant, its loaded config and inventory."""
    from placement_core import load_config

    grouped = {"placement": "all", "nvlink_group": GROUP}
    ranks = {"placement": f"0-{num_nodes * GPUS_PER_NODE - 1}", "nvlink_group": GROUP}
    racked, interleaved = _inventory(num_nodes, False), _inventory(num_nodes, True)
    return {
        "plain": (load_config(_config(num_nodes, "all")), racked),
        "all+group": (load_config(_config(num_nodes, grouped)), racked),
        "ranks+group": (load_config(_config(num_nodes, ranks)), racked),
        "ordered+group": (
            load_config(_config(num_nodes, grouped, node_order="nvlink_domain")),
            interleaved,
        ),
    }


MODES = {"default": False}


def time_variants(num_nodes: int, repeats: int) -> dict[tuple[str, str], dict[str, float]]:
    """Median wall and CPU seconds of each variant and mode, interleaved round by round."""
    from placement_core import plan

    setups = variants(num_nodes)
    runs = [(name, mode) for mode in MODES for name in setups]
    wall: dict[tuple[str, str], list[float]] = {run: [] for run in runs}
    cpu: dict[tuple[str, str], list[float]] = {run: [] for run in runs}
    for round_ in range(repeats + 1):
        for name, mode in runs:
            config, inventory = setups[name]
            start, start_cpu = time.perf_counter(), time.process_time()
            result = plan(config, inventory)
            elapsed, elapsed_cpu = time.perf_counter() - start, time.process_time() - start_cpu
            if len(result.components["actor"]) != num_nodes * GPUS_PER_NODE:
                raise SystemExit(f"{name}: the trainer lost processes")
            if round_:  # the first round warms up
                wall[name, mode].append(elapsed)
                cpu[name, mode].append(elapsed_cpu)
    return {
        run: {
            "median": statistics.median(wall[run]),
            "best": min(wall[run]),
            "cpu": statistics.median(cpu[run]),
        }
        for run in runs
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--nodes", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    figures = time_variants(args.nodes, args.repeats)
    racks = -(-args.nodes // NODES_PER_DOMAIN)
    print(
        f"{args.nodes:,} nodes x {GPUS_PER_NODE} GPUs, {racks} NVLink domains of "
        f"{NODES_PER_DOMAIN} nodes, trainer nvlink_group {GROUP}; median of {args.repeats}"
    )
    print(
        f"{'mode':<9} {'variant':<14} {'median s':>9} {'best s':>8} {'cpu s':>7} "
        f"{'x plain':>8} {'cpu x':>6}"
    )
    missed, targets = [], []
    for (name, mode), row in figures.items():
        base = figures["plain", mode]
        ratio = row["cpu"] / base["cpu"]
        print(
            f"{mode:<9} {name:<14} {row['median']:>9.3f} {row['best']:>8.3f} "
            f"{row['cpu']:>7.3f} {row['median'] / base['median']:>8.2f} {ratio:>6.2f}"
        )
        if mode == "default" and name != "plain":
            if ratio > TARGET_RATIO:
                missed.append(f"{name} ({ratio:.2f}x)")
            targets.append(
                target_line(
                    f"plan() {args.nodes:,} nodes, {name}, CPU",
                    f"{row['cpu']:.3f} s",
                    f"plain {base['cpu']:.3f} s",
                    ratio,
                    f"<= {TARGET_RATIO:g}x",
                    ratio <= TARGET_RATIO,
                )
            )
    if missed:
        print(f"MISSED: within {TARGET_RATIO}x of plain (CPU, default mode): {', '.join(missed)}")
    else:
        print(f"target met: every constrained variant within {TARGET_RATIO}x of plain (CPU)")
    print("\n".join(targets))
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
