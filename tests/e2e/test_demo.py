"""The README's main command end to end: ``python -m placement_ray.demo``.

It starts its own simulated 4-node cluster, so it runs in a fresh interpreter; while it
runs, the TCP listeners of the demo's own processes are sampled (found by a marker in their
environment, which Ray passes on to every process it starts, or by descent from the demo),
and none may be on an address other than loopback. Other programs on the machine may
listen wherever they like: one listens on 0.0.0.0 for the whole test.
"""

from __future__ import annotations

import ipaddress
import os
import signal
import socket
import subprocess
import sys
import threading
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _listeners() -> dict[int, tuple[str, int]]:
    """``(address, port)`` of every listening TCP socket by socket inode, from
    /proc/net/tcp{,6}."""
    found: dict[int, tuple[str, int]] = {}
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
            found[int(fields[9])] = (str(ipaddress.ip_address(words)), int(port, 16))
    return found


def _parent(pid: int) -> int:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0
    # The command name in parentheses may hold spaces; the ppid follows its ')'.
    return int(stat.rsplit(")", 1)[1].split()[1])


def _marked(pid: int, marker: bytes) -> bool:
    try:
        return marker in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return False


def _own_processes(root: int, marker: bytes, known: set[int]) -> set[int]:
    """The demo's processes: ``root``'s descendants and every process with ``marker``."""
    pids = [int(p) for p in os.listdir("/proc") if p.isdigit()]
    parents = {pid: _parent(pid) for pid in pids}
    own = {root} | {pid for pid in pids if pid in known or _marked(pid, marker)}
    grew = True
    while grew:
        more = {pid for pid, parent in parents.items() if parent in own} - own
        own |= more
        grew = bool(more)
    return own


def _socket_inodes(pids: set[int]) -> set[int]:
    inodes: set[int] = set()
    for pid in pids:
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if target.startswith("socket:["):
                inodes.add(int(target[8:-1]))
    return inodes


def _loopback(address: str) -> bool:
    ip = ipaddress.ip_address(address)
    mapped = getattr(ip, "ipv4_mapped", None)
    return bool(ip.is_loopback or (mapped is not None and mapped.is_loopback))


def test_demo_agrees_with_the_plan_and_stays_on_loopback() -> None:
    marker = f"PLACEMENT_E2E_DEMO={uuid.uuid4().hex}"
    own: set[int] = set()
    seen: set[tuple[str, int]] = set()
    done = threading.Event()
    env = {**os.environ, "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", **dict([marker.split("=")])}
    env.pop("RAY_ADDRESS", None)
    # Someone else's program listening on every address must not count against the demo.
    bystander = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    bystander.bind(("0.0.0.0", 0))
    bystander.listen()
    bystander_port = bystander.getsockname()[1]
    demo = subprocess.Popen(
        [sys.executable, "-m", "placement_ray.demo", "--examples", str(ROOT / "examples")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )

    def sample() -> None:
        while not done.is_set():
            own.update(_own_processes(demo.pid, marker.encode(), own))
            listening = _listeners()
            seen.update(listening[i] for i in _socket_inodes(own) if i in listening)
            done.wait(0.5)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        stdout, stderr = demo.communicate(timeout=540)
    except subprocess.TimeoutExpired:
        demo.kill()
        stdout, stderr = demo.communicate()
    finally:
        done.set()
        sampler.join(timeout=5)
        bystander.close()
    result = subprocess.CompletedProcess(demo.args, demo.returncode, stdout, stderr)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    assert " 0 mismatches" in result.stdout
    assert "rollout rank -> trainer ranks on its GPUs: 0->[0, 2], 1->[1, 3]" in result.stdout
    assert "sees dist_init_addr" in result.stdout
    # Ray's own INFO lines ("Connecting to existing Ray cluster at address ...") would
    # interleave with the demo's tables; the README's transcript has none.
    ray_info = [line for line in (result.stdout + result.stderr).splitlines() if "INFO " in line]
    assert not ray_info, ray_info[:5]
    # The sampler did find the demo's own listeners (Ray's GCS, raylets, workers) ...
    assert len(seen) >= 4, f"too few of the demo's listeners found: {sorted(seen)}"
    # ... and the bystander's is not among them.
    assert ("0.0.0.0", bystander_port) not in seen
    exposed = {(a, p) for a, p in seen if not _loopback(a)}
    assert not exposed, f"listening beyond loopback: {sorted(exposed)}"


def test_ctrl_c_ends_the_demo_with_one_line_and_its_cluster_shut_down() -> None:
    env = {**os.environ, "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", "PYTHONUNBUFFERED": "1"}
    env.pop("RAY_ADDRESS", None)
    demo = subprocess.Popen(
        [sys.executable, "-m", "placement_ray.demo"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert demo.stdout is not None
    try:
        for line in demo.stdout:  # interrupt once the cluster is up and in use
            if line.startswith("== discovery"):
                break
        demo.send_signal(signal.SIGINT)
        _, stderr = demo.communicate(timeout=240)
    finally:
        if demo.poll() is None:
            demo.kill()
            demo.communicate()
    assert demo.returncode == 130, stderr[-3000:]
    assert "Traceback" not in stderr, stderr[-3000:]
    assert stderr.strip().splitlines()[-1] == (
        "interrupted: the demo's simulated cluster was shut down"
    )
