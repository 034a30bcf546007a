"""Benchmark: what `topology: best` buys on PCIe nodes, and what it costs to plan.

Part 1, per shipped example (``examples/*.yaml``): every node the example gives 8 GPUs is
replaced by a node snapshot of a PCIe box (the test suite's snapshot JSON), then the
example is planned as written (``topology: any``) and with ``topology: best`` on every
accelerator rule (strided rules keep ``any``: their pairing is the point). Printed: the
share of multi-GPU processes whose GPUs meet across a socket (``SYS``) and the share
joined by NVLink, under ``any`` and ``best``, next to the median plan time of each.

Two PCIe boxes: ``switches`` (two PCIe switches per socket, the switches' bus numbers
alternating between sockets, so GPUs 0-1 and 4-5 share socket 0) and ``bridged`` (two
GPUs per PCIe switch, NVLink bridges joining GPUs 0-2, 1-3, 4-6 and 5-7).

Part 2: a 10,000-node plan with ``best`` (trainer on every GPU, rollout of 4 GPUs per
process with ``topology: best``, 100 agents per node asking for NUMA node 0), every node
its own parsed snapshot, beside the same plan with ``any``, the garbage collector left
alone. Target: under 2 s for ``best``, judged on the median CPU time (see
``_targets.py``), the wall clock printed beside.

Usage: ``python benchmarks/bench_topology.py [--repeats 5] [--nodes 10000]``
"""

from __future__ import annotations

import argparse
import copy
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _targets import target_line

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "core" / "data"
BOXES = {
    "switches": DATA / "snapshot_pcie_two_switches.json",
    "bridged": DATA / "snapshot_pcie_nvbridge.json",
}
TARGET_SECONDS = 2.0


def _median_times(call: Callable[[], object], repeats: int) -> tuple[float, float]:
    """Median wall and CPU seconds of ``call`` over ``repeats`` runs after a warm-up."""
    call()
    wall, cpu = [], []
    for _ in range(repeats):
        start, start_cpu = time.perf_counter(), time.process_time()
        call()
        wall.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
    return statistics.median(wall), statistics.median(cpu)


def _on_pcie(config: Any, box: Path) -> Any:
    """The example's inventory with every 8-GPU node replaced by the box's snapshot."""
    from placement_core._inventory import Inventory
    from placement_core._sources import inventory_for, node_from_snapshot

    document = json.loads(box.read_text())
    nodes = []
    for node in inventory_for(config).nodes:
        if len(node.accelerators) == len(document["accelerators"]):
            node = node_from_snapshot(copy.deepcopy(document), rank=node.rank)
        nodes.append(node)
    return Inventory(tuple(nodes))


def _with_best(config: Any, inventory: Any) -> Any:
    """The config with ``topology: best`` on every unstrided rule over accelerators."""
    from placement_core._sources import attach_hardware
    from placement_core._spaces import SpaceKind, build_space

    inventory = attach_hardware(inventory, config)
    rules = {}
    for key, rule in config.component_placement.items():
        space = build_space(inventory, config, rule.node_groups)
        on_gpus = all(run.kind is SpaceKind.ACCELERATOR for run in space.runs)
        best = on_gpus and rule.stride == 1
        rules[key] = rule.model_copy(update={"topology": "best"}) if best else rule
    return config.model_copy(update={"component_placement": rules})


def _shares(result: Any) -> tuple[int, float, float]:
    from placement_core._topology_plan import crosses_socket, is_nvlink

    multi = [
        p
        for placements in result.components.values()
        for p in placements
        if p.hardware_type is None and len(p.hardware_ranks) > 1
    ]
    if not multi:
        return 0, 0.0, 0.0
    sys_share = sum(crosses_socket(p.link) for p in multi) / len(multi)
    nv_share = sum(is_nvlink(p.link) for p in multi) / len(multi)
    return len(multi), sys_share, nv_share


def examples_table(repeats: int) -> None:
    from placement_core import plan
    from placement_core._config import load_config

    print("per example on PCIe boxes: share of multi-GPU processes across sockets (SYS) and")
    print("on NVLink, as written (any) and with topology: best; median plan time")
    header = (
        f"{'example':<28} {'box':<9} {'multi':>5} {'SYS any':>8} {'SYS best':>9} "
        f"{'NV any':>7} {'NV best':>8} {'any ms':>7} {'best ms':>8}"
    )
    print(header)
    for path in sorted((ROOT / "examples").glob("*.yaml")):
        config = load_config(path)
        for box_name, box in BOXES.items():
            inventory = _on_pcie(config, box)
            best_config = _with_best(config, inventory)
            loose, best = plan(config, inventory), plan(best_config, inventory)
            count, sys_any, nv_any = _shares(loose)
            _, sys_best, nv_best = _shares(best)
            any_s, _ = _median_times(lambda c=config, i=inventory: plan(c, i), repeats)
            best_s, _ = _median_times(lambda c=best_config, i=inventory: plan(c, i), repeats)
            print(
                f"{path.name:<28} {box_name:<9} {count:>5} {sys_any:>8.0%} {sys_best:>9.0%} "
                f"{nv_any:>7.0%} {nv_best:>8.0%} {any_s * 1e3:>7.2f} {best_s * 1e3:>8.2f}"
            )


def large_plan(num_nodes: int, repeats: int) -> bool:
    from placement_core import plan
    from placement_core._config import load_config
    from placement_core._inventory import Inventory
    from placement_core._sources import node_from_snapshot

    document = json.loads(BOXES["switches"].read_text())
    inventory = Inventory(
        tuple(node_from_snapshot(copy.deepcopy(document), rank=r) for r in range(num_nodes))
    )
    gpus = num_nodes * len(document["accelerators"])

    def config(mode: str) -> Any:
        return load_config(
            {
                "cluster": {
                    "num_nodes": num_nodes,
                    "component_placement": {
                        "actor": "all",
                        "rollout": {"placement": f"all:0-{gpus // 4 - 1}", "topology": mode},
                        "agent": {
                            "node_group": "node",
                            "placement": f"all:0-{num_nodes * 100 - 1}",
                            "numa_node": 0,
                        },
                    },
                }
            }
        )

    any_config, best_config = config("any"), config("best")
    print()
    print(
        f"{num_nodes:,} snapshot nodes x 8 GPUs (TP4 rollout, agents on NUMA node 0), "
        f"median of {repeats}, the garbage collector left alone:"
    )
    cpus = {}
    for name, cfg in (("any", any_config), ("best", best_config)):
        wall, cpus[name] = _median_times(lambda c=cfg: plan(c, inventory), repeats)
        target = f" (target < {TARGET_SECONDS:.0f} s CPU)" if name == "best" else ""
        print(f"  topology: {name:<5} {wall:.3f} s wall, {cpus[name]:.3f} s CPU{target}")
    placements = sum(len(p) for p in plan(best_config, inventory).components.values())
    print(f"  {placements:,} placements per plan")
    ok = cpus["best"] < TARGET_SECONDS
    print(
        target_line(
            f"plan() {num_nodes:,} snapshot nodes, topology: best, CPU",
            f"{cpus['best']:.3f} s",
            f"topology: any {cpus['any']:.3f} s",
            cpus["best"] / cpus["any"],
            f"best < {TARGET_SECONDS:.0f} s",
            ok,
        )
    )
    return ok


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--nodes", type=int, default=10_000)
    args = parser.parse_args()
    examples_table(args.repeats)
    ok = large_plan(args.nodes, args.repeats)
    print("targets met" if ok else "TARGETS MISSED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
