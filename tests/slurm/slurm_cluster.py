"""A two-node SLURM cluster on this machine, for examples/cluster/slurm_ray.sh.

Debian's SLURM (``slurm-wlm``) and ``munge``: one ``munged`` with a key made for the run,
one ``slurmctld`` and two ``slurmd`` (``node0``, ``node1``: their own names, ports, spool
directories, pid and log files), all on loopback. ``nox -s slurm`` installs the packages
and starts these tests in a network namespace of their own that has only the loopback
interface, so nothing the daemons, ``srun`` or Ray open can be reached from outside the
machine (SLURM 22.05 binds its ports on every address of its namespace). Each daemon is
stopped by its pid at the end.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DAEMONS = ("munged", "mungekey", "slurmctld", "slurmd", "sbatch", "sinfo")
NODES = ("node0", "node1")
CONTROLLER_PORT, FIRST_SLURMD_PORT = 16817, 16820


def unavailable(reason: str) -> None:
    """Skip, except under CI=true, where a SLURM test that cannot run fails."""
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(reason, pytrace=False)
    pytest.skip(reason)


def interfaces() -> list[str]:
    """The network interfaces of this process's namespace (/sys shows the host's)."""
    lines = Path("/proc/self/net/dev").read_text().splitlines()[2:]
    return sorted(line.split(":", 1)[0].strip() for line in lines)


def namespace_processes() -> dict[int, str]:
    """The processes of this network namespace: pid -> command name."""
    mine = os.readlink("/proc/self/ns/net")
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if os.readlink(entry / "ns" / "net") == mine:
                found[int(entry.name)] = (entry / "comm").read_text().strip()
        except OSError:
            continue  # ended meanwhile
    return found


def _parent(pid: int) -> int:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0
    return int(stat.rsplit(")", 1)[1].split()[1])


def _ancestors() -> set[int]:
    """This process and its ancestors (the shell that made the namespace, pytest)."""
    pids, pid = set(), os.getpid()
    while pid > 1:
        pids.add(pid)
        pid = _parent(pid)
    return pids


SLURM_CONF = """\
ClusterName=placementci
SlurmctldHost={host}(127.0.0.1)
SlurmctldPort={controller_port}
AuthType=auth/munge
AuthInfo=socket={root}/munge/munge.sock
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation={root}/state
SlurmdSpoolDir={root}/spool/%n
SlurmctldPidFile={root}/slurmctld.pid
SlurmdPidFile={root}/slurmd-%n.pid
SlurmctldLogFile={root}/slurmctld.log
SlurmdLogFile={root}/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/builtin
MpiDefault=none
ReturnToService=2
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
SrunPortRange=16900-16999
{nodes}
PartitionName=ci Nodes={node_list} Default=YES MaxTime=INFINITE State=UP
"""


class SlurmCluster:
    """Two slurmd, a slurmctld and munged, started in ``root``; :meth:`stop` ends them."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.conf = root / "slurm.conf"
        self.pids: dict[str, int] = {}
        self.env = {**os.environ, "SLURM_CONF": str(self.conf)}

    def start(self) -> None:
        (self.root / "munge").mkdir(mode=0o700)
        (self.root / "state").mkdir()
        for node in NODES:
            (self.root / "spool" / node).mkdir(parents=True)
        munge = self.root / "munge"
        subprocess.run(["mungekey", "--create", f"--keyfile={munge}/munge.key"], check=True)
        self._daemon(
            "munged",
            [
                "munged",
                "--force",
                f"--socket={munge}/munge.sock",
                f"--key-file={munge}/munge.key",
                f"--log-file={munge}/munged.log",
                f"--seed-file={munge}/munged.seed",
                f"--pid-file={munge}/munged.pid",
            ],
            munge / "munged.pid",
        )
        nodes = "\n".join(
            f"NodeName={node} NodeHostname={os.uname().nodename} NodeAddr=127.0.0.1 "
            f"Port={FIRST_SLURMD_PORT + i} CPUs={os.cpu_count()} State=UNKNOWN"
            for i, node in enumerate(NODES)
        )
        self.conf.write_text(
            SLURM_CONF.format(
                host=os.uname().nodename,
                controller_port=CONTROLLER_PORT,
                root=self.root,
                nodes=nodes,
                node_list=",".join(NODES),
            )
        )
        self._daemon("slurmctld", ["slurmctld", "-i"], self.root / "slurmctld.pid")
        for node in NODES:
            self._daemon(node, ["slurmd", "-N", node], self.root / f"slurmd-{node}.pid")
        self._wait_idle()

    def _daemon(self, name: str, argv: list[str], pid_file: Path) -> None:
        subprocess.run(argv, check=True, env=self.env)  # each forks into the background
        deadline = time.monotonic() + 20
        while not (pid_file.exists() and pid_file.read_text().strip()):
            if time.monotonic() > deadline:
                raise RuntimeError(f"{name} wrote no pid file {pid_file}: see {self.root}")
            time.sleep(0.1)
        self.pids[name] = int(pid_file.read_text())

    def _wait_idle(self) -> None:
        deadline = time.monotonic() + 60
        while True:
            shown = subprocess.run(
                ["sinfo", "--Node", "--noheader", "--format=%N %t"],
                env=self.env,
                capture_output=True,
                text=True,
                check=False,
            ).stdout.split()
            if shown.count("idle") == len(NODES):
                return
            if time.monotonic() > deadline:
                logs = "\n".join(p.read_text()[-2000:] for p in self.root.glob("*.log"))
                raise RuntimeError(f"SLURM nodes not idle after 60 s: {shown}\n{logs}")
            time.sleep(0.5)

    def daemon_pids(self) -> set[int]:
        return set(self.pids.values())

    def stop(self) -> None:
        for name, pid in reversed(list(self.pids.items())):
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                continue
            deadline = time.monotonic() + 20
            while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
                time.sleep(0.1)
            if Path(f"/proc/{pid}").exists():
                print(f"{name} (pid {pid}) ignored SIGTERM; SIGKILL", file=sys.stderr)
                os.kill(pid, signal.SIGKILL)

    def leftovers(self) -> dict[int, str]:
        """Processes of this namespace that are neither the daemons nor this test run."""
        keep = self.daemon_pids() | _ancestors()
        controller = self.pids.get("slurmctld")
        return {
            pid: name
            for pid, name in namespace_processes().items()
            if pid not in keep and not (name == "slurmscriptd" and _parent(pid) == controller)
        }
