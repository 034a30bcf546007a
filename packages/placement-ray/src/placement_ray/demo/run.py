"""The demo: plans made real on a simulated 4-node cluster, checked against the workers.

Starts a loopback-only simulated Ray cluster (4 nodes x 8 logical GPUs, labelled
``node-rank``), then

1. slime's colocated layout: train group (share 0.4) + strided rollout engines (0.2);
2. slime's disaggregated layout: a 16-GPU rollout engine spanning two whole nodes;
3. ``examples/demo_colocated_strided.yaml`` through ``launch``;
4. ``examples/demo_heterogeneous.yaml`` through ``launch`` (node groups with env vars and
   an interpreter, robot controllers, CPU agents).

Every worker reports what it really sees; the demo prints the plan beside the reports,
checks they agree (exit status 1 if not), and stops everything it started.
"""

from __future__ import annotations

import os

os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")  # before ray: stay on loopback

import argparse
import json
import logging
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

__all__ = ["main"]

NUM_NODES = 4
GPUS_PER_NODE = 8


class Checks:
    """Collects mismatches between what was planned and what workers reported."""

    def __init__(self) -> None:
        self.problems: list[str] = []
        self.checked = 0

    def expect(self, what: str, got: object, want: object) -> str:
        """Record one comparison; return a mark for the table."""
        self.checked += 1
        if got != want:
            self.problems.append(f"{what}: reported {got!r}, planned {want!r}")
            return "MISMATCH"
        return "ok"


