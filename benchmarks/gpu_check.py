"""First contact with a real NVIDIA driver: run on a machine with a GPU, never in CI.

Checks, each recorded with its outcome and figures:

1. ``python -m placement_native snapshot --json --strict`` with the compiled backend and
   with the pure-Python one (nvidia-ml-py): both identical, and every field compared with
   ``nvidia-smi --query-gpu`` (index, UUID, PCI bus id, name, memory total and used) and
   ``nvidia-smi topo -m`` (links, NUMA, CPU affinity). The driver's fabric info, read
   directly through nvidia-ml-py, is recorded beside the snapshot's.
2. The snapshot's speed on the real driver: compiled backend vs nvidia-ml-py, alternating
   batches in one process, median per snapshot, as a ratio.
3. Visibility as a real CUDA process sees it: a process started with the environment that
   ``placement_core.worker_env`` gives a placement on GPU 0 sees exactly one device, whose
   UUID is the snapshot's; with an empty visibility list it sees none.
4. Busy detection: a torch process holds 2 GiB; the snapshot lists its pid and memory, and
   ``placement plan --inventory`` of that snapshot warns that the GPU is busy.

Writes ``RESULTS-gpu.md`` and the raw files (snapshots, nvidia-smi output) to ``--out``.
Exits 1 when a check fails. Usage (on the GPU machine, the three wheels installed)::

    python benchmarks/gpu_check.py --out gpu-results
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

PURE = {"PLACEMENT_NATIVE_PUREPYTHON": "1"}
VOLATILE = ("memory_used_bytes", "processes", "source")


@dataclass
class Check:
    """One check's outcome: ``ok`` is None when it could not run."""

    name: str
    ok: bool | None = None
    lines: list[str] = field(default_factory=list)

    def say(self, text: str) -> None:
        self.lines.append(text)
        print(f"  {text}", flush=True)


@dataclass
class Context:
    out: Path
    checks: list[Check] = field(default_factory=list)
    snapshots: dict[str, dict[str, Any]] = field(default_factory=dict)
    machine: dict[str, str] = field(default_factory=dict)

    def run(self, name: str, fn: Callable[[Check], bool]) -> None:
        check = Check(name)
        self.checks.append(check)
        print(f"== {name}", flush=True)
        try:
            check.ok = fn(check)
        except Exception as exc:  # one broken check must not hide the others
            check.say(f"could not run: {type(exc).__name__}: {exc}")
            check.ok = False
        print(f"   -> {'pass' if check.ok else 'FAIL'}", flush=True)


def sh(*argv: str, env: dict[str, str] | None = None, timeout: float = 120) -> str:
    """stdout of a command; raises with its stderr when it fails."""
    full = {**os.environ, **(env or {})}
    result = subprocess.run(argv, capture_output=True, text=True, env=full, timeout=timeout)
    if result.returncode:
        raise RuntimeError(f"{' '.join(argv)} exited {result.returncode}: {result.stderr[-800:]}")
    return result.stdout


def snapshot_json(env: dict[str, str] | None = None) -> dict[str, Any]:
    text = sh(sys.executable, "-m", "placement_native", "snapshot", "--json", "--strict", env=env)
    data: dict[str, Any] = json.loads(text)
    return data


def stable(snapshot: dict[str, Any]) -> dict[str, Any]:
    """The snapshot without what moves between two reads or names the backend."""
    out = {k: v for k, v in snapshot.items() if k not in VOLATILE}
    out["accelerators"] = [
        {k: v for k, v in acc.items() if k not in VOLATILE} for acc in snapshot["accelerators"]
    ]
    return out


def machine_facts(ctx: Context) -> None:
    smi = sh("nvidia-smi")
    cuda = re.search(r"CUDA Version:\s*([\d.]+)", smi)
    query = "name,driver_version,memory.total"
    name, driver, memory = (
        sh("nvidia-smi", f"--query-gpu={query}", "--format=csv,noheader")
        .splitlines()[0]
        .split(", ")
    )
    ctx.machine.update(
        gpu=name,
        gpus=str(len(sh("nvidia-smi", "-L").splitlines())),
        driver=driver,
        cuda_driver=cuda.group(1) if cuda else "unknown",
        memory=memory,
        python=platform.python_version(),
        kernel=platform.release(),
        cpus=str(os.cpu_count()),
    )
    try:
        import torch

        ctx.machine["torch"] = f"{torch.__version__} (CUDA {torch.version.cuda})"
    except ImportError:
        ctx.machine["torch"] = "not installed"
    import placement_core
    import placement_native

    ctx.machine["placement"] = (
        f"core {placement_core.__version__}, native {placement_native.__version__} "
        f"(backend {placement_native.BACKEND})"
    )
    try:
        import pynvml

        ctx.machine["nvidia-ml-py"] = getattr(pynvml, "__version__", "installed")
    except ImportError:
        ctx.machine["nvidia-ml-py"] = "not installed"


