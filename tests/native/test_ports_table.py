"""The kernel socket-table readers (netlink, /proc) and the port-range settings."""

from __future__ import annotations

import errno
import ipaddress
import os
import socket
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from placement_native import _backend, _port_ranges, _socket_table
from placement_native._port_ranges import BUSY, EXCLUDED, FREE, SearchRange
from placement_native._socket_table import TcpSocket, WantedAddress, conflicts
from placement_native.ports import find_free_ports

needs_compiled = pytest.mark.skipif(
    _backend.native_module is None, reason="the compiled extension is not active"
)


@pytest.fixture
def sockets() -> Iterator[list[socket.socket]]:
    opened: list[socket.socket] = []
    yield opened
    for sock in opened:
        sock.close()


def _open(opened: list[socket.socket], host: str, *, listen: bool = True) -> socket.socket:
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    opened.append(sock)
    sock.bind((host, 0))
    if listen:
        sock.listen()
    return sock


def _listener_and_neighbour(
    opened: list[socket.socket], tries: int = 50
) -> tuple[socket.socket, socket.socket]:
    """A socket listening on 127.0.0.1 and one of ours bound (not listening) to the next
    port, which no other socket can then hold."""
    for _ in range(tries):
        listener = _open(opened, "127.0.0.1")
        neighbour = socket.socket(socket.AF_INET)
        opened.append(neighbour)
        try:
            neighbour.bind(("127.0.0.1", listener.getsockname()[1] + 1))
        except OSError:
            continue
        return listener, neighbour
    raise AssertionError(f"no free port after a listener in {tries} tries")


def _has_ipv6_loopback() -> bool:
    try:
        with socket.socket(socket.AF_INET6) as sock:
            sock.bind(("::1", 0))
    except OSError:
        return False
    return True


def _mine(table: list[TcpSocket], opened: list[socket.socket]) -> set[TcpSocket]:
    inodes = {os.fstat(sock.fileno()).st_ino for sock in opened}
    return {entry for entry in table if entry.inode in inodes}


@needs_compiled
def test_netlink_and_proc_list_the_same_sockets(sockets: list[socket.socket]) -> None:
    server = _open(sockets, "127.0.0.1")
    _open(sockets, "127.0.0.1")
    client = socket.create_connection(server.getsockname(), timeout=5)
    sockets.append(client)
    accepted, _ = server.accept()
    sockets.append(accepted)
    if _has_ipv6_loopback():
        server6 = _open(sockets, "::1")
        client6 = socket.create_connection(server6.getsockname()[:2], timeout=5)
        sockets.append(client6)
        sockets.append(server6.accept()[0])

    from_netlink = _mine(_socket_table.read_netlink(), sockets)
    from_proc = _mine(_socket_table.read_proc(), sockets)

    assert from_netlink == from_proc
    assert len(from_proc) == len(sockets)
    states = {entry.state_name for entry in from_proc}
    assert states == {"LISTEN", "ESTABLISHED"}


@needs_compiled
def test_both_netlink_requests_list_the_same_sockets(sockets: list[socket.socket]) -> None:
    server = _open(sockets, "127.0.0.1")
    sockets.append(socket.create_connection(server.getsockname(), timeout=5))
    if _has_ipv6_loopback():
        _open(sockets, "::1")
    one_dump = _mine(_socket_table.read_netlink(), sockets)
    per_family = _mine(_socket_table.read_netlink(per_family=True), sockets)
    assert one_dump == per_family
    assert len(one_dump) == len(sockets)


def test_proc_reader_reports_address_port_state_and_inode(sockets: list[socket.socket]) -> None:
    server = _open(sockets, "127.0.0.1")
    port = server.getsockname()[1]
    (entry,) = _mine(_socket_table.read_proc(), sockets)
    assert entry == TcpSocket(
        socket.AF_INET, 10, "127.0.0.1", port, os.fstat(server.fileno()).st_ino
    )


@needs_compiled
def test_netlink_also_sees_bound_sockets_that_do_not_listen(
    sockets: list[socket.socket],
) -> None:
    if tuple(int(part) for part in os.uname().release.split(".")[:2]) < (6, 9):
        pytest.skip("bound-inactive sockets are dumped by kernels >= 6.9")
    bound = _open(sockets, "127.0.0.1", listen=False)
    (entry,) = _mine(_socket_table.read_netlink(), sockets)
    assert entry.port == bound.getsockname()[1]
    assert entry.state_name in ("CLOSE", "BOUND_INACTIVE")
    assert not _mine(_socket_table.read_proc(), sockets), "/proc does not list them"