def _print_table(
    headers: Sequence[str], rows: Sequence[Sequence[object]], indent: str = "  "
) -> None:
    cells = [[str(c) for c in headers]] + [[str(c) for c in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    for i, row in enumerate(cells):
        print(indent + "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
        if i == 0:
            print(indent + "  ".join("-" * w for w in widths))


def _ids(values: Sequence[int]) -> str:
    return ",".join(str(v) for v in values) if values else "-"


def _ports(report: dict[str, Any]) -> str:
    shown = []
    for name, ports in sorted(report.get("ports", {}).items()):
        shown.append(f"{name}={ports[0]}" if len(ports) == 1 else f"{name}={ports[0]}+{len(ports)}")
    return " ".join(shown) or "-"


def _master(env: dict[str, str]) -> str:
    if "MASTER_ADDR" not in env:
        return "-"
    return f"{env['MASTER_ADDR']}:{env.get('MASTER_PORT', '?')}"


@contextmanager
def _section(title: str) -> Iterator[None]:
    print(f"\n== {title}")
    started = time.perf_counter()
    yield
    print(f"  ({time.perf_counter() - started:.1f}s)")


def _worker_rows(
    workers: Sequence[Any],
    reports: Sequence[dict[str, Any]],
    checks: Checks,
    expect_env: Callable[[Any], dict[str, str]],
) -> list[list[object]]:
    rows = []
    for worker, report in zip(workers, reports, strict=True):
        env = report.get("env", {})
        want = expect_env(worker)
        marks = [
            checks.expect(
                f"{worker.name}: node rank", report.get("node_rank_label"), str(worker.node_rank)
            ),
            checks.expect(f"{worker.name}: node id", report.get("node_id"), worker.node_id),
        ]
        for key, value in want.items():
            marks.append(checks.expect(f"{worker.name}: {key}", env.get(key), value))
        if worker.bundle_index is not None and worker.gpu_ids:
            marks.append(
                checks.expect(
                    f"{worker.name}: Ray's GPU of its bundle",
                    tuple(report.get("ray_gpu_ids", ())),
                    (worker.gpu_ids[0],),
                )
            )
        rows.append(
            [
                worker.name,
                worker.node_rank,
                _ids(worker.gpu_ids),
                f"{worker.gpu_share:g}" if worker.bundle_index is not None else "-",
                "|",
                report.get("node_rank_label"),
                env.get("CUDA_VISIBLE_DEVICES", "-"),
                env.get("RANK", "-"),
                env.get("LOCAL_RANK", "-"),
                _master(env),
                _ports(report),
                "ok" if all(m == "ok" for m in marks) else "MISMATCH",
            ]
        )
    return rows


HEADERS = [
    "worker",
    "node",
    "gpus",
    "share",
    "|",
    "node",
    "CUDA_VISIBLE",
    "RANK",
    "LOCAL",
    "MASTER",
    "ports",
    "check",
]
GROUP_HEADER = "  planned: node, physical GPUs, GPU share | reported by the worker itself"


def _plan_env(group: Any) -> Callable[[Any], dict[str, str]]:
    def expected(worker: Any) -> dict[str, str]:
        want = {
            k: worker.env[k]
            for k in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "CUDA_VISIBLE_DEVICES")
            if k in worker.env
        }
        if group.master_port is not None:
            want["MASTER_PORT"] = str(group.master_port)
        for key in ("DEMO_GROUP", "PLACEMENT_HARDWARE_CONFIG"):
            if key in worker.env:
                want[key] = worker.env[key]
        return want

    return expected


def _slime(cluster: Any, checks: Checks) -> None:
    _slime_colocated(cluster, checks)
    _slime_disaggregated(cluster, checks)


def _slime_colocated(cluster: Any, checks: Checks) -> None:
    from placement_ray import create_placement_groups, create_rollout_engines, create_train_group

    from .workers import DemoEngine, DemoTrainer

    with _section("slime colocated: actor 1 node x 4 GPUs, rollout 4 GPUs, colocate=True"):
        layout = create_placement_groups(1, 4, 4, colocate=True, cluster=cluster, cpus_per_bundle=0)
        try:
            _print_layout(layout)
            train = create_train_group(layout, DemoTrainer, cluster=cluster)
            engines = create_rollout_engines(
                layout, DemoEngine, num_gpus_per_engine=2, trainer_tp=4, cluster=cluster
            )
            try:
                print(GROUP_HEADER)
                rows = _worker_rows(train.workers, train.reports, checks, _plan_env(train))
                rows += _worker_rows(
                    engines.group.workers,
                    engines.group.reports,
                    checks,
                    lambda w: {"CUDA_VISIBLE_DEVICES": w.env["CUDA_VISIBLE_DEVICES"]},
                )
                _print_table(HEADERS, rows)
                for engine in engines:
                    print(
                        f"  rollout engine {engine.index}: GPUs {list(engine.gpus[0])} (seen as "
                        f"0..{engine.num_gpus - 1}), shares GPUs with trainer ranks "
                        f"{list(engine.shared_with)}, dist_init_addr {engine.dist_init_addr}"
                    )
                    owners = {r for r, g in enumerate(layout.actor.gpu_ids) if g in engine.gpus[0]}
                    checks.expect(
                        f"rollout engine {engine.index}: trainer ranks sharing its GPUs",
                        set(engine.shared_with),
                        owners,
                    )
                steps = train.train(1, timeout_s=60)
                print(f"  train.train(1) on every rank, concurrently: {steps}")
                checks.expect(
                    "train group results in rank order",
                    [r for r, _ in steps],
                    list(range(len(train))),
                )
            finally:
                engines.kill()
                train.kill()
        finally:
            layout.remove()


def _slime_disaggregated(cluster: Any, checks: Checks) -> None:
    from placement_ray import create_placement_groups, create_rollout_engines

    from .workers import DemoEngine

    with _section("slime disaggregated: actor 1 node x 8 GPUs, rollout 16 GPUs, 16-GPU engine"):
        layout = create_placement_groups(1, 8, 16, cluster=cluster, cpus_per_bundle=0)
        try:
            _print_layout(layout)
            engines = create_rollout_engines(
                layout, DemoEngine, num_gpus_per_engine=16, cluster=cluster
            )
            try:
                print(GROUP_HEADER)
                rows = _worker_rows(
                    engines.group.workers,
                    engines.group.reports,
                    checks,
                    lambda w: {"CUDA_VISIBLE_DEVICES": w.env["CUDA_VISIBLE_DEVICES"]},
                )
                _print_table(HEADERS, rows)
                seen = engines.group.execute("server_args", timeout_s=60)
                for engine in engines:
                    print(
                        f"  rollout engine {engine.index}: nodes {list(engine.node_ranks)}, "
                        f"dist_init_addr {engine.dist_init_addr}"
                    )
                for worker, args in zip(engines.group.workers, seen, strict=True):
                    print(f"    {worker.name} sees dist_init_addr {args['dist_init_addr']}")
                    checks.expect(
                        f"{worker.name}: dist_init_addr",
                        args["dist_init_addr"],
                        engines[0].dist_init_addr,
                    )
            finally:
                engines.kill()
        finally:
            layout.remove()


def _print_layout(layout: Any) -> None:
    for role in ("actor", "rollout"):
        bundles = layout[role]
        by_node: dict[int, list[int]] = {}
        for node_rank, gpu in zip(bundles.node_ranks, bundles.gpu_ids, strict=True):
            by_node.setdefault(node_rank, []).append(gpu)
        where = "; ".join(f"node {n} GPUs {_ids(g)}" for n, g in by_node.items()) or "none"
        print(f"  {role:8s} {len(bundles):2d} bundles: {where}")


def shown_path(path: str) -> str:
    """``path`` as the demo prints it: relative to the working directory when inside it,
    else to the interpreter's prefix (``<sys.prefix>/bin/python``), else its name only.

    The output is pasted into documentation; it should not carry one machine's layout.
    """
    target = Path(path)
    for base, label in ((Path.cwd(), "."), (Path(sys.prefix), "<sys.prefix>")):
        if target.is_relative_to(base):
            return f"{label}/{target.relative_to(base)}"
    return f".../{target.name}"


def _launch(
    cluster: Any, path: Path, checks: Checks, *, interpreter_group: str | None = None
) -> None:
    import yaml

    from placement_core import load_config
    from placement_ray import launch

    from .workers import DemoWorker

    with _section(f"launch {path.name}"):
        document = yaml.safe_load(path.read_text())
        if interpreter_group is not None:
            for group in document["cluster"]["node_groups"]:
                if group["label"] == interpreter_group:
                    for env in group["env_configs"]:
                        env["python_interpreter_path"] = sys.executable
            print(
                f"  node group {interpreter_group!r} gets python_interpreter_path "
                f"{shown_path(sys.executable)}"
            )
        config = load_config(document)
        actors = dict.fromkeys(config.components(), DemoWorker)
        blocks = {"rollout": {"server": 1}} if "rollout" in actors else None
        with launch(config, actors, cluster, port_blocks=blocks) as launched:
            print(GROUP_HEADER)
            rows = []
            for group in launched:
                rows += _worker_rows(group.workers, group.reports, checks, _plan_env(group))
            _print_table(HEADERS, rows)
            for problem in launched.verify():
                checks.problems.append(problem)
            if "rollout" in launched.worker_groups and "actor" in launched.worker_groups:
                shared = launched.shared_with("rollout", "actor")
                if any(shared):
                    print(
                        "  rollout rank -> trainer ranks on its GPUs: "
                        + ", ".join(f"{r}->{list(s)}" for r, s in enumerate(shared))
                    )
            for group in launched:
                for worker, report in zip(group.workers, group.reports, strict=True):
                    env = report.get("env", {})
                    extra = {k: v for k, v in env.items() if k == "DEMO_GROUP"}
                    if "PLACEMENT_HARDWARE_CONFIG" in env:
                        robot = json.loads(env["PLACEMENT_HARDWARE_CONFIG"])
                        extra["robot_ip"] = robot.get("robot_ip")
                        extra["camera_serials"] = robot.get("camera_serials")
                    if worker.interpreter or extra:
                        shown = shown_path(str(report.get("executable")))
                        python = f" python {shown}" if worker.interpreter else ""
                        print(f"  {worker.name}:{python} {json.dumps(extra)}")
                        if worker.interpreter:
                            checks.expect(
                                f"{worker.name}: interpreter",
                                report.get("executable"),
                                worker.interpreter,
                            )
            port = launched["actor"].hand_over_master_port()
            print(
                f"  actor rank 0 hands MASTER_PORT {port} over (released right before "
                "init_process_group)"
            )
            checks.expect("handed-over master port", port, launched["actor"].master_port)


def _examples_dir() -> Path:
    """The demo's configs shipped inside the package (copies of the repository's
    ``examples/demo_*.yaml``, kept equal by a test), so the demo runs from any directory."""
    return Path(__file__).resolve().parent / "configs"


def _missing_examples(examples: Path) -> int:
    """2 (after saying so) when a demo config is missing from ``examples``, else 0."""
    for name in ("demo_colocated_strided.yaml", "demo_heterogeneous.yaml"):
        if not (examples / name).exists():
            print(
                f"error: {examples / name} not found (pass --examples with a folder that "
                "holds the demo_*.yaml configs)",
                file=sys.stderr,
            )
            return 2
    return 0


def _start_simulated() -> Any:
    """The demo's simulated cluster: NUM_NODES labelled nodes on 127.0.0.1 (the testing
    kit's, whose start waits as long as a loaded machine needs)."""
    from placement_ray.testing import SimulatedCluster

    with _section(
        f"simulated cluster: {NUM_NODES} nodes x {GPUS_PER_NODE} logical GPUs on 127.0.0.1, "
        "labelled node-rank"
    ):
        return SimulatedCluster(
            nodes=NUM_NODES,
            gpus_per_node=GPUS_PER_NODE,
            cpus_per_node=2,
            job="demo",
            timeout_s=240,
        )


def _discover(address: str) -> Any:
    """The demo's cluster view, its nodes printed."""
    import ray

    from placement_ray import Cluster

    with _section("discovery: one native snapshot task per node, node order by label"):
        # Connected here rather than by Cluster() so Ray's own INFO lines ("Connecting
        # to existing Ray cluster at address ...") stay out of the demo's output; the
        # namespace is the one Cluster(job="demo") uses.
        ray.init(
            address=address,
            namespace="placement-demo",
            logging_level=logging.WARNING,
            log_to_driver=False,
        )
        cluster = Cluster(NUM_NODES, address=address, job="demo", timeout_s=120, export_env=False)
        for node in cluster.nodes:
            print(
                f"  node {node.rank}: {node.node_id[:16]}  ip {node.ip}  "
                f"{len(node.accelerators)} GPUs"
            )
    return cluster


def main(argv: Sequence[str] | None = None) -> int:
    """Run the demo; 0 when every worker reported what was planned."""
    parser = argparse.ArgumentParser(
        prog="python -m placement_ray.demo", description=__doc__.splitlines()[0]
    )
    parser.add_argument(
        "--examples", type=Path, default=None, help="folder with the demo_*.yaml configs"
    )
    options = parser.parse_args(argv)
    examples = options.examples or _examples_dir()
    if _missing_examples(examples):
        return 2

    import ray

    # The demo's output is for a person: Ray's own INFO lines (address overwrites,
    # "Connected to Ray cluster") would interleave with the tables.
    logging.getLogger("ray").setLevel(logging.WARNING)

    total = time.perf_counter()
    checks = Checks()
    simulated = _start_simulated()
    cluster = None
    try:
        cluster = _discover(simulated.address)
        _slime(cluster, checks)
        _launch(cluster, examples / "demo_colocated_strided.yaml", checks)
        _launch(cluster, examples / "demo_heterogeneous.yaml", checks, interpreter_group="train")
    finally:
        with _section("shutdown"):
            if cluster is not None:
                cluster.shutdown()
            if ray.is_initialized():
                ray.shutdown()
            simulated.shutdown()
    print(
        f"\n{checks.checked} checks of worker reports against the plan, "
        f"{len(checks.problems)} mismatches; total {time.perf_counter() - total:.1f}s"
    )
    for problem in checks.problems:
        print(f"  MISMATCH {problem}")
    return 1 if checks.problems else 0
