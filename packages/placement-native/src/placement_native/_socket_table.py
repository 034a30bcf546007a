"""The kernel's TCP socket table: which ports are taken, read in one query.

Two readers give the same answer. With the compiled backend, netlink ``sock_diag`` (C, one
netlink socket, one dump per address family, every TCP state: listeners, connections,
time-wait and, on kernels >= 6.9, bound-but-inactive sockets). Otherwise, or where netlink
is refused (some sandboxes), ``/proc/net/tcp`` and ``/proc/net/tcp6``, which list everything
but bound-inactive sockets. Where neither can be read (not Linux) the table is empty and the
bind check alone decides.

The table only prunes candidates: ports are always confirmed by binding them.
"""

from __future__ import annotations

import errno
import ipaddress
import logging
import os
import socket
import struct
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from . import _backend
from ._port_ranges import BUSY, FREE

__all__ = [
    "PROC_TCP_FILES",
    "TCP_STATES",
    "TableRead",
    "TcpSocket",
    "WantedAddress",
    "conflicts",
    "mark_busy",
    "read_netlink",
    "read_proc",
]

logger = logging.getLogger(__name__)

PROC_TCP_FILES = (("/proc/net/tcp", int(socket.AF_INET)), ("/proc/net/tcp6", int(socket.AF_INET6)))

# include/net/tcp_states.h
TCP_STATES = {
    1: "ESTABLISHED",
    2: "SYN_SENT",
    3: "SYN_RECV",
    4: "FIN_WAIT1",
    5: "FIN_WAIT2",
    6: "TIME_WAIT",
    7: "CLOSE",
    8: "CLOSE_WAIT",
    9: "LAST_ACK",
    10: "LISTEN",
    11: "CLOSING",
    12: "NEW_SYN_RECV",
    13: "BOUND_INACTIVE",
}

_V4_MAPPED_PREFIX = bytes(10) + b"\xff\xff"


@dataclass(frozen=True, slots=True)
class TcpSocket:
    """One entry of the kernel's TCP socket table.

    Attributes:
        family: ``socket.AF_INET`` or ``socket.AF_INET6``.
        state: The TCP state number (see ``TCP_STATES``).
        address: The local address, as ``ipaddress`` writes it.
        port: The local port.
        inode: The socket's inode (0 for time-wait and request sockets).
    """

    family: int
    state: int
    address: str
    port: int
    inode: int

    @property
    def state_name(self) -> str:
        """The state's name, e.g. ``LISTEN``."""
        return TCP_STATES.get(self.state, str(self.state))


@dataclass(frozen=True, slots=True)
class WantedAddress:
    """The address a search binds, reduced to how the kernel compares it with others."""

    v6: bool
    wildcard: bool
    packed: bytes

    @classmethod
    def from_packed(cls, packed: bytes) -> WantedAddress:
        """From a 4- or 16-byte address; an IPv4-mapped IPv6 address counts as IPv4."""
        if len(packed) == 16 and packed.startswith(_V4_MAPPED_PREFIX):
            packed = packed[12:]
        return cls(len(packed) == 16, not any(packed), packed)


def conflicts(wanted: WantedAddress, held: WantedAddress) -> bool:
    """Whether a socket bound to ``held`` stops a bind to ``wanted`` on the same port.

    Conservative where the table cannot tell: an IPv6 wildcard socket counts as dual-stack
    (``/proc`` does not show ``IPV6_V6ONLY``), and the IPv6 wildcard clashes with every IPv4
    socket. The C reader applies the same rule (``pn_conflicts`` in ports.c).
    """
    if wanted.v6 == held.v6:
        return wanted.wildcard or held.wildcard or wanted.packed == held.packed
    return held.wildcard if held.v6 else wanted.wildcard


@dataclass(frozen=True, slots=True)
class TableRead:
    """How a search map was filled: the reader used and how many sockets it listed."""

    source: str
    sockets: int


def _native_lib() -> Any | None:
    module = _backend.native_module
    return None if module is None else module.lib


def _errno_error(code: int, what: str) -> OSError:
    """The one place a C return code becomes an exception."""
    return OSError(code, f"{what}: {os.strerror(code)}")


def read_netlink(*, per_family: bool = False) -> list[TcpSocket]:
    """Every TCP socket through netlink sock_diag (compiled backend only).

    Args:
        per_family: Use one ``inet_diag_req_v2`` dump per address family, the request the
            compiled reader falls back to where the single two-family dump is refused.

    Raises:
        OSError: The compiled backend is not active, or the kernel refused the query.
    """
    lib = _native_lib()
    if lib is None:
        raise OSError("netlink sock_diag needs the compiled backend, which is not active")
    ffi = _backend.native_module.ffi  # type: ignore[union-attr]
    table = ffi.new("pn_tcp_socket **")
    count = ffi.new("size_t *")
    status = lib.pn_tcp_socket_table(int(per_family), table, count)
    if status != 0:
        raise _errno_error(status, "netlink sock_diag dump of TCP sockets")
    try:
        rows = ffi.buffer(table[0], count[0] * ffi.sizeof("pn_tcp_socket"))
        return [
            TcpSocket(
                family,
                state,
                _format_address(family, addr[: 4 if family == socket.AF_INET else 16]),
                port,
                inode,
            )
            for family, state, port, inode, addr in struct.iter_unpack("=BBHI16s", rows)
        ]
    finally:
        lib.pn_tcp_socket_table_free(table[0])


