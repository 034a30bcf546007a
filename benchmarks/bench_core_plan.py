"""Benchmark: plan a large job with placement-core, at 100, 1,000 and 10,000 nodes x 8 GPUs.

The config has an ``all``-GPU trainer, a strided rollout (4 GPUs per process, stride 2)
over the same GPUs, and an agent component of 100 processes per node on the ``node``
group: 110 placements per node (1.1 million at 10,000 nodes).

Wall time: one process times, for every size, ``plan()`` alone (what it costs to decide
where everything goes) and ``plan()`` then reading every record once (what a renderer or
a launcher pays on top, records being built when read), ``--repeats`` times, sizes and
modes interleaved round by round after one warm-up round. The garbage collector is left
as it is, as a user's process would have it. It reports the median (plus the best run and
the median CPU time, steadier on a busy machine). Memory: one fresh subprocess per size
plans once and reports its peak RSS (interpreter included), then plans again under
tracemalloc for the peak Python memory of planning.

Targets (on ``plan()``): 10,000 x 8 under 0.7 s and under 1 GB; growth 1k -> 10k no worse
than 11x; the times judged on the median CPU time (see ``_targets.py``), the wall
clock printed beside.

Usage: ``python benchmarks/bench_core_plan.py [--sizes 100 1000 10000] [--repeats 5]``
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import time
import tracemalloc
from typing import Any

from _targets import target_line

GPUS_PER_NODE = 8
AGENTS_PER_NODE = 100
TARGET_SECONDS = 0.7
TARGET_BYTES = 1 << 30
TARGET_GROWTH = 11.0


def bench_config(num_nodes: int) -> dict[str, Any]:
    """The benchmark's cluster config as a plain mapping (as Hydra would hand it over)."""
    rollout_processes = num_nodes * GPUS_PER_NODE // 4
    return {
        "cluster": {
            "num_nodes": num_nodes,
            "component_placement": {
                "actor": "all",
                "rollout": {"placement": f"all:0-{rollout_processes - 1}", "stride": 2},
                "agent": {
                    "node_group": "node",
                    "placement": f"all:0-{num_nodes * AGENTS_PER_NODE - 1}",
                },
            },
        }
    }


def _setup(num_nodes: int) -> tuple[Any, Any]:
    from placement_core._config import load_config
    from placement_core._inventory import Inventory

    return load_config(bench_config(num_nodes)), Inventory.uniform(num_nodes, GPUS_PER_NODE)


def _read_all(result: Any) -> int:
    """Read every record of every component once (as a renderer would)."""
    count = 0
    for placements in result.components.values():
        for _ in placements:
            count += 1
    return count


MODES = {"plan": False, "plan+read": True}


def time_sizes(sizes: list[int], repeats: int) -> dict[tuple[int, str], dict[str, Any]]:
    """Time ``plan()`` for every size and mode in one process, interleaved round by round,
    so load on the machine hits every size and mode alike."""
    from placement_core import plan

    setups = {size: _setup(size) for size in sizes}
    runs = [(size, mode) for size in sizes for mode in MODES]
    times: dict[tuple[int, str], list[float]] = {run: [] for run in runs}
    cpu: dict[tuple[int, str], list[float]] = {run: [] for run in runs}
    placements: dict[int, int] = {}
    for size, mode in runs:  # warm-up round, not timed
        result = plan(*setups[size])
        if MODES[mode]:
            _read_all(result)
        del result
    for _ in range(repeats):
        for size, mode in runs:
            start, start_cpu = time.perf_counter(), time.process_time()
            result = plan(*setups[size])
            if MODES[mode]:
                _read_all(result)
            times[size, mode].append(time.perf_counter() - start)
            cpu[size, mode].append(time.process_time() - start_cpu)
            placements[size] = sum(len(p) for p in result.components.values())
            del result
    return {
        (size, mode): {
            "nodes": size,
            "mode": mode,
            "placements": placements[size],
            "median_s": statistics.median(times[size, mode]),
            "min_s": min(times[size, mode]),
            "cpu_s": statistics.median(cpu[size, mode]),
        }
        for size, mode in runs
    }