@pytest.fixture
def fake_proc(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """/proc/net/tcp{,6}: 127.0.0.1:24000 and 0.0.0.0:24002 listening, [::1]:80 established."""

    def word(text: str) -> str:
        return int.from_bytes(bytes.fromhex(text), sys.byteorder).to_bytes(4, "big").hex()

    header = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt\n"
    v4 = (
        f"   0: {word('7f000001').upper()}:5DC0 00000000:0000 0A 0:0 00:0 0 0 0 4242 1\n"
        f"   1: 00000000:5DC2 00000000:0000 0A 0:0 00:0 0 0 0 4243 1\n"
    )
    loopback6 = "".join(word(("0" * 31 + "1")[i : i + 8]) for i in range(0, 32, 8))
    v6 = f"   0: {loopback6}:0050 {'0' * 32}:0000 01 0:0 00:0 0 0 0 77 1\n"
    (tmp_path / "tcp").write_text(header + v4)
    (tmp_path / "tcp6").write_text(header + v6)
    monkeypatch.setattr(
        _socket_table,
        "PROC_TCP_FILES",
        ((str(tmp_path / "tcp"), socket.AF_INET), (str(tmp_path / "tcp6"), socket.AF_INET6)),
    )
    monkeypatch.setattr(_socket_table, "_native_lib", lambda: None)


@pytest.mark.usefixtures("fake_proc")
def test_proc_lines_decode_ipv4_and_ipv6() -> None:
    assert _socket_table.read_proc() == [
        TcpSocket(socket.AF_INET, 10, "127.0.0.1", 24000, 4242),
        TcpSocket(socket.AF_INET, 10, "0.0.0.0", 24002, 4243),
        TcpSocket(socket.AF_INET6, 1, "::1", 80, 77),
    ]


@pytest.mark.usefixtures("fake_proc")
def test_proc_lines_mark_their_ports_busy() -> None:
    ports = bytearray(4)
    read = _socket_table.mark_busy(bytes([127, 0, 0, 1]), socket.AF_INET, 23999, ports)
    assert read == _socket_table.TableRead("proc", 3)
    assert list(ports) == [FREE, BUSY, FREE, BUSY]
    ports = bytearray(2)
    _socket_table.mark_busy(ipaddress.ip_address("::1").packed, socket.AF_INET6, 79, ports)
    assert list(ports) == [FREE, BUSY]


def test_a_missing_proc_file_is_skipped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_socket_table, "PROC_TCP_FILES", ((str(tmp_path / "tcp"), 2),))
    monkeypatch.setattr(_socket_table, "_native_lib", lambda: None)
    ports = bytearray(3)
    read = _socket_table.mark_busy(bytes([127, 0, 0, 1]), socket.AF_INET, 30000, ports)
    assert read == _socket_table.TableRead("proc", 0)
    assert ports == bytearray(3)


# Which held sockets take a port from which wanted address ------------------------------


def _address(text: str) -> WantedAddress:
    return WantedAddress.from_packed(ipaddress.ip_address(text).packed)


@pytest.mark.parametrize(
    ("wanted", "held", "clash"),
    [
        ("127.0.0.1", "127.0.0.1", True),
        ("127.0.0.1", "0.0.0.0", True),
        ("0.0.0.0", "127.0.0.2", True),
        ("127.0.0.1", "127.0.0.2", False),
        ("127.0.0.1", "::", True),  # dual-stack unless IPV6_V6ONLY, which /proc hides
        ("127.0.0.1", "::1", False),
        ("127.0.0.1", "::ffff:127.0.0.1", True),
        ("127.0.0.1", "::ffff:127.0.0.2", False),
        ("::1", "::1", True),
        ("::1", "::", True),
        ("::", "::1", True),
        ("::1", "0.0.0.0", False),
        ("::1", "127.0.0.1", False),
        ("::", "127.0.0.1", True),
        ("::ffff:127.0.0.1", "127.0.0.1", True),
        ("fe80::1", "fe80::2", False),
    ],
)
def test_conflict_rules(wanted: str, held: str, clash: bool) -> None:
    assert conflicts(_address(wanted), _address(held)) is clash