def _format_address(family: int, packed: bytes) -> str:
    return str(
        ipaddress.IPv4Address(packed) if family == socket.AF_INET else ipaddress.IPv6Address(packed)
    )


def _proc_address(text: str) -> bytes:
    # /proc prints each 32-bit word of the (network-order) address as a native integer.
    return b"".join(
        int(text[i : i + 8], 16).to_bytes(4, sys.byteorder) for i in range(0, len(text), 8)
    )


def _proc_rows(path: str) -> Iterator[tuple[bytes, int, int, int]]:
    """``(packed address, port, state, inode)`` for each line of one /proc/net/tcp* file."""
    with open(path, encoding="ascii") as file:
        next(file, None)  # header
        for line in file:
            fields = line.split()
            address, _, port = fields[1].partition(":")
            yield _proc_address(address), int(port, 16), int(fields[3], 16), int(fields[9])


def read_proc() -> list[TcpSocket]:
    """Every TCP socket listed in /proc/net/tcp and /proc/net/tcp6 (missing files skipped)."""
    sockets: list[TcpSocket] = []
    for path, family in PROC_TCP_FILES:
        try:
            rows = list(_proc_rows(path))
        except FileNotFoundError:
            logger.debug("%s does not exist", path)
            continue
        sockets.extend(
            TcpSocket(family, state, _format_address(family, packed), port, inode)
            for packed, port, state, inode in rows
        )
    return sockets


def _mark_busy_netlink(
    lib: Any, wanted: bytes, family: int, low: int, high: int, ports: bytearray
) -> int:
    ffi = _backend.native_module.ffi  # type: ignore[union-attr]
    seen = ffi.new("size_t *")
    status = lib.pn_tcp_busy_map(
        family,
        ffi.from_buffer(wanted.ljust(16, b"\0")),
        low,
        high,
        ffi.from_buffer(ports),
        seen,
    )
    if status != 0:
        raise _errno_error(status, "netlink sock_diag dump of TCP sockets")
    return int(seen[0])


def _mark_busy_proc(wanted: WantedAddress, low: int, high: int, ports: bytearray) -> int:
    seen = 0
    clashes: dict[str, bool] = {}  # by the address as /proc writes it: few distinct ones
    for path, _ in PROC_TCP_FILES:
        try:
            with open(path, encoding="ascii") as file:
                next(file, None)  # header
                for line in file:
                    seen += 1
                    local = line.split(None, 2)[1]
                    port = int(local[-4:], 16)
                    if port < low or port > high or ports[port - low] != FREE:
                        continue
                    address = local[:-5]
                    clash = clashes.get(address)
                    if clash is None:
                        held = WantedAddress.from_packed(_proc_address(address))
                        clash = clashes[address] = conflicts(wanted, held)
                    if clash:
                        ports[port - low] = BUSY
        except FileNotFoundError:
            logger.debug("%s does not exist", path)
    return seen


# Answers that mean netlink sock_diag is not available here at all (a sandbox, a kernel
# without it), rather than that this one query failed.
_NETLINK_UNAVAILABLE = frozenset(
    {
        errno.EPERM,
        errno.EACCES,
        errno.EPROTONOSUPPORT,
        errno.EAFNOSUPPORT,
        errno.ENOENT,
        errno.EINVAL,
        errno.EOPNOTSUPP,
        errno.ENOSYS,
    }
)

_netlink_refused = False


def mark_busy(packed: bytes, family: int, low: int, ports: bytearray) -> TableRead:
    """Mark, in a search map starting at port ``low``, the FREE ports the table shows taken.

    Args:
        packed: The address to bind (4 or 16 bytes).
        family: Its family, ``socket.AF_INET`` or ``socket.AF_INET6``.
        low: The port of ``ports[0]``.
        ports: The search map; FREE entries become BUSY, others are left alone.

    Returns:
        Which reader filled the map and how many sockets the table held.
    """
    global _netlink_refused
    high = low + len(ports) - 1
    lib = _native_lib()
    if lib is not None and not _netlink_refused:
        try:
            return TableRead("netlink", _mark_busy_netlink(lib, packed, family, low, high, ports))
        except OSError as exc:
            if exc.errno in _NETLINK_UNAVAILABLE:
                _netlink_refused = True  # it will not start working: stop asking
            logger.debug("netlink socket table unavailable (%s): reading /proc instead", exc)
    try:
        return TableRead(
            "proc", _mark_busy_proc(WantedAddress.from_packed(packed), low, high, ports)
        )
    except OSError as exc:
        logger.debug("no readable socket table (%s): binding alone decides", exc)
        return TableRead("none", 0)