def check_backends(ctx: Context, check: Check) -> bool:
    compiled = snapshot_json()
    pure = snapshot_json(PURE)
    ctx.snapshots.update(compiled=compiled, pure=pure)
    for label, snap in (("compiled", compiled), ("pure", pure)):
        (ctx.out / f"snapshot-{label}.json").write_text(json.dumps(snap, indent=1))
    check.say(f"sources: {compiled['source']} and {pure['source']}")
    ok = compiled["source"] != pure["source"]
    a, b = stable(compiled), stable(pure)
    for key in sorted(set(a) | set(b)):
        if a.get(key) != b.get(key):
            check.say(f"differ at {key}: compiled {a.get(key)!r} vs pure {b.get(key)!r}")
            ok = False
    for x, y in zip(compiled["accelerators"], pure["accelerators"], strict=False):
        used = (x["memory_used_bytes"], y["memory_used_bytes"])
        check.say(f"GPU {x['index']} memory used: compiled {used[0]}, pure {used[1]} bytes")
    check.say("identical apart from memory in use and processes" if ok else "backends differ")
    return ok


def smi_rows() -> list[dict[str, str]]:
    keys = ["index", "uuid", "pci.bus_id", "name", "memory.total", "memory.used"]
    text = sh("nvidia-smi", f"--query-gpu={','.join(keys)}", "--format=csv,noheader,nounits")
    return [
        dict(zip(keys, (c.strip() for c in line.split(",")), strict=True))
        for line in text.splitlines()
        if line.strip()
    ]


def check_against_smi(ctx: Context, check: Check) -> bool:
    rows = smi_rows()
    (ctx.out / "nvidia-smi-query.csv").write_text(json.dumps(rows, indent=1))
    accs = ctx.snapshots["compiled"]["accelerators"]
    ok = len(rows) == len(accs)
    check.say(f"nvidia-smi lists {len(rows)} GPUs, the snapshot {len(accs)}")
    for row, acc in zip(rows, accs, strict=False):
        mib = acc["memory_bytes"] // 2**20
        used_mib = acc["memory_used_bytes"] / 2**20
        pairs = [
            ("index", row["index"], str(acc["index"])),
            ("uuid", row["uuid"], acc["uuid"]),
            ("pci bus id", row["pci.bus_id"].lower(), str(acc["pci_bus_id"]).lower()),
            ("name", row["name"], acc["model"]),
            ("memory total MiB", row["memory.total"], str(mib)),
        ]
        for what, theirs, ours in pairs:
            same = theirs == ours
            ok &= same
            check.say(
                f"GPU {row['index']} {what}: nvidia-smi {theirs!r}, snapshot {ours!r}"
                f"{'' if same else '  <-- differs'}"
            )
        # Memory in use moves; NVML's v1 and v2 memory calls also count reserved memory
        # differently, so the figures are recorded side by side with their gap.
        gap = abs(float(row["memory.used"]) - used_mib)
        check.say(
            f"GPU {row['index']} memory used MiB: nvidia-smi {row['memory.used']}, "
            f"snapshot {used_mib:.0f} (gap {gap:.0f} MiB)"
        )
        ok &= gap <= 64
    return ok


def topo_matrix() -> dict[str, dict[str, str]]:
    """``nvidia-smi topo -m``'s GPU rows: column header -> cell."""
    text = re.sub(r"\x1b\[[0-9;]*m", "", sh("nvidia-smi", "topo", "-m"))
    lines = [ln.rstrip() for ln in text.splitlines()]
    header_line = next(ln for ln in lines if "CPU Affinity" in ln)
    headers = re.split(r"\t+|\s{2,}", header_line.strip())
    rows: dict[str, dict[str, str]] = {}
    for line in lines:
        if not re.match(r"^\S*GPU\d+\s", line):
            continue
        cells = re.split(r"\t+|\s{2,}", line.strip())
        rows[cells[0]] = dict(zip(headers, cells[1:], strict=False))
    return rows


