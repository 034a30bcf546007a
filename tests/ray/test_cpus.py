"""bind_cpus: a worker bound to the CPUs its placement names (PLACEMENT_CPU_AFFINITY)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from placement_core import format_rank_list
from placement_ray._cpus import bind_cpus, current_cpus
from placement_ray.errors import CpuBindingError

ALLOWED = sorted(os.sched_getaffinity(0))


@pytest.mark.parametrize("cpus", [None, ""])
def test_nothing_to_bind_without_a_cpu_list(cpus: str | None) -> None:
    assert bind_cpus(cpus, name="actor rank 0") is None


def test_binding_to_the_allowed_cpus_keeps_them() -> None:
    assert bind_cpus(format_rank_list(ALLOWED), name="actor rank 0") == tuple(ALLOWED)
    assert current_cpus() == format_rank_list(ALLOWED)


def test_cpus_this_process_may_not_use_are_an_error() -> None:
    beyond = ALLOWED[-1] + 1000
    with pytest.raises(CpuBindingError, match=rf"actor rank 3: .* names CPU\(s\) {beyond} "):
        bind_cpus(f"{ALLOWED[0]},{beyond}", name="actor rank 3")


def test_a_malformed_cpu_list_is_an_error() -> None:
    with pytest.raises(CpuBindingError, match="is not a CPU list"):
        bind_cpus("0-x", name="agent rank 1")


def test_every_thread_is_bound_including_ones_started_before() -> None:
    script = textwrap.dedent(
        f"""
        import os, threading
        from placement_ray._cpus import bind_cpus
        ready, done = threading.Event(), threading.Event()
        ids = []
        def run():
            ids.append(threading.get_native_id())
            ready.set()
            done.wait()
        thread = threading.Thread(target=run)
        thread.start()
        ready.wait()
        bind_cpus("{ALLOWED[0]}", name="w")
        print(sorted(os.sched_getaffinity(0)), sorted(os.sched_getaffinity(ids[0])))
        done.set()
        thread.join()
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", script], check=True, capture_output=True, text=True, timeout=60
    )
    assert out.stdout.split("] [") == [f"[{ALLOWED[0]}", f"{ALLOWED[0]}]\n"]