def measure_memory(num_nodes: int) -> dict[str, Any]:
    """Peak RSS of a process that plans once, then the peak Python memory of one
    ``plan()`` under tracemalloc (traced separately: tracing inflates the RSS)."""
    from placement_core import plan

    config, inventory = _setup(num_nodes)
    result = plan(config, inventory)
    rss_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    del result
    tracemalloc.start()
    result = plan(config, inventory)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    del result
    return {"peak_bytes": peak, "max_rss_bytes": rss_kib * 1024}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100, 1000, 10000])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--memory-of", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.memory_of is not None:
        print(json.dumps(measure_memory(args.memory_of)))
        return 0
    rows = []
    for size in args.sizes:
        out = subprocess.run(
            [sys.executable, __file__, "--memory-of", str(size)],
            check=True,
            capture_output=True,
            text=True,
        )
        rows.append(json.loads(out.stdout))
    timed = time_sizes(args.sizes, args.repeats)
    memory = dict(zip(args.sizes, rows, strict=True))
    print(
        f"placement-core plan(): median of {args.repeats} runs (sizes and modes interleaved "
        f"in one process, the garbage collector left alone); memory from one subprocess "
        f"per size"
    )
    print(
        f"{'nodes x GPUs':>14} {'placements':>11} {'mode':>9} {'median s':>9} {'min s':>7} "
        f"{'CPU s':>7} {'peak MiB':>9} {'max RSS MiB':>12}"
    )
    for size in args.sizes:
        mem = memory[size]
        for mode in MODES:
            row = timed[size, mode]
            extra = (
                f"{mem['peak_bytes'] / 2**20:>9.1f} {mem['max_rss_bytes'] / 2**20:>12.1f}"
                if mode == "plan"
                else ""
            )
            line = (
                f"{size:>8} x {GPUS_PER_NODE:<3} {row['placements']:>11,} {mode:>9} "
                f"{row['median_s']:>9.3f} {row['min_s']:>7.3f} {row['cpu_s']:>7.3f} {extra}"
            )
            print(line.rstrip())
    return _judge(args.sizes, timed, memory)


def _judge(
    sizes: list[int],
    timed: dict[tuple[int, str], dict[str, Any]],
    memory: dict[int, dict[str, Any]],
) -> int:
    ok = True
    targets = []
    if 1000 in sizes and 10000 in sizes:
        for mode in MODES:
            small, big = timed[1000, mode], timed[10000, mode]
            growth = big["cpu_s"] / small["cpu_s"]
            judged = mode == "plan"
            ok &= growth <= TARGET_GROWTH or not judged
            print(
                f"growth 1k -> 10k nodes, {mode}: {growth:.2f}x median CPU"
                + (f" (target <= {TARGET_GROWTH:.0f}x)" if judged else "")
                + f"; {big['median_s'] / small['median_s']:.2f}x median wall; "
                f"{big['min_s'] / small['min_s']:.2f}x best wall"
            )
            if judged:
                targets.append(
                    target_line(
                        "plan() 10k x 8 vs 1k x 8 (growth), CPU",
                        f"{big['cpu_s']:.3f} s",
                        f"1k x 8: {small['cpu_s']:.3f} s",
                        growth,
                        f"<= {TARGET_GROWTH:.0f}x",
                        growth <= TARGET_GROWTH,
                    )
                )
    if 10000 in sizes:
        planned, read = timed[10000, "plan"], timed[10000, "plan+read"]
        peak = memory[10000]["peak_bytes"]
        ok &= planned["cpu_s"] < TARGET_SECONDS and peak < TARGET_BYTES
        print(
            f"10k x 8: plan() {planned['cpu_s']:.3f} s median CPU (target < {TARGET_SECONDS} s), "
            f"{planned['median_s']:.3f} s median wall; reading every record once adds "
            f"{read['cpu_s'] - planned['cpu_s']:.3f} s CPU; peak {peak / 2**20:.0f} MiB "
            "(target < 1024 MiB)"
        )
        targets.append(
            target_line(
                "plan() 10k x 8, CPU",
                f"{planned['cpu_s']:.3f} s (wall {planned['median_s']:.3f} s)",
                f"budget {TARGET_SECONDS} s",
                planned["cpu_s"] / TARGET_SECONDS,
                "< 1.00x of the budget",
                planned["cpu_s"] < TARGET_SECONDS,
            )
        )
        targets.append(
            target_line(
                "plan() 10k x 8, peak memory",
                f"{peak / 2**20:.0f} MiB",
                "budget 1024 MiB",
                peak / TARGET_BYTES,
                "< 1.00x of the budget",
                peak < TARGET_BYTES,
            )
        )
    print("targets met" if ok else "TARGETS MISSED")
    print("\n".join(targets))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