def check_against_topo(ctx: Context, check: Check) -> bool:
    text = sh("nvidia-smi", "topo", "-m")
    (ctx.out / "nvidia-smi-topo.txt").write_text(text)
    rows = topo_matrix()
    snap = ctx.snapshots["compiled"]
    ok = True
    links = {(a, b): level for a, b, level in snap["links"]}
    for acc in snap["accelerators"]:
        row = rows.get(f"GPU{acc['index']}", {})
        cpu, numa = row.get("CPU Affinity", "?"), row.get("NUMA Affinity", "?")
        ours_numa = "N/A" if acc["numa_node"] is None else str(acc["numa_node"])
        ours_cpu = acc["cpu_affinity"] or "N/A"
        for what, theirs, ours in (("CPU affinity", cpu, ours_cpu), ("NUMA", numa, ours_numa)):
            same = theirs == ours
            ok &= same
            check.say(
                f"GPU {acc['index']} {what}: topo -m {theirs!r}, snapshot {ours!r}"
                f"{'' if same else '  <-- differs'}"
            )
        for other in snap["accelerators"]:
            j = other["index"]
            if j == acc["index"]:
                continue
            theirs = row.get(f"GPU{j}", "?")
            ours = links.get((min(acc["index"], j), max(acc["index"], j)), "?")
            same = theirs == ours
            ok &= same
            check.say(f"GPU {acc['index']}-{j} link: topo -m {theirs}, snapshot {ours}")
    if len(snap["accelerators"]) == 1:
        check.say("one GPU: no pairwise links to compare")
    check.say(f"snapshot numa_nodes {snap['numa_nodes']}, cpus {snap['cpus']}")
    return ok


FABRIC_CALLS = (
    ("nvmlDeviceGetGpuFabricInfoV", "c_nvmlGpuFabricInfo_v3_t"),
    ("nvmlDeviceGetGpuFabricInfoV", "c_nvmlGpuFabricInfo_v2_t"),
    ("nvmlDeviceGetGpuFabricInfo", "c_nvmlGpuFabricInfo_t"),
)


