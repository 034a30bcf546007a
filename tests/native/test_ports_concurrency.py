"""Reservations across processes: nobody gets a port another process holds."""

from __future__ import annotations

import multiprocessing
import subprocess
import sys
from multiprocessing.synchronize import Barrier

import pytest

from placement_native.ports import find_free_ports, reserve_ports

WORKERS = 4
ROUNDS = 100
RANGE_SIZE = 48  # small, so that the workers really compete for the same ports


def _compete(
    worker: int, low: int, barrier: Barrier, results: multiprocessing.queues.Queue[object]
) -> None:
    try:
        for round_ in range(ROUNDS):
            consecutive = round_ % 2 == 1
            barrier.wait(timeout=30)  # everyone reads the socket table at the same moment
            held = reserve_ports(3, consecutive=consecutive, start=low, end=low + RANGE_SIZE - 1)
            results.put((round_, worker, held.ports))
            barrier.wait(timeout=30)  # everyone still holds their ports here
            held.release()
    except BaseException as exc:
        results.put((-1, worker, repr(exc)))
        barrier.abort()


def _bind_in_child(port: int) -> int:
    code = "import socket, sys\nsocket.socket().bind(('127.0.0.1', int(sys.argv[1])))"
    return subprocess.run(
        [sys.executable, "-c", code, str(port)], capture_output=True, timeout=60, check=False
    ).returncode


def test_processes_reserving_at_once_never_share_a_port() -> None:
    if "fork" not in multiprocessing.get_all_start_methods():
        pytest.skip("needs the fork start method")
    context = multiprocessing.get_context("fork")
    low = find_free_ports(RANGE_SIZE, consecutive=True, start=24000, end=24999)[0]
    barrier = context.Barrier(WORKERS)
    results: multiprocessing.queues.Queue[object] = context.Queue()
    workers = [
        context.Process(target=_compete, args=(worker, low, barrier, results))
        for worker in range(WORKERS)
    ]
    for process in workers:
        process.start()
    try:
        rounds: dict[int, list[tuple[int, ...]]] = {}
        for _ in range(WORKERS * ROUNDS):
            round_, worker, ports = results.get(timeout=60)  # type: ignore[misc]
            assert round_ >= 0, f"worker {worker} failed: {ports}"
            rounds.setdefault(round_, []).append(ports)
    finally:
        for process in workers:
            process.join(timeout=60)
            if process.is_alive():
                process.kill()
    assert sorted(rounds) == list(range(ROUNDS))
    for round_, taken in rounds.items():
        flat = [port for ports in taken for port in ports]
        assert len(flat) == len(set(flat)) == WORKERS * 3, f"round {round_}: {taken}"
        assert all(low <= port < low + RANGE_SIZE for port in flat)
        if round_ % 2:
            assert all(ports == tuple(range(ports[0], ports[0] + 3)) for ports in taken)


def test_another_process_cannot_bind_a_held_port_until_it_is_released() -> None:
    held = reserve_ports(1, start=24000, end=24999)
    port = held.ports[0]
    assert _bind_in_child(port) != 0
    held.hand_over(port)
    assert _bind_in_child(port) == 0
