"""The named machines of the testing kit: ``topology("dgx-h100")`` and friends.

Each call builds a fresh ``Topology``, so a test may change it (fail a function, drop a
property) without touching what other tests get.
"""

from __future__ import annotations

from collections.abc import Callable

from placement_native.errors import FakeTopologyError

from ._topology import FakeFabric, FakeGpu, FakeLink, FakeMig, Topology

__all__ = ["TOPOLOGIES", "topology", "topology_names"]


def _uuid(n: int) -> str:
    return f"GPU-{n:08x}-1111-2222-3333-{n:012x}"


def dgx_h100() -> Topology:
    """8 x H100 SXM, 18 NVLinks each into four NVSwitches; GPUs 0-3 on NUMA node 0."""
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
                nvlink_slots=18,
                nvlinks=[FakeLink(k, switches[k % 4], remote="switch") for k in range(18)],
            )
        )
    levels = {
        (a, b): "NODE" if (a < 4) == (b < 4) else "SYS" for a in range(8) for b in range(a + 1, 8)
    }
    return Topology(gpus=gpus, levels=levels, p2p=dict.fromkeys(levels, "OK"))


def pcie_two_switches() -> Topology:
    """8 x L40S on PCIe, no NVLink: 2 sockets, each with two PCIe switches of 2 GPUs.

    GPUs 0-1 and 2-3 sit behind the two switches of socket 0 (NUMA node 0, CPUs 0-31),
    GPUs 4-5 and 6-7 behind those of socket 1 (NUMA node 1, CPUs 32-63). A pair behind
    one switch is ``PIX`` with P2P; two switches of one socket meet at ``NODE`` and
    sockets at ``SYS``, both without P2P (``CNS``).
    """
    buses = ["1B", "1C", "3B", "3C", "9B", "9C", "BB", "BC"]
    gpus = [
        FakeGpu(
            name="NVIDIA L40S",
            uuid=_uuid(0x200 + i),
            bus=f"00000000:{bus}:00.0",
            memory=48305799168,
            numa=i // 4,
            cpus="0-31" if i < 4 else "32-63",
            compute_capability=(8, 9),
            mig=None,
        )
        for i, bus in enumerate(buses)
    ]
    levels = {}
    for a in range(8):
        for b in range(a + 1, 8):
            levels[(a, b)] = "PIX" if a // 2 == b // 2 else "NODE" if a // 4 == b // 4 else "SYS"
    p2p = {pair: "OK" if level == "PIX" else "CNS" for pair, level in levels.items()}
    return Topology(gpus=gpus, levels=levels, p2p=p2p)


def pcie_nvlink_bridges() -> Topology:
    """4 x RTX A6000 on PCIe of one socket; NVLink bridges (4 links) join GPUs 0-2 and 1-3.

    GPUs 0-1 share a PCIe switch, as do 2-3: index order and PCIe nearness pair 0 with 1,
    the bridges pair 0 with 2. Code that takes adjacent indexes as NVLink peers is wrong
    here.
    """
    buses = [f"00000000:{b}:00.0" for b in ("4F", "52", "56", "57")]
    peer = {0: 2, 1: 3, 2: 0, 3: 1}
    gpus = [
        FakeGpu(
            name="NVIDIA RTX A6000",
            uuid=_uuid(0x600 + i),
            bus=buses[i],
            memory=51527024640,
            numa=0,
            cpus="0-47",
            compute_capability=(8, 6),
            mig=None,
            nvlink_slots=4,
            nvlinks=[FakeLink(k, buses[peer[i]]) for k in range(4)],
        )
        for i in range(4)
    ]
    levels = {
        (a, b): "PIX" if a // 2 == b // 2 else "NODE" for a in range(4) for b in range(a + 1, 4)
    }
    return Topology(gpus=gpus, levels=levels, p2p=dict.fromkeys(levels, "OK"))


def mig_node() -> Topology:
    """2 x A100 SXM joined by 4 direct NVLinks; GPU 0 in MIG mode with three instances
    (slot 2 empty), GPU 1 not."""
    a100 = "NVIDIA A100-SXM4-40GB"
    buses = ["00000000:07:00.0", "00000000:0F:00.0"]
    gpus = [
        FakeGpu(
            name=a100,
            uuid=_uuid(0x300 + i),
            bus=buses[i],
            memory=42949672960,
            numa=0,
            cpus="0-63",
            compute_capability=(8, 0),
            mig=i == 0,
            mig_slots=7 if i == 0 else 0,
            nvlink_slots=12,
            nvlinks=[FakeLink(k, buses[1 - i], active=k < 4) for k in range(12)],
        )
        for i in range(2)
    ]
    gpus[0].mig_devices = [
        FakeMig(
            0, 1, 0, 20937965568, "MIG-11111111-aaaa-bbbb-cccc-000000000000", f"{a100} MIG 3g.20gb"
        ),
        FakeMig(
            1, 2, 0, 10468982784, "MIG-22222222-aaaa-bbbb-cccc-000000000000", f"{a100} MIG 2g.10gb"
        ),
        FakeMig(
            3, 5, 0, 5234491392, "MIG-33333333-aaaa-bbbb-cccc-000000000000", f"{a100} MIG 1g.5gb"
        ),
    ]
    return Topology(gpus=gpus, levels={(0, 1): "PXB"}, p2p={(0, 1): "OK"})