def fabric_fields(info: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, _ in getattr(info, "_fields_", []):
        value = getattr(info, name)
        out[name] = bytes(value).hex() if name == "clusterUuid" else value
    return out


def check_fabric(ctx: Context, check: Check) -> bool:
    """Recorded as the driver reports it through nvidia-ml-py, each struct version (an
    H100/H200 board outside an NVL rack reports a fabric that is not supported)."""
    import ctypes

    import pynvml

    pynvml.nvmlInit()
    try:
        for i in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(i)
            for fn_name, struct_name in FABRIC_CALLS:
                fn, struct = getattr(pynvml, fn_name, None), getattr(pynvml, struct_name, None)
                if fn is None or struct is None:
                    check.say(f"GPU {i} {fn_name}({struct_name}): not in this nvidia-ml-py")
                    continue
                info = struct()
                try:
                    fn(handle, ctypes.byref(info))
                    check.say(f"GPU {i} {fn_name}({struct_name}): {fabric_fields(info)}")
                except pynvml.NVMLError as exc:
                    check.say(f"GPU {i} {fn_name}({struct_name}): {type(exc).__name__}: {exc}")
    finally:
        pynvml.nvmlShutdown()
    for acc in ctx.snapshots["compiled"]["accelerators"]:
        check.say(f"GPU {acc['index']} snapshot fabric: {acc.get('fabric', '(no field)')!r}")
    compiled = [a.get("fabric") for a in ctx.snapshots["compiled"]["accelerators"]]
    pure = [a.get("fabric") for a in ctx.snapshots["pure"]["accelerators"]]
    return compiled == pure


def alternating(
    fast: Callable[[], object], slow: Callable[[], object], rounds: int, batch: int
) -> tuple[float, float]:
    times: tuple[list[float], list[float]] = ([], [])
    for _ in range(rounds):
        for fn, sink in ((fast, times[0]), (slow, times[1])):
            start = time.process_time()
            for _ in range(batch):
                fn()
            sink.append((time.process_time() - start) / batch)
    return statistics.median(times[0]), statistics.median(times[1])


TIMER = textwrap.dedent(
    """
    import statistics, sys, time
    from placement_native import _snapshot, release_nvml
    backend, release = sys.argv[1], sys.argv[2] == "1"
    samples = []
    for i in range(21):
        start = time.perf_counter()
        _snapshot.take(backend)
        if release:
            release_nvml()
        if i:
            samples.append(time.perf_counter() - start)
    print(statistics.median(samples) * 1e6)
    """
)


def separate_process_us(backend: str, *, release: bool) -> float:
    """Median wall time of a snapshot in a fresh process that uses only ``backend``."""
    env = PURE if backend == "purepython" else None
    out = sh(sys.executable, "-c", TIMER, backend, "1" if release else "0", env=env)
    return float(out.strip().splitlines()[-1])


def check_speed(ctx: Context, check: Check) -> bool:
    from placement_native import _snapshot

    _snapshot.take("cffi")
    _snapshot.take("purepython")
    rounds, batch = 15, 5
    ours, theirs = alternating(
        lambda: _snapshot.take("cffi"), lambda: _snapshot.take("purepython"), rounds, batch
    )
    wall = time.perf_counter()
    for _ in range(10):
        _snapshot.take("cffi")
    wall_ours = (time.perf_counter() - wall) / 10
    wall = time.perf_counter()
    for _ in range(10):
        _snapshot.take("purepython")
    wall_theirs = (time.perf_counter() - wall) / 10
    check.say(
        f"CPU time per snapshot, median of {rounds} rounds x {batch}: compiled "
        f"{ours * 1e6:.1f} us, nvidia-ml-py {theirs * 1e6:.1f} us, "
        f"ratio {theirs / ours:.1f}x"
    )
    check.say(
        f"wall clock per snapshot (mean of 10): compiled {wall_ours * 1e6:.1f} us, "
        f"nvidia-ml-py {wall_theirs * 1e6:.1f} us, ratio {wall_theirs / wall_ours:.1f}x"
    )
    # nvidia-ml-py as its users call it (nvmlInit, the reads, nvmlShutdown every time) in a
    # process of its own: in this one our held session keeps NVML initialised, which makes
    # every other init a cheap reference count.
    cold = separate_process_us("purepython", release=True)
    held = separate_process_us("cffi", release=False)
    check.say(
        f"separate processes, median of 20: compiled, NVML held (the default) {held:.1f} us; "
        f"nvidia-ml-py with init + read + shutdown {cold:.1f} us: ratio {cold / held:.1f}x"
    )
    ctx.machine["speed"] = (
        f"{theirs / ours:.1f}x CPU, {wall_theirs / wall_ours:.1f}x wall (both holding NVML); "
        f"{cold / held:.1f}x against nvidia-ml-py's init + read + shutdown"
    )
    return ours < theirs


def median_us(fn: Callable[[], object], runs: int = 20) -> float:
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples) * 1e6


def nvml_calls(pynvml: Any, handle: Any) -> list[tuple[str, Callable[[], object]]]:
    """The per-GPU NVML calls a snapshot makes, as nvidia-ml-py exposes them."""

    def guarded(fn: Callable[[], object]) -> Callable[[], object]:
        def call() -> object:
            try:
                return fn()
            except pynvml.NVMLError as exc:
                return exc

        return call

    calls: list[tuple[str, Callable[[], object]]] = [
        ("nvmlSystemGetDriverVersion", pynvml.nvmlSystemGetDriverVersion),
        ("nvmlDeviceGetCount", pynvml.nvmlDeviceGetCount),
        ("nvmlDeviceGetHandleByIndex", lambda: pynvml.nvmlDeviceGetHandleByIndex(0)),
        ("nvmlDeviceGetUUID", lambda: pynvml.nvmlDeviceGetUUID(handle)),
        ("nvmlDeviceGetName", lambda: pynvml.nvmlDeviceGetName(handle)),
        ("nvmlDeviceGetPciInfo", lambda: pynvml.nvmlDeviceGetPciInfo(handle)),
        ("nvmlDeviceGetMemoryInfo", lambda: pynvml.nvmlDeviceGetMemoryInfo(handle)),
        ("nvmlDeviceGetNumaNodeId", lambda: pynvml.nvmlDeviceGetNumaNodeId(handle)),
        ("nvmlDeviceGetCpuAffinity", lambda: pynvml.nvmlDeviceGetCpuAffinity(handle, 4)),
        ("nvmlDeviceGetMemoryAffinity", lambda: pynvml.nvmlDeviceGetMemoryAffinity(handle, 4, 0)),
        (
            "nvmlDeviceGetCudaComputeCapability",
            lambda: pynvml.nvmlDeviceGetCudaComputeCapability(handle),
        ),
        ("nvmlDeviceGetMigMode", lambda: pynvml.nvmlDeviceGetMigMode(handle)),
        (
            "nvmlDeviceGetComputeRunningProcesses",
            lambda: pynvml.nvmlDeviceGetComputeRunningProcesses(handle),
        ),
        (
            "nvmlDeviceGetNvLinkState x18",
            lambda: [
                guarded(lambda k=k: pynvml.nvmlDeviceGetNvLinkState(handle, k))() for k in range(18)
            ],
        ),
    ]
    return [(name, guarded(fn)) for name, fn in calls]


