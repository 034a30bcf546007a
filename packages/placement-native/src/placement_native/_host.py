"""Facts about this host that need no NVML: hostname, primary IP, CPUs, NUMA nodes, memory,
and the sysfs view of a PCI device's NUMA node and local CPUs.

Nothing here sends a packet: the primary IP is the address of the interface that holds
the default route (read from ``/proc/net/route``, address via ``SIOCGIFADDR``), else an
address the hostname resolves to, else loopback.
"""

from __future__ import annotations

import fcntl
import ipaddress
import os
import re
import socket
import struct
from collections.abc import Iterable
from pathlib import Path

from ._env import env_path

__all__ = [
    "choose_ip",
    "cpu_count",
    "cpulist_from_mask",
    "format_cpulist",
    "host_memory_bytes",
    "hostname",
    "ipv4_broadcasts",
    "numa_node_count",
    "parse_cpulist",
    "pci_sysfs_affinity",
    "primary_ip",
    "route_ipv4",
    "sysfs_root",
]

ROUTE_FILE = Path("/proc/net/route")
SYSFS_ENV = "PLACEMENT_SYSFS_ROOT"
MEMINFO_FILE = Path("/proc/meminfo")
MEMINFO_ENV = "PLACEMENT_MEMINFO"

_SIOCGIFADDR = 0x8915
_SIOCGIFNETMASK = 0x891B
_RTF_UP = 0x1
_NVML_BUS_ID = re.compile(
    r"^(?P<domain>[0-9a-fA-F]{1,8}):(?P<bus>[0-9a-fA-F]{2}):(?P<dev>[0-9a-fA-F]{2})\.(?P<fn>[0-7])$"
)


def sysfs_root() -> str:
    """Where sysfs is mounted: ``$PLACEMENT_SYSFS_ROOT`` (a host's /sys seen from a
    container, or a test tree), else ``/sys``.

    Raises:
        EnvVarError: The variable is not a UTF-8 path.
    """
    return env_path(SYSFS_ENV) or "/sys"


def hostname() -> str:
    """This host's name as the kernel knows it."""
    return socket.gethostname()


def host_memory_bytes(meminfo: str | Path | None = None) -> int | None:
    """The node's RAM: ``MemTotal`` of ``/proc/meminfo`` (``$PLACEMENT_MEMINFO`` where set: a
    host's file seen from a container, or a test's), or None where it cannot be read.

    Raises:
        EnvVarError: The variable is not a UTF-8 path.
    """
    where = meminfo or env_path(MEMINFO_ENV) or MEMINFO_FILE
    try:
        return _MEMTOTAL[where]
    except KeyError:
        _MEMTOTAL[where] = size = _memtotal(Path(where))
        return size


#: MemTotal by file as named (no Path built per call: every snapshot asks), read once: it
#: does not change while a node runs.
_MEMTOTAL: dict[str | Path, int | None] = {}


def _memtotal(path: Path) -> int | None:
    try:
        with path.open(encoding="ascii", errors="replace") as file:
            for line in file:
                key, _, rest = line.partition(":")
                if key == "MemTotal":
                    number, _, unit = rest.strip().partition(" ")
                    if number.isdigit() and unit.strip() in ("kB", ""):
                        return int(number) * (1024 if unit.strip() == "kB" else 1)
                    return None
    except OSError:
        return None
    return None


def cpu_count() -> int:
    """Logical CPUs of the node (not just those this process may use)."""
    return os.cpu_count() or 1


def numa_node_count(sysfs: str | Path | None = None) -> int:
    """NUMA nodes the kernel reports; 1 where it reports none."""
    node_dir = Path(sysfs or sysfs_root()) / "devices" / "system" / "node"
    try:
        nodes = [p for p in node_dir.iterdir() if re.fullmatch(r"node\d+", p.name)]
    except OSError:
        return 1
    return max(1, len(nodes))


def default_route_interface(route_file: Path | None = None) -> str | None:
    """The interface of the IPv4 default route with the lowest metric, or None."""
    path = route_file or ROUTE_FILE
    try:
        lines = path.read_text(encoding="ascii", errors="replace").splitlines()
    except OSError:
        return None
    best: tuple[int, str] | None = None
    for line in lines[1:]:
        fields = line.split()
        if len(fields) < 8:
            continue
        iface, destination, flags, metric, mask = (fields[i] for i in (0, 1, 3, 6, 7))
        try:
            if int(destination, 16) or int(mask, 16) or not int(flags, 16) & _RTF_UP:
                continue
            candidate = (int(metric), iface)
        except ValueError:
            continue
        if best is None or candidate < best:
            best = candidate
    return best[1] if best else None


