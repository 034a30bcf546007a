"""The README's main command end to end: ``python -m placement_ray.demo``.

It starts its own simulated 4-node cluster, so it runs in a fresh interpreter; while it
runs, every TCP listener the machine opens is sampled, and none may be on an address
other than loopback.
"""

from __future__ import annotations

import ipaddress
import os
import subprocess
import sys
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _listeners() -> set[tuple[str, int]]:
    """``(address, port)`` of every listening TCP socket, from /proc/net/tcp{,6}."""
    found: set[tuple[str, int]] = set()
    for name in ("tcp", "tcp6"):
        try:
            lines = Path(f"/proc/net/{name}").read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if fields[3] != "0A":  # LISTEN
                continue
            address, port = fields[1].split(":")
            raw = bytes.fromhex(address)
            # The kernel prints each 32-bit word in host (little-endian) order.
            words = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
            found.add((str(ipaddress.ip_address(words)), int(port, 16)))
    return found


def _loopback(address: str) -> bool:
    ip = ipaddress.ip_address(address)
    mapped = getattr(ip, "ipv4_mapped", None)
    return bool(ip.is_loopback or (mapped is not None and mapped.is_loopback))


def test_demo_agrees_with_the_plan_and_stays_on_loopback() -> None:
    before = _listeners()
    seen: set[tuple[str, int]] = set()
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            seen.update(_listeners())
            done.wait(0.5)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    env = {**os.environ, "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}
    env.pop("RAY_ADDRESS", None)
    try:
        result = subprocess.run(
            [sys.executable, "-m", "placement_ray.demo", "--examples", str(ROOT / "examples")],
            capture_output=True,
            text=True,
            timeout=300,
            env=env,
            check=False,
        )
    finally:
        done.set()
        sampler.join(timeout=5)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    assert " 0 mismatches" in result.stdout
    assert "rollout rank -> trainer ranks on its GPUs: 0->[0, 2], 1->[1, 3]" in result.stdout
    assert "sees dist_init_addr" in result.stdout
    # Ray's own INFO lines ("Connecting to existing Ray cluster at address ...") would
    # interleave with the demo's tables; the README's transcript has none.
    ray_info = [line for line in (result.stdout + result.stderr).splitlines() if "INFO " in line]
    assert not ray_info, ray_info[:5]
    exposed = {(a, p) for a, p in seen - before if not _loopback(a)}
    assert not exposed, f"listening beyond loopback: {sorted(exposed)}"
