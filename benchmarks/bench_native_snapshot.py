"""Benchmark: placement-native's node snapshot, compiled backend vs nvidia-ml-py, and import time.

1. Snapshot of a fake DGX-H100-like node (8 GPUs, 18 NVLinks each into NVSwitches, two
   compute processes and 20 GiB in use on every GPU; the fake libnvidia-ml of
   ``placement_native.testing``, compiled with the system compiler): the whole
   ``snapshot`` through the compiled backend (one C call) vs the same snapshot built with
   nvidia-ml-py calls (the pure-Python backend), run alternately in one process. Also the
   NVML read alone, without turning it into the snapshot records. Then the same node with
   its memory in use moving between any two snapshots (every GPU's and every process's,
   by 1 MiB: ``memory_churn``), so nothing read is what the last read saw. Median per
   snapshot over ``--rounds`` rounds of ``--batch`` snapshots each, in wall-clock time
   and in CPU time (the process's own; on a loaded machine the wall clock favours the
   shorter calls, which a scheduler interrupts less, so the target of >= 20x is judged on
   CPU time). The target is judged on the busy node, read as it is (what the issue
   measured); the node whose memory moves is the worst case and is printed beside it.
   Both backends keep NVML initialised between snapshots (as on a real driver).
2. The busy node behind a driver-like ``nvmlInit`` (the fake spends 10 ms of CPU in it,
   as driver 580.159.04 spent in nvmlInit + nvmlShutdown on an H200): our snapshot, NVML
   held (each backend), against nvidia-ml-py used the way its users use it: init, read,
   shutdown every time. On a real driver this gap is what a user sees.
3. Import time in fresh interpreters (``python -X importtime``, cumulative microseconds of
   the top-level module, median of ``--imports`` runs, bytecode cached as after an
   install): ``import placement_native`` vs ``import pynvml``. Target: placement_native
   < 5 ms.

Usage: ``python benchmarks/bench_native_snapshot.py [--rounds 25] [--batch 10] [--imports 9]``
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable

from _targets import target_line

from placement_native.testing import FakeProcess, Topology, fake_nvml, topology

TARGET_RATIO = 20.0
TARGET_WORST_RATIO = 16.0
TARGET_IMPORT_MS = 5.0
DRIVER_INIT_US = 10_000  # nvmlInit + nvmlShutdown on driver 580.159.04 (H200): 10.2 ms
Row = tuple[str, float, float, str]  # label, ours (s), nvidia-ml-py (s), "judged"/"worst"/""


def _busy(machine: Topology, *, churn: bool = False) -> Topology:
    """Every GPU with 20 GiB in use by two compute processes; with ``churn``, the memory
    in use of every GPU and process moves by 1 MiB at every snapshot."""
    for i, gpu in enumerate(machine.gpus):
        gpu.memory_used = 20 << 30
        gpu.processes = [FakeProcess(4000 + 2 * i, 12 << 30), FakeProcess(4001 + 2 * i, 8 << 30)]
        gpu.memory_churn = (1 << 20) if churn else 0
    return machine


def _alternating(
    fast: Callable[[], object],
    slow: Callable[[], object],
    rounds: int,
    batch: int,
    clock: Callable[[], float] = time.perf_counter,
) -> tuple[float, float]:
    """Median seconds per call of each, timed in alternating batches so that load on a
    shared machine hits both alike."""
    times: tuple[list[float], list[float]] = ([], [])
    for _ in range(rounds):
        for fn, sink in ((fast, times[0]), (slow, times[1])):
            start = clock()
            for _ in range(batch):
                fn()
            sink.append((clock() - start) / batch)
    return statistics.median(times[0]), statistics.median(times[1])


def _import_us(module: str, runs: int) -> float:
    """Median cumulative import time of ``module`` in a fresh interpreter, in microseconds.

    Bytecode is cached first (one discarded import with bytecode writing allowed), as it is
    after ``pip install``; otherwise every run would time the compiler.
    """
    samples = []
    drop = ("PLACEMENT_NATIVE_PUREPYTHON", "PYTHONDONTWRITEBYTECODE")
    env = {k: v for k, v in os.environ.items() if k not in drop}
    subprocess.run([sys.executable, "-c", f"import {module}"], check=True, env=env)
    for _ in range(runs):
        result = subprocess.run(
            [sys.executable, "-X", "importtime", "-c", f"import {module}"],
            capture_output=True,
            text=True,
            check=True,
            env=env,
        )
        for line in result.stderr.splitlines():
            parts = [p.strip() for p in line.removeprefix("import time:").split("|")]
            if len(parts) == 3 and parts[2] == module:
                samples.append(float(parts[1]))
    if not samples:
        raise RuntimeError(f"no import-time line for {module}")
    return statistics.median(samples)


def _agree() -> bool:
    """Whether both backends read the benchmark node alike, every GPU busy."""
    from placement_native import _snapshot

    compiled = _snapshot.take("cffi")
    fallback = _snapshot.take("purepython")
    busy = all(len(acc.processes or ()) == 2 for acc in compiled.accelerators)
    same = compiled.to_dict() | {"source": ""} == fallback.to_dict() | {"source": ""}
    return busy and same and len(compiled.accelerators) == 8


def _snapshot_rows(
    machine: Topology,
    label: str,
    role: str,
    args: argparse.Namespace,
    snapshots: tuple[Callable[[], object], Callable[[], object]] | None = None,
) -> list[Row]:
    """The snapshot of ``machine`` by ``snapshots`` (default: the compiled backend and the
    pure-Python one), by wall clock and by CPU time (the CPU-time row plays ``role``:
    "judged", "worst" or "")."""
    from placement_native import _snapshot

    fast, slow = snapshots or (
        lambda: _snapshot.take("cffi"),
        lambda: _snapshot.take("purepython"),
    )
    with fake_nvml(machine):
        wall = _alternating(fast, slow, args.rounds, args.batch)
        cpu = _alternating(fast, slow, args.rounds, args.batch, clock=time.process_time)
    _snapshot.release_nvml()  # the next machine's snapshots start without a session
    return [(label, *wall, ""), (f"{label}, CPU time", *cpu, role)]


def _cold_pynvml() -> object:
    """nvidia-ml-py as its users call it: nvmlInit, the snapshot's reads, nvmlShutdown."""
    from placement_native import _snapshot

    taken = _snapshot.take("purepython")
    _snapshot._readers.get("purepython").close()
    return taken


