"""Build the fake ``libnvidia-ml.so.1`` and write the topologies it serves.

Used by the native test suite (session fixture) and by ``benchmarks/bench_native_snapshot.py``.
A topology is a list of directives (see ``fake_nvml.c``); the scenario functions below
describe the machines the tests run against.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

__all__ = [
    "FakeGpu",
    "Topology",
    "build",
    "dgx_h100",
    "init_failure",
    "mig_node",
    "no_permission",
    "old_driver",
    "pcie_two_switches",
]

SOURCE = Path(__file__).with_name("fake_nvml.c")
H100 = "NVIDIA H100 80GB HBM3"
H100_MEMORY = 85520809984

# nvmlGpuTopologyLevel_t / nvmlGpuP2PStatus_t / nvmlIntNvLinkDeviceType_t values
PIX, PXB, PHB, NODE, SYS = 10, 20, 30, 40, 50
P2P_OK, P2P_CHIPSET_NOT_SUPPORTED, P2P_NOT_SUPPORTED = 0, 1, 5
LINK_GPU, LINK_SWITCH = 0, 2


def build(out_dir: Path, *, old_driver: bool = False) -> Path:
    """Compile ``fake_nvml.c`` into ``out_dir/<variant>/libnvidia-ml.so.1``.

    Args:
        out_dir: Where to put the library.
        old_driver: Leave out the optional symbols of newer drivers (NUMA id, memory and
            scoped CPU affinity, MIG, NVLink remote device type).

    Raises:
        RuntimeError: No C compiler, or the compile failed.
    """
    compiler = shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc")
    if compiler is None:
        raise RuntimeError("no C compiler found (set CC): the fake NVML library cannot be built")
    target = out_dir / ("old" if old_driver else "current") / "libnvidia-ml.so.1"
    target.parent.mkdir(parents=True, exist_ok=True)
    command = [compiler, "-shared", "-fPIC", "-O1", "-fvisibility=hidden", "-o", str(target)]
    if old_driver:
        command.append("-DFAKE_OLD_DRIVER")
    result = subprocess.run([*command, str(SOURCE)], capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise RuntimeError(f"building the fake NVML library failed:\n{result.stderr}")
    return target


@dataclass
class FakeGpu:
    """One fake GPU; None leaves the property out (the query answers NOT_SUPPORTED)."""

    name: str = H100
    uuid: str = ""
    bus: str = ""
    memory: int = H100_MEMORY
    numa: int | None = None
    cpus: str | None = None
    cc: tuple[int, int] = (9, 0)
    mig: bool | None = False
    mig_slots: int = 0
    # (slot, gpu instance id, compute instance id, memory, uuid, name)
    mig_devices: list[tuple[int, int, int, int, str, str]] = field(default_factory=list)
    link_slots: int = 0
    # (link, active, remote type, remote bus id)
    links: list[tuple[int, int, int, str]] = field(default_factory=list)
    # NVML function -> return code
    fail: dict[str, int] = field(default_factory=dict)


@dataclass
class Topology:
    """A fake node: what the library answers, and what the tests expect to read.

    Text fields may hold lone surrogates (``"\\udcff"``): they are written as the raw
    bytes they stand for, so the library serves strings that are not valid UTF-8.
    """

    gpus: list[FakeGpu] = field(default_factory=list)
    driver: str = "550.54.15"
    init: int = 0
    count: int | None = None  # the device count answered, if not the declared GPUs'
    shutdown: int = 0  # nvmlShutdown's return code
    levels: dict[tuple[int, int], int] = field(default_factory=dict)
    p2p: dict[tuple[int, int], int] = field(default_factory=dict)
    old_driver: bool = False

    def render(self) -> str:
        lines = [f"driver {self.driver}", f"init {self.init}", f"shutdown {self.shutdown}"]
        if self.count is not None:
            lines.append(f"count {self.count}")
        for i, g in enumerate(self.gpus):
            lines += [f"gpu {i} name {g.name}", f"gpu {i} uuid {g.uuid}", f"gpu {i} bus {g.bus}"]
            lines += [f"gpu {i} mem {g.memory}", f"gpu {i} cc {g.cc[0]} {g.cc[1]}"]
            if g.numa is not None:
                lines.append(f"gpu {i} numa {g.numa}")
            if g.cpus is not None:
                lines.append(f"gpu {i} cpus {g.cpus}")
            if g.mig is not None:
                lines += [f"gpu {i} mig {int(g.mig)}", f"gpu {i} migslots {g.mig_slots}"]
            for slot, gi, ci, mem, uuid, name in g.mig_devices:
                lines.append(f"gpu {i} migdev {slot} {gi} {ci} {mem} {uuid} {name}")
            if g.link_slots:
                lines.append(f"gpu {i} links {g.link_slots}")
            for link, active, kind, remote in g.links:
                lines.append(f"gpu {i} nvlink {link} {active} {kind} {remote}")
            for function, code in g.fail.items():
                lines.append(f"gpu {i} fail {function} {code}")
        lines += [f"topo {a} {b} {v}" for (a, b), v in sorted(self.levels.items())]
        lines += [f"p2p {a} {b} {v}" for (a, b), v in sorted(self.p2p.items())]
        return "\n".join(lines) + "\n"

    def write(self, path: Path) -> Path:
        path.write_text(self.render(), encoding="utf-8", errors="surrogateescape")
        return path


def _uuid(n: int) -> str:
    return f"GPU-{n:08x}-1111-2222-3333-{n:012x}"


def dgx_h100() -> Topology:
    """8 x H100 SXM, 18 NVLinks each into four NVSwitches, GPUs 0-3 on NUMA node 0."""
    buses = ["18", "2A", "3A", "5D", "9A", "AB", "BA", "DB"]
    switches = [f"00000000:{b}:00.0" for b in ("05", "06", "07", "08")]
    gpus = []
    for i, bus in enumerate(buses):
        numa = 0 if i < 4 else 1
        gpus.append(
            FakeGpu(
                uuid=_uuid(0x100 + i),
                bus=f"00000000:{bus}:00.0",
                numa=numa,
                cpus="0-55,112-167" if numa == 0 else "56-111,168-223",
                link_slots=18,
                links=[(k, 1, LINK_SWITCH, switches[k % 4]) for k in range(18)],
            )
        )
    levels = {
        (a, b): NODE if (a < 4) == (b < 4) else SYS for a in range(8) for b in range(a + 1, 8)
    }
    return Topology(gpus=gpus, levels=levels, p2p=dict.fromkeys(levels, P2P_OK))


def pcie_two_switches() -> Topology:
    """4 x L40S on PCIe, no NVLink: GPUs 0-1 behind one switch on NUMA node 0, GPUs 2-3
    behind another on NUMA node 1."""
    gpus = [
        FakeGpu(
            name="NVIDIA L40S",
            uuid=_uuid(0x200 + i),
            bus=f"00000000:{bus}:00.0",
            memory=48305799168,
            numa=0 if i < 2 else 1,
            cpus="0-31" if i < 2 else "32-63",
            cc=(8, 9),
            mig=None,
        )
        for i, bus in enumerate(["1B", "1C", "9B", "9C"])
    ]
    levels = {(0, 1): PIX, (2, 3): PIX}
    levels.update({(a, b): SYS for a in (0, 1) for b in (2, 3)})
    p2p = {
        pair: P2P_OK if level == PIX else P2P_CHIPSET_NOT_SUPPORTED
        for pair, level in levels.items()
    }
    return Topology(gpus=gpus, levels=levels, p2p=p2p)


def mig_node() -> Topology:
    """2 x A100 SXM joined by 4 direct NVLinks; GPU 0 in MIG mode with three instances
    (slot 2 empty), GPU 1 not."""
    a100 = "NVIDIA A100-SXM4-40GB"
    buses = ["00000000:07:00.0", "00000000:0F:00.0"]
    gpus = []
    for i in range(2):
        other = buses[1 - i]
        gpus.append(
            FakeGpu(
                name=a100,
                uuid=_uuid(0x300 + i),
                bus=buses[i],
                memory=42949672960,
                numa=0,
                cpus="0-63",
                cc=(8, 0),
                mig=i == 0,
                mig_slots=7 if i == 0 else 0,
                link_slots=12,
                links=[(k, 1 if k < 4 else 0, LINK_GPU, other) for k in range(12)],
            )
        )
    gpus[0].mig_devices = [
        (0, 1, 0, 20937965568, "MIG-11111111-aaaa-bbbb-cccc-000000000000", f"{a100} MIG 3g.20gb"),
        (1, 2, 0, 10468982784, "MIG-22222222-aaaa-bbbb-cccc-000000000000", f"{a100} MIG 2g.10gb"),
        (3, 5, 0, 5234491392, "MIG-33333333-aaaa-bbbb-cccc-000000000000", f"{a100} MIG 1g.5gb"),
    ]
    return Topology(gpus=gpus, levels={(0, 1): PXB}, p2p={(0, 1): P2P_OK})


def no_permission() -> Topology:
    """4 PCIe GPUs: GPU 1 refuses its handle (NO_PERMISSION), GPU 3 falls off the bus
    (GPU_IS_LOST) when its memory is read."""
    topo = pcie_two_switches()
    topo.gpus[1].fail["nvmlDeviceGetHandleByIndex_v2"] = 4
    topo.gpus[3].fail["nvmlDeviceGetMemoryInfo"] = 15
    return topo


def old_driver() -> Topology:
    """2 GPUs on a driver without NUMA-id, scoped-affinity, MIG and NVLink-type symbols;
    GPU 0 has 2 NVLinks to GPU 1 and 1 to a bus that is no GPU of this node."""
    buses = ["00000000:3B:00.0", "00000000:5E:00.0"]
    gpus = [
        FakeGpu(
            name="Tesla V100-SXM2-32GB",
            uuid=_uuid(0x400 + i),
            bus=buses[i],
            memory=34359738368,
            numa=i,  # served only through the symbols this driver lacks
            cpus="0-19" if i == 0 else "20-39",
            cc=(7, 0),
            link_slots=6,
            links=[(0, 1, LINK_GPU, buses[1 - i]), (1, 1, LINK_GPU, buses[1 - i])],
        )
        for i in range(2)
    ]
    gpus[0].links.append((2, 1, LINK_SWITCH, "00000000:AA:00.0"))
    return Topology(gpus=gpus, levels={(0, 1): SYS}, p2p={(0, 1): P2P_OK}, old_driver=True)


def init_failure(code: int = 9) -> Topology:
    """nvmlInit fails (9: NVML_ERROR_DRIVER_NOT_LOADED by default)."""
    return Topology(gpus=[FakeGpu(uuid=_uuid(0x500), bus="00000000:18:00.0")], init=code)