def check_profile(ctx: Context, check: Check) -> bool:
    """Where a snapshot's time goes on this driver: each NVML call alone, NVML's own init
    and shutdown, and the snapshot while the process already holds NVML initialised."""
    import pynvml

    from placement_native import _snapshot, release_nvml

    release_nvml()  # the snapshots above hold NVML: give it back to time its init
    init = median_us(lambda: (pynvml.nvmlInit(), pynvml.nvmlShutdown()), runs=10)
    check.say(f"{'nvmlInit + nvmlShutdown':40} {init:10.1f} us")
    pynvml.nvmlInit()
    try:
        handle = pynvml.nvmlDeviceGetHandleByIndex(0)
        for name, fn in nvml_calls(pynvml, handle):
            check.say(f"{name:40} {median_us(fn):10.1f} us")
        held = {b: median_us(lambda b=b: _snapshot.take(b)) for b in ("cffi", "purepython")}
    finally:
        pynvml.nvmlShutdown()
    release_nvml()
    cold = {
        b: median_us(lambda b=b: (_snapshot.take(b), release_nvml()))
        for b in ("cffi", "purepython")
    }
    for backend in ("cffi", "purepython"):
        check.say(
            f"snapshot {backend:10} NVML initialised by the caller {held[backend]:10.1f} us,"
            f" with init + shutdown each time {cold[backend]:10.1f} us"
        )
    ratio = held["purepython"] / held["cffi"]
    check.say(f"ratio with NVML held initialised: {ratio:.1f}x")
    ctx.machine["speed, NVML held"] = f"{ratio:.1f}x"
    return True


PROBE = textwrap.dedent(
    """
    import json, torch
    n = torch.cuda.device_count()
    uuids = [str(torch.cuda.get_device_properties(i).uuid) for i in range(n)]
    print(json.dumps({"count": n, "uuids": uuids}))
    """
)


def gpu0_placement_env(ctx: Context) -> tuple[dict[str, str], Any]:
    from placement_core import inventory_from_snapshots, load_config, plan, worker_env

    inventory = inventory_from_snapshots([ctx.snapshots["compiled"]])
    config = load_config({"cluster": {"num_nodes": 1, "component_placement": {"actor": "0"}}})
    placement = plan(config, inventory).components["actor"][0]
    return worker_env(placement, world_size=1, master_addr="127.0.0.1"), placement


def probe_torch(env: dict[str, str]) -> dict[str, Any]:
    base = {k: v for k, v in os.environ.items() if "VISIBLE_DEVICES" not in k}
    result = subprocess.run(
        [sys.executable, "-c", PROBE],
        capture_output=True,
        text=True,
        env={**base, **env},
        timeout=300,
    )
    if result.returncode:
        raise RuntimeError(f"torch probe failed: {result.stderr[-800:]}")
    data: dict[str, Any] = json.loads(result.stdout.strip().splitlines()[-1])
    return data


def normal_uuid(text: str) -> str:
    return text.lower().removeprefix("gpu-")


def check_visibility(ctx: Context, check: Check) -> bool:
    import dataclasses

    from placement_core import worker_env

    env, placement = gpu0_placement_env(ctx)
    shown = {k: v for k, v in env.items() if "VISIBLE" in k or k.startswith("LOCAL")}
    check.say(f"worker_env for a placement on GPU 0: {shown}")
    seen = probe_torch(env)
    want = ctx.snapshots["compiled"]["accelerators"][0]["uuid"]
    check.say(f"torch sees {seen['count']} device(s): {seen['uuids']}; snapshot GPU 0 {want}")
    ok = seen["count"] == 1 and normal_uuid(seen["uuids"][0]) == normal_uuid(want)
    empty = dataclasses.replace(placement, visible_accelerators=())
    empty_env = worker_env(empty, world_size=1, master_addr="127.0.0.1")
    check.say(
        f"empty visibility list: CUDA_VISIBLE_DEVICES={empty_env.get('CUDA_VISIBLE_DEVICES')!r}"
    )
    none = probe_torch(empty_env)
    check.say(f"torch sees {none['count']} device(s) with it")
    return ok and none["count"] == 0 and empty_env.get("CUDA_VISIBLE_DEVICES") == ""