@pytest.fixture(params=["cffi", "purepython"])
def reader(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "cffi":
        if _backend.native_module is None:
            pytest.skip("the compiled extension is not active")
        monkeypatch.setattr(_socket_table, "_netlink_refused", False)
        return "netlink"
    monkeypatch.setattr(_socket_table, "_native_lib", lambda: None)
    return "proc"


def _busy_after(reader: str, host: str, low: int, size: int) -> bytearray:
    ports = bytearray(size)
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    packed = ipaddress.ip_address(host).packed
    read = _socket_table.mark_busy(packed, family, low, ports)
    assert read.source == reader
    assert read.sockets > 0
    return ports


def test_mark_busy_applies_the_conflict_rules(reader: str, sockets: list[socket.socket]) -> None:
    # Tests bind loopback only; the wildcard cases are those of the address searched for.
    if not _has_ipv6_loopback():
        pytest.skip("no IPv6 loopback")
    base = find_free_ports(3, consecutive=True, start=23100, end=23999)[0]
    for offset, host in enumerate(["127.0.0.1", "::1"]):
        sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
        sockets.append(sock)
        sock.bind((host, base + offset))
        sock.listen()
    assert list(_busy_after(reader, "127.0.0.1", base, 3)) == [BUSY, FREE, FREE]
    assert list(_busy_after(reader, "127.0.0.2", base, 3)) == [FREE, FREE, FREE]
    assert list(_busy_after(reader, "0.0.0.0", base, 3)) == [BUSY, FREE, FREE]
    assert list(_busy_after(reader, "::1", base, 3)) == [FREE, BUSY, FREE]
    assert list(_busy_after(reader, "::", base, 3)) == [BUSY, BUSY, FREE]
    assert list(_busy_after(reader, "::ffff:127.0.0.1", base, 3)) == [BUSY, FREE, FREE]


def test_mark_busy_keeps_excluded_ports_and_ignores_ports_outside(
    reader: str, sockets: list[socket.socket]
) -> None:
    # The port after the listener's was held by a socket of ours until now: whatever else
    # runs on the machine, nothing is there (a socket never connected leaves no TIME_WAIT).
    listener, neighbour = _listener_and_neighbour(sockets)
    port = listener.getsockname()[1]
    assert neighbour.getsockname()[1] == port + 1
    neighbour.close()
    ports = bytearray([EXCLUDED, FREE])
    _socket_table.mark_busy(bytes([127, 0, 0, 1]), socket.AF_INET, port, ports)
    assert ports == bytearray([EXCLUDED, FREE])
    ports = bytearray([FREE])
    _socket_table.mark_busy(bytes([127, 0, 0, 1]), socket.AF_INET, port + 1, ports)
    assert ports == bytearray([FREE])


class _FailingLib:
    """A compiled library whose netlink query answers ``code``."""

    def __init__(self, code: int) -> None:
        self.code = code

    def pn_tcp_busy_map(self, *args: object) -> int:
        return self.code


@needs_compiled
@pytest.mark.parametrize(
    ("code", "gives_up"),
    [(errno.EPERM, True), (errno.EPROTONOSUPPORT, True), (errno.ENOBUFS, False)],
)
def test_a_failed_netlink_query_falls_back_to_proc(
    monkeypatch: pytest.MonkeyPatch, sockets: list[socket.socket], code: int, gives_up: bool
) -> None:
    monkeypatch.setattr(_socket_table, "_native_lib", lambda: _FailingLib(code))
    monkeypatch.setattr(_socket_table, "_netlink_refused", False)
    listener = _open(sockets, "127.0.0.1")
    ports = bytearray(1)
    read = _socket_table.mark_busy(
        bytes([127, 0, 0, 1]), socket.AF_INET, listener.getsockname()[1], ports
    )
    assert read.source == "proc"
    assert ports == bytearray([BUSY])
    assert _socket_table._netlink_refused is gives_up


# Kernel port settings -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("32768\t60999\n", (32768, 60999)),
        ("1024 65535", (1024, 65535)),
        ("9 5", None),
        ("", None),
        ("a b", None),
    ],
)
def test_ephemeral_range_file(tmp_path: Path, text: str, expected: object) -> None:
    (tmp_path / "range").write_text(text)
    assert _port_ranges.read_ephemeral_range(str(tmp_path / "range")) == expected


def test_unreadable_settings_mean_no_exclusion(tmp_path: Path) -> None:
    assert _port_ranges.read_ephemeral_range(str(tmp_path / "missing")) is None
    assert _port_ranges.read_reserved_ports(str(tmp_path / "missing")) == ()


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("\n", ()),
        ("8000-8010,9000\n", ((8000, 8010), (9000, 9000))),
        ("20100,x,20200-20201", ((20100, 20100), (20200, 20201))),
    ],
)
def test_reserved_ports_file(tmp_path: Path, text: str, expected: object) -> None:
    (tmp_path / "reserved").write_text(text)
    assert _port_ranges.read_reserved_ports(str(tmp_path / "reserved")) == expected


def test_search_range_describes_what_it_searches() -> None:
    search = SearchRange(
        20000,
        65535,
        ((32768, 60999, "the kernel's ephemeral range"), (20005, 20005, "reserved")),
        default=True,
    )
    assert search.usable_spans() == [(20000, 20004), (20006, 32767), (61000, 65535)]
    assert search.describe() == (
        "20000-20004, 20006-32767, 61000-65535 (the default range 20000-65535 without "
        "the kernel's ephemeral range 32768-60999; reserved 20005)"
    )
    assert SearchRange(30000, 30009).describe() == "30000-30009"
    ports = search.new_map()
    assert ports[5] == EXCLUDED
    assert ports[32768 - 20000 : 61000 - 20000] == bytes([EXCLUDED]) * (61000 - 32768)
    assert ports.count(FREE) == 5 + (32767 - 20006 + 1) + (65535 - 61000 + 1)


def test_the_default_range_clips_kernel_settings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "range").write_text("10000 20001\n")
    (tmp_path / "reserved").write_text("80,65530-70000\n")
    monkeypatch.setattr(_port_ranges, "EPHEMERAL_RANGE_FILE", str(tmp_path / "range"))
    monkeypatch.setattr(_port_ranges, "RESERVED_PORTS_FILE", str(tmp_path / "reserved"))
    search = _port_ranges.default_search_range()
    assert search.excluded == (
        (20000, 20001, "the kernel's ephemeral range"),
        (65530, 65535, "reserved"),
    )
    assert search.usable_spans() == [(20002, 65529)]