def _driver_init_rows(args: argparse.Namespace) -> list[Row]:
    """The busy node behind a driver-like nvmlInit: each backend, NVML held, against
    nvidia-ml-py's init, read and shutdown."""
    from placement_native import _snapshot

    def held(backend: _snapshot.Backend) -> Callable[[], object]:
        return lambda: _snapshot.take(backend)

    rows: list[Row] = []
    for backend in ("cffi", "purepython"):
        machine = _busy(topology("dgx-h100"))
        machine.init_delay_us = DRIVER_INIT_US
        rows += _snapshot_rows(
            machine, f"10 ms init, {backend} held", "", args, (held(backend), _cold_pynvml)
        )
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=25)
    parser.add_argument("--batch", type=int, default=10)
    parser.add_argument("--imports", type=int, default=9)
    args = parser.parse_args(argv)

    from placement_native import _backend, _host, _nvml_cffi, _nvml_pynvml, _snapshot

    if _backend.native_module is None:
        print("the compiled extension is not built: nothing to compare", file=sys.stderr)
        return 1
    with fake_nvml(_busy(topology("dgx-h100"))) as fake:
        if not _agree():
            print("the two backends disagree on the benchmark node", file=sys.stderr)
            return 1
        sysfs = _host.sysfs_root()
        compiled, fallback = _nvml_cffi.CffiReader(), _nvml_pynvml.PynvmlReader()
        read = _alternating(
            lambda: compiled.read(str(fake.library), sysfs),
            lambda: fallback.read(str(fake.library), sysfs),
            args.rounds,
            args.batch,
        )
        compiled.close()
        fallback.close()
        _snapshot.release_nvml()
    rows: list[Row] = [
        *_snapshot_rows(_busy(topology("dgx-h100")), "busy DGX H100", "judged", args),
        ("NVML read alone", *read, ""),
        *_snapshot_rows(_busy(topology("dgx-h100"), churn=True), "memory moving", "worst", args),
    ]
    init_rows = _driver_init_rows(args)

    print(f"placement-native snapshot benchmark (median of {args.rounds} rounds x {args.batch})")
    print(f"{'measure':38} {'cffi':>10} {'nvidia-ml-py':>13} {'ratio':>8}")
    for label, fast_s, slow_s, _ in rows:
        print(f"{label:38} {fast_s * 1e6:8.1f}us {slow_s * 1e6:11.1f}us {slow_s / fast_s:7.1f}x")
    print(
        "\nbusy DGX, driver-like init cost (10 ms): ours with NVML held vs nvidia-ml-py's "
        "init + read + shutdown"
    )
    print(f"{'measure':38} {'ours':>10} {'nvidia-ml-py':>13} {'ratio':>8}")
    for label, fast_s, slow_s, _ in init_rows:
        print(f"{label:38} {fast_s * 1e6:8.1f}us {slow_s * 1e6:11.1f}us {slow_s / fast_s:7.1f}x")
    # Judged on CPU time: on a shared machine the wall clock inflates the slower side.
    ratio, worst = (
        next(slow_s / fast_s for _, fast_s, slow_s, role in rows if role == wanted)
        for wanted in ("judged", "worst")
    )

    ours = _import_us("placement_native", args.imports) / 1000
    theirs = _import_us("pynvml", args.imports) / 1000
    print(f"\nimport time, fresh interpreter (median of {args.imports}, -X importtime)")
    print(f"{'import placement_native':38} {ours:8.2f}ms")
    print(f"{'import pynvml':38} {theirs:8.2f}ms")

    ok_ratio, ok_import = ratio >= TARGET_RATIO, ours < TARGET_IMPORT_MS
    ok_worst = worst >= TARGET_WORST_RATIO
    print(
        f"\ntarget snapshot ratio (CPU time, busy node) >= {TARGET_RATIO:.0f}x: {ratio:.1f}x "
        f"{'met' if ok_ratio else 'MISSED'}; memory moving >= {TARGET_WORST_RATIO:.0f}x: "
        f"{worst:.1f}x {'met' if ok_worst else 'MISSED'}; "
        f"target import < {TARGET_IMPORT_MS:.0f} ms: {ours:.2f} ms "
        f"{'met' if ok_import else 'MISSED'}"
    )
    fast, slow = next((f, s) for _, f, s, role in rows if role == "judged")
    print(
        target_line(
            "snapshot of a busy DGX H100, CPU",
            f"{fast * 1e6:.1f} us",
            f"nvidia-ml-py {slow * 1e6:.1f} us",
            ratio,
            f"speed-up >= {TARGET_RATIO:.0f}x",
            ok_ratio,
        )
    )
    fast, slow = next((f, s) for _, f, s, role in rows if role == "worst")
    print(
        target_line(
            "snapshot, memory moving, CPU",
            f"{fast * 1e6:.1f} us",
            f"nvidia-ml-py {slow * 1e6:.1f} us",
            worst,
            f"speed-up >= {TARGET_WORST_RATIO:.0f}x",
            ok_worst,
        )
    )
    print(
        target_line(
            "import placement_native",
            f"{ours:.2f} ms",
            f"import pynvml {theirs:.2f} ms",
            theirs / ours,
            f"< {TARGET_IMPORT_MS:.0f} ms",
            ok_import,
        )
    )
    return 0 if ok_ratio and ok_worst and ok_import else 1


if __name__ == "__main__":
    sys.exit(main())