HOLDER = textwrap.dedent(
    """
    import sys, time, torch
    block = torch.empty(2 << 30, dtype=torch.uint8, device="cuda")
    torch.cuda.synchronize()
    print("ready", flush=True)
    sys.stdin.read()
    """
)


def check_busy(ctx: Context, check: Check) -> bool:
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None
        if holder.stdout.readline().strip() != "ready":
            raise RuntimeError("the torch process holding 2 GiB did not start")
        ok = True
        for label, env in (("compiled", None), ("pure", PURE)):
            snap = snapshot_json(env)
            (ctx.out / f"snapshot-busy-{label}.json").write_text(json.dumps(snap, indent=1))
            procs = snap["accelerators"][0]["processes"]
            mine = [p for p in procs or () if p["pid"] == holder.pid]
            check.say(f"{label}: GPU 0 processes {procs}; holder pid {holder.pid}")
            used = mine[0]["used_memory_bytes"] if mine else None
            ok &= bool(mine) and (used is None or used >= 2 << 30)
            if label == "compiled":
                path = ctx.out / "snapshot-busy-compiled.json"
        ok &= check_busy_plan(path, check)
        return ok
    finally:
        holder.communicate("", timeout=60)


def check_busy_plan(path: Path, check: Check) -> bool:
    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / "job.yaml"
        config.write_text("cluster:\n  num_nodes: 1\n  component_placement:\n    actor: 0\n")
        result = subprocess.run(
            [
                sys.executable,
                "-m",
                "placement_core",
                "plan",
                str(config),
                "--inventory",
                str(path),
                "--format",
                "json",
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
    warnings = []
    try:
        warnings = json.loads(result.stdout).get("warnings", [])
    except json.JSONDecodeError:
        check.say(f"plan output is not JSON: {result.stdout[:300]!r}")
    check.say(
        f"`placement plan --inventory` exit {result.returncode}; warnings {warnings}; "
        f"stderr {result.stderr.strip()[:400]!r}"
    )
    text = json.dumps(warnings) + result.stderr
    return any(word in text.lower() for word in ("busy", "already runs"))


def write_results(ctx: Context, command: str) -> Path:
    lines = [
        "# Results on a real NVIDIA driver",
        "",
        f"Written by `benchmarks/gpu_check.py` on "
        f"{datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC.",
        "",
        f"Command: `{command}`",
        "",
        "## Machine",
        "",
        *(f"- {k}: {v}" for k, v in ctx.machine.items()),
        "",
        "## Checks",
        "",
        "| check | outcome |",
        "|---|---|",
        *(f"| {c.name} | {'pass' if c.ok else 'FAIL'} |" for c in ctx.checks),
    ]
    for c in ctx.checks:
        lines += ["", f"### {c.name}: {'pass' if c.ok else 'FAIL'}", "", "```text", *c.lines, "```"]
    path = ctx.out / "RESULTS-gpu.md"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("gpu-results"))
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    ctx = Context(args.out)
    machine_facts(ctx)
    ctx.run("snapshot: compiled and pure-Python backends agree", lambda c: check_backends(ctx, c))
    ctx.run("snapshot vs nvidia-smi --query-gpu", lambda c: check_against_smi(ctx, c))
    ctx.run("snapshot vs nvidia-smi topo -m", lambda c: check_against_topo(ctx, c))
    ctx.run("fabric info as the driver reports it", lambda c: check_fabric(ctx, c))
    ctx.run("snapshot speed vs nvidia-ml-py", lambda c: check_speed(ctx, c))
    ctx.run("where a snapshot's time goes", lambda c: check_profile(ctx, c))
    ctx.run("visibility seen by a CUDA process", lambda c: check_visibility(ctx, c))
    ctx.run("busy GPU detected and warned", lambda c: check_busy(ctx, c))
    path = write_results(ctx, " ".join([Path(sys.executable).name, *sys.argv]))
    print(f"wrote {path}")
    return 0 if all(c.ok for c in ctx.checks) else 1


if __name__ == "__main__":
    sys.exit(main())
