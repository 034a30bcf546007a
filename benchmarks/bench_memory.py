"""Benchmark: what the memory check ("will it fit") adds to planning, at 10,000 nodes x 8 GPUs.

The job is the worked example of docs/concepts/will-it-fit.md at scale: a Megatron
trainer on every GPU (Qwen2.5-7B, TP 2, distributed optimizer) and SGLang engines of 2
GPUs each (stride 2) on the same GPUs, both offloaded, plus 100 agent processes per
node without a memory entry: 80,000 GPUs time-shared by two components, 1.1 million
processes in all.

Wall time, in one process: ``plan()`` alone (the baseline) and ``plan()`` then
``check_memory()`` (what ``placement validate`` pays), ``--repeats`` times each,
interleaved round by round after a warm-up round; medians side by side, and their
ratio. The check counts the GPUs from the records' segments (no record is built) and
computes each kind of GPU (same capacity, same processes) once, so it is linear in the
segments and cheap beside planning.

Target: plan + check at most 1.5 x plan alone at 10,000 nodes, judged on the median CPU
times (see ``_targets.py``); the wall times are printed beside.

Usage: ``python benchmarks/bench_memory.py [--sizes 1000 10000] [--repeats 5]``
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from _targets import target_line

GPUS_PER_NODE = 8
AGENTS_PER_NODE = 100
TARGET_RATIO = 1.5

MEMORY = {
    "actor": {
        "estimator": "megatron",
        "offload": True,
        "num_layers": 28,
        "hidden_size": 3584,
        "ffn_hidden_size": 18944,
        "num_attention_heads": 28,
        "group_query_attention": True,
        "num_query_groups": 4,
        "vocab_size": 151665,
        "untie_embeddings_and_output_weights": True,
        "swiglu": True,
        "normalization": "RMSNorm",
        "disable_bias_linear": True,
        "seq_length": 4096,
        "tensor_model_parallel_size": 2,
        "use_distributed_optimizer": True,
        "sequence_parallel": True,
        "recompute_granularity": "selective",
    },
    "rollout": {"estimator": "sglang", "mem_fraction_static": 0.7, "offload": True},
}


def bench_config(num_nodes: int) -> dict[str, Any]:
    """The benchmark's job as a plain mapping (as Hydra would hand it over)."""
    engines = num_nodes * GPUS_PER_NODE // 2
    return {
        "cluster": {
            "num_nodes": num_nodes,
            "component_placement": {
                "actor": "all",
                "rollout": {"placement": f"all:0-{engines - 1}", "stride": 2},
                "agent": {
                    "node_group": "node",
                    "placement": f"all:0-{num_nodes * AGENTS_PER_NODE - 1}",
                },
            },
            "inventory": [
                {
                    "node_ranks": "all",
                    "accelerators": {"model": "H100", "count": GPUS_PER_NODE},
                    "host_memory_bytes": "2TiB",
                }
            ],
        },
        "memory": MEMORY,
    }


def time_sizes(sizes: list[int], repeats: int) -> list[dict[str, Any]]:
    """Median seconds of plan alone and plan + check per size, interleaved."""
    from placement_core import check_memory, load_config, load_memory, plan

    setups = {}
    for size in sizes:
        document = bench_config(size)
        config = load_config(document)
        spec = load_memory(document, config, base_dir=Path())
        setups[size] = (config, spec)
    modes = ("plan", "plan+check")
    times: dict[tuple[int, str], list[float]] = {(s, m): [] for s in sizes for m in modes}
    cpu: dict[tuple[int, str], list[float]] = {(s, m): [] for s in sizes for m in modes}
    fits: dict[int, bool] = {}
    for round_ in range(repeats + 1):  # round 0 warms up
        for size in sizes:
            config, spec = setups[size]
            for mode in modes:
                start, start_cpu = time.perf_counter(), time.process_time()
                result = plan(config)
                if mode == "plan+check":
                    fits[size] = check_memory(result, spec).fits
                elapsed, elapsed_cpu = time.perf_counter() - start, time.process_time() - start_cpu
                if round_:
                    times[size, mode].append(elapsed)
                    cpu[size, mode].append(elapsed_cpu)
                del result
    rows = []
    for size in sizes:
        alone = statistics.median(cpu[size, "plan"])
        checked = statistics.median(cpu[size, "plan+check"])
        rows.append(
            {
                "nodes": size,
                "plan_s": alone,
                "plan_check_s": checked,
                "wall_s": statistics.median(times[size, "plan"]),
                "wall_check_s": statistics.median(times[size, "plan+check"]),
                "ratio": checked / alone,
                "fits": fits[size],
            }
        )
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    rows = time_sizes(args.sizes, args.repeats)
    print(
        f"memory check: plan alone vs plan + check_memory(), median of {args.repeats} "
        f"(target: CPU ratio <= {TARGET_RATIO} at 10,000 nodes)"
    )
    print(
        f"{'nodes':>7}  {'GPUs':>7}  {'plan CPU':>9}  {'+check CPU':>11}  {'ratio':>6}  "
        f"{'plan wall':>10}  {'+check wall':>11}  verdict"
    )
    failed = False
    for row in rows:
        ok = row["ratio"] <= TARGET_RATIO or row["nodes"] < 10_000
        failed |= not ok
        print(
            f"{row['nodes']:>7,}  {row['nodes'] * GPUS_PER_NODE:>7,}  {row['plan_s']:>8.3f}s  "
            f"{row['plan_check_s']:>10.3f}s  {row['ratio']:>5.2f}x  {row['wall_s']:>9.3f}s  "
            f"{row['wall_check_s']:>10.3f}s  "
            f"{'fits' if row['fits'] else 'refused'}{'' if ok else '  (over target)'}"
        )
        if row["nodes"] >= 10_000:
            print(
                target_line(
                    f"plan() + check_memory() {row['nodes']:,} x 8, CPU",
                    f"{row['plan_check_s']:.3f} s",
                    f"plan() alone {row['plan_s']:.3f} s",
                    row["ratio"],
                    f"<= {TARGET_RATIO}x",
                    ok,
                )
            )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