def interface_ipv4(iface: str) -> str | None:
    """The IPv4 address of a network interface (``SIOCGIFADDR``), or None."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            packed = struct.pack("256s", iface.encode()[:15])
            answer = fcntl.ioctl(sock.fileno(), _SIOCGIFADDR, packed)
    except OSError:
        return None
    return socket.inet_ntoa(answer[20:24])


def ipv4_broadcasts() -> set[ipaddress.IPv4Address]:
    """255.255.255.255 and the broadcast address of each interface's (primary) IPv4
    subnet, loopback's ``127.255.255.255`` included (/31 and /32 subnets have none)."""
    found = {ipaddress.IPv4Address("255.255.255.255")}
    try:
        interfaces = socket.if_nameindex()
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    except OSError:
        return found
    with sock:
        for _, name in interfaces:
            request = struct.pack("256s", name.encode()[:15])
            try:
                address = fcntl.ioctl(sock.fileno(), _SIOCGIFADDR, request)[20:24]
                mask = fcntl.ioctl(sock.fileno(), _SIOCGIFNETMASK, request)[20:24]
            except OSError:
                continue  # no IPv4 address on this interface
            network = ipaddress.IPv4Network(
                (int.from_bytes(address, "big"), bin(int.from_bytes(mask, "big")).count("1")),
                strict=False,
            )
            if network.prefixlen < 31:
                found.add(network.broadcast_address)
    return found


def hostname_address(name: str) -> str | None:
    """A non-loopback address the hostname resolves to (IPv4 preferred), or None."""
    try:
        infos = socket.getaddrinfo(name, None, type=socket.SOCK_STREAM)
    except OSError:
        return None
    addresses = [str(info[4][0]) for info in infos]
    usable = [a for a in addresses if not ipaddress.ip_address(a.split("%")[0]).is_loopback]
    usable.sort(key=lambda a: ":" in a)  # IPv4 first, order otherwise kept
    return usable[0] if usable else None


def route_ipv4(route_file: Path | None = None) -> str | None:
    """The IPv4 address of the default-route interface, or None (no route, no address,
    or a loopback address)."""
    iface = default_route_interface(route_file)
    if iface is None:
        return None
    address = interface_ipv4(iface)
    if address is None or address.startswith("127."):
        return None
    return address


def choose_ip(route_ip: str | None, name: str) -> str:
    """The primary IP from what is known: the default-route interface's address; else a
    non-loopback address the hostname ``name`` resolves to; else ``127.0.0.1``."""
    if route_ip is not None:
        return route_ip
    address = hostname_address(name)
    return address if address is not None else "127.0.0.1"


def primary_ip() -> str:
    """This node's primary IP, found without sending a packet (see ``choose_ip``)."""
    return choose_ip(route_ipv4(), hostname())


def parse_cpulist(text: str) -> list[int]:
    """``"0-3,8,10-11"`` -> ``[0, 1, 2, 3, 8, 10, 11]`` (the kernel's cpulist format)."""
    cpus: set[int] = set()
    for item in text.strip().split(","):
        item = item.strip()
        if not item:
            continue
        low, _, high = item.partition("-")
        start, end = int(low), int(high or low)
        if end < start:
            raise ValueError(f"bad cpu range {item!r} in cpulist {text!r}")
        cpus.update(range(start, end + 1))
    return sorted(cpus)


def format_cpulist(cpus: Iterable[int]) -> str:
    """``[0, 1, 2, 3, 8]`` -> ``"0-3,8"``; empty -> ``""``."""
    ordered = sorted(set(cpus))
    parts: list[str] = []
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        parts.append(str(ordered[i]) if i == j else f"{ordered[i]}-{ordered[j]}")
        i = j + 1
    return ",".join(parts)


def cpulist_from_mask(mask: int) -> str:
    """A CPU bit mask (bit ``k`` set = CPU ``k``, as NVML's cpu set words read as one
    little-endian integer) as a cpulist string; ``""`` for no CPUs."""
    parts: list[str] = []
    base = 0
    while mask:
        skip = (mask & -mask).bit_length() - 1
        mask >>= skip
        base += skip
        run = (mask ^ (mask + 1)).bit_length() - 1  # trailing ones: one run of CPUs
        parts.append(str(base) if run == 1 else f"{base}-{base + run - 1}")
        mask >>= run
        base += run
    return ",".join(parts)


def pci_sysfs_affinity(
    pci_bus_id: str, sysfs: str | Path | None = None
) -> tuple[int | None, str | None]:
    """``(numa_node, local_cpulist)`` of a PCI device from sysfs; None where unknown.

    Args:
        pci_bus_id: NVML's form, ``00000000:18:00.0`` (sysfs uses a 4-digit domain).
        sysfs: The sysfs mount point; ``/sys`` by default.
    """
    match = _NVML_BUS_ID.match(pci_bus_id.strip())
    if match is None:
        return None, None
    domain = int(match["domain"], 16)
    name = f"{domain:04x}:{match['bus']}:{match['dev']}.{match['fn']}".lower()
    device = Path(sysfs or sysfs_root()) / "bus" / "pci" / "devices" / name
    numa: int | None = None
    cpulist: str | None = None
    try:
        value = int((device / "numa_node").read_text().strip())
        numa = value if value >= 0 else None
    except (OSError, ValueError):
        pass
    try:
        text = (device / "local_cpulist").read_text().strip()
        cpulist = format_cpulist(parse_cpulist(text)) or None
    except (OSError, ValueError):
        pass
    return numa, cpulist