def no_permission() -> Topology:
    """The ``pcie-2-switches`` machine where GPU 1 refuses its handle (NO_PERMISSION) and
    GPU 3 falls off the bus (GPU_IS_LOST) when its memory is read."""
    topo = pcie_two_switches()
    topo.gpus[1].fail["nvmlDeviceGetHandleByIndex_v2"] = 4
    topo.gpus[3].fail["nvmlDeviceGetMemoryInfo"] = 15
    return topo


def old_driver() -> Topology:
    """2 V100s on a driver without NUMA-id, scoped-affinity, MIG and NVLink-type symbols;
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
            compute_capability=(7, 0),
            nvlink_slots=6,
            nvlinks=[FakeLink(0, buses[1 - i]), FakeLink(1, buses[1 - i])],
        )
        for i in range(2)
    ]
    gpus[0].nvlinks.append(FakeLink(2, "00000000:AA:00.0", remote="switch"))
    return Topology(gpus=gpus, levels={(0, 1): "SYS"}, p2p={(0, 1): "OK"}, old_driver=True)


NVL72_CLUSTER = "6f1d2c3b-4a59-4e8f-9a7b-0c1d2e3f4a5b"
"""The fabric cluster UUID of the ``gb200-nvl72-tray`` machine."""


def gb200_nvl72_tray() -> Topology:
    """One compute tray of a GB200 NVL72 rack: 4 x B200 (two per Grace CPU), 18 NVLinks
    each into the rack's NVSwitch trays, every GPU registered with the rack's NVLink
    fabric (cluster ``NVL72_CLUSTER``, clique 1, completed, success)."""
    buses = ["00000008:01:00.0", "00000009:01:00.0", "00000018:01:00.0", "00000019:01:00.0"]
    switches = [f"0000000{k}:00:00.0" for k in range(2, 8)]  # far ends in the switch trays
    gpus = [
        FakeGpu(
            name="NVIDIA GB200",
            uuid=_uuid(0x600 + i),
            bus=bus,
            memory=199715979264,
            numa=i // 2,
            cpus="0-71" if i < 2 else "72-143",
            compute_capability=(10, 0),
            nvlink_slots=18,
            nvlinks=[FakeLink(k, switches[k % 6], remote="switch") for k in range(18)],
            fabric=FakeFabric(NVL72_CLUSTER, clique_id=1),
        )
        for i, bus in enumerate(buses)
    ]
    levels = {
        (a, b): "SYS" if a // 2 != b // 2 else "NODE" for a in range(4) for b in range(a + 1, 4)
    }
    return Topology(gpus=gpus, levels=levels, p2p=dict.fromkeys(levels, "OK"))


NO_CLUSTER = "00000000-0000-0000-0000-000000000000"
"""The cluster UUID a driver reports for a GPU outside any NVLink fabric."""


def h200() -> Topology:
    """One H200 SXM of an 8-GPU HGX board, as driver 580.159.04 reports it (outside any
    NVLink rack): the fabric query answers SUCCESS (struct v3, v2 and the legacy call
    alike) with state NOT_SUPPORTED, status 0, a zero cluster UUID, clique 0 and health
    mask 0."""
    gpu = FakeGpu(
        name="NVIDIA H200",
        uuid=_uuid(0x700),
        bus="00000000:19:00.0",
        memory=150754820096,
        numa=0,
        cpus="0-47,96-143",
        compute_capability=(9, 0),
        fabric=FakeFabric(NO_CLUSTER, clique_id=0, state="not_supported", status=0),
    )
    return Topology(gpus=[gpu], driver="580.159.04")


def no_driver() -> Topology:
    """NVML is installed but ``nvmlInit`` fails: NVML_ERROR_DRIVER_NOT_LOADED (9)."""
    return Topology(gpus=[FakeGpu(uuid=_uuid(0x500), bus="00000000:18:00.0")], init_error=9)


def no_gpus() -> Topology:
    """A working driver that sees no GPU (a CPU node with the driver installed)."""
    return Topology()


TOPOLOGIES: dict[str, Callable[[], Topology]] = {
    "dgx-h100": dgx_h100,
    "gb200-nvl72-tray": gb200_nvl72_tray,
    "h200": h200,
    "pcie-4x-nvlink-bridges": pcie_nvlink_bridges,
    "pcie-2-switches": pcie_two_switches,
    "mig": mig_node,
    "no-permission": no_permission,
    "old-driver": old_driver,
    "no-driver": no_driver,
    "no-gpus": no_gpus,
}


def topology_names() -> list[str]:
    """The names ``topology()`` and ``fake_nvml()`` accept."""
    return list(TOPOLOGIES)


def topology(name: str) -> Topology:
    """A fresh copy of a named machine.

    Args:
        name: One of ``topology_names()``: ``dgx-h100``, ``gb200-nvl72-tray``, ``h200``,
            ``pcie-4x-nvlink-bridges``,
            ``pcie-2-switches``, ``mig``, ``no-permission``, ``old-driver``, ``no-driver``,
            ``no-gpus``.

    Raises:
        FakeTopologyError: the name is unknown.
    """
    make = TOPOLOGIES.get(name) if isinstance(name, str) else None
    if make is None:
        raise FakeTopologyError(
            f"topology: expected one of {', '.join(TOPOLOGIES)} or a JSON file, got {name!r}",
            field="topology",
        )
    return make()
