"""NVML stays initialised between snapshots (both backends), and is let go when it must be.

On a real driver ``nvmlInit`` + ``nvmlShutdown`` cost about 10 ms, twenty times the read
itself: a reader initialises NVML once and holds it until ``release_nvml()`` or the
interpreter's exit. A failed init is never kept, a forked child inits its own session,
and a session the driver dropped is initialised again once. The fake library counts its
``nvmlInit`` and ``nvmlShutdown`` calls (``FakeNvml.nvml_calls()``).
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator

import pytest

from placement_native import _snapshot, release_nvml
from placement_native.errors import NVMLError
from placement_native.testing import FakeNvml, topology

from .conftest import UseNode


@pytest.fixture(autouse=True)
def _released() -> Iterator[None]:
    """Each test starts and ends with no session held."""
    with contextlib.suppress(NVMLError):
        release_nvml()
    yield
    with contextlib.suppress(NVMLError):
        release_nvml()


def _delta(fake: FakeNvml, before: tuple[int, int]) -> tuple[int, int]:
    inits, shutdowns = fake.nvml_calls()
    return inits - before[0], shutdowns - before[1]


def test_successive_snapshots_init_nvml_once(
    use_node: UseNode, nvml_backend: _snapshot.Backend
) -> None:
    fake = use_node("dgx-h100")
    before = fake.nvml_calls()
    snaps = [_snapshot.take(nvml_backend) for _ in range(5)]
    assert _delta(fake, before) == (1, 0)
    assert all(len(s.accelerators) == 8 and s.nvml_error is None for s in snaps)


def test_release_shuts_nvml_down_and_the_next_snapshot_inits_again(
    use_node: UseNode, nvml_backend: _snapshot.Backend
) -> None:
    fake = use_node("pcie-2-switches")
    before = fake.nvml_calls()
    _snapshot.take(nvml_backend)
    release_nvml()
    assert _delta(fake, before) == (1, 1)
    assert not _snapshot._readers.get(nvml_backend).holds()
    assert len(_snapshot.take(nvml_backend).accelerators) == 8
    assert _delta(fake, before) == (2, 1)


def test_release_without_a_session_does_nothing(
    use_node: UseNode, nvml_backend: _snapshot.Backend
) -> None:
    fake = use_node("pcie-2-switches")
    _snapshot.take(nvml_backend)
    release_nvml()
    before = fake.nvml_calls()
    release_nvml()
    assert _delta(fake, before) == (0, 0)


def test_a_failed_init_is_tried_again_by_the_next_snapshot(
    use_node: UseNode, nvml_backend: _snapshot.Backend
) -> None:
    machine = topology("dgx-h100")
    machine.init_error = 9  # DRIVER_NOT_LOADED
    fake = use_node(machine)
    before = fake.nvml_calls()
    for _ in range(2):
        snap = _snapshot.take(nvml_backend)
        assert snap.accelerators == ()
        assert snap.nvml_error is not None
        assert "NVML_ERROR_DRIVER_NOT_LOADED" in snap.nvml_error
    assert _delta(fake, before) == (2, 0)
    assert not _snapshot._readers.get(nvml_backend).holds()
    # The driver loads: the same node, its init now succeeding (the file's size changes
    # with the driver string, so the fake sees a new file whatever the clock's grain).
    machine.init_error = 0
    machine.driver = "580.159.04"
    machine.write(fake.topology_file)
    snap = _snapshot.take(nvml_backend)
    assert (len(snap.accelerators), snap.nvml_error, snap.driver) == (8, None, "580.159.04")
    assert _snapshot._readers.get(nvml_backend).holds()


def test_a_session_the_driver_dropped_is_initialised_again(
    use_node: UseNode, nvml_backend: _snapshot.Backend
) -> None:
    fake = use_node("dgx-h100")
    _snapshot.take(nvml_backend)
    before = fake.nvml_calls()
    # Another machine behind the same library: the fake answers the held session with
    # NVML_ERROR_UNINITIALIZED, as a reloaded driver would.
    use_node("pcie-2-switches")
    snap = _snapshot.take(nvml_backend)
    assert snap.nvml_error is None
    assert {a.model for a in snap.accelerators} == {"NVIDIA L40S"}
    assert _delta(fake, before) == (1, 1)  # the dropped reference is given back first


def test_a_gpu_lost_under_a_held_session_costs_one_init_then_is_reported(
    use_node: UseNode, nvml_backend: _snapshot.Backend
) -> None:
    machine = topology("dgx-h100")
    machine.gpus[3].fail["nvmlDeviceGetUUID"] = 15  # GPU_IS_LOST
    fake = use_node(machine)
    first = _snapshot.take(nvml_backend)  # a fresh session: nothing to try again
    before = fake.nvml_calls()
    again = _snapshot.take(nvml_backend)
    assert _delta(fake, before) == (1, 1)
    assert again == first
    assert again.accelerators[3].error is not None
    assert "NVML_ERROR_GPU_IS_LOST" in again.accelerators[3].error


def test_a_forked_child_inits_its_own_session(
    use_node: UseNode, nvml_backend: _snapshot.Backend
) -> None:
    fake = use_node("dgx-h100")
    _snapshot.take(nvml_backend)
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report how its snapshots went, and leave at once
        code = 1
        try:
            os.close(read_end)
            before = fake.nvml_calls()
            held = _snapshot._readers.get(nvml_backend).holds()
            snaps = [_snapshot.take(nvml_backend) for _ in range(3)]
            report = f"{held} {_delta(fake, before)[0]} {len(snaps[-1].accelerators)}"
            os.write(write_end, report.encode())
            code = 0
        finally:
            os._exit(code)
    os.close(write_end)
    with os.fdopen(read_end) as pipe:
        report = pipe.read()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert report == "False 1 8"  # the parent's session dropped, one init of its own
    before = fake.nvml_calls()
    _snapshot.take(nvml_backend)
    assert _delta(fake, before) == (0, 0)  # the parent still holds its session


def test_the_interpreter_exit_gives_the_session_back(
    use_node: UseNode, nvml_backend: _snapshot.Backend
) -> None:
    fake = use_node("pcie-2-switches")
    # Registered before placement_native's own handler, so it runs after it.
    script = textwrap.dedent(
        f"""
        import atexit, ctypes, os
        lib = ctypes.CDLL(os.environ["PLACEMENT_NVML_LIBRARY"])
        count = lambda: ctypes.c_int.in_dll(lib, "fake_nvml_shutdown_count").value
        atexit.register(lambda: print("at exit", count()))
        from placement_native import _snapshot
        for _ in range(3):
            _snapshot.take({nvml_backend!r})
        print("after 3 snapshots", count())
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        env=os.environ | fake.env,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    assert done.stdout.splitlines() == ["after 3 snapshots 0", "at exit 1"]
