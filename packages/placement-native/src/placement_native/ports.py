"""Free TCP ports that nothing can take between finding them and using them.

``reserve_ports`` reads the kernel's socket table once, picks candidates that no socket
holds, and confirms each by binding and listening on it. The listening sockets stay open
until the ports are released or handed over, so no other process (another reservation, an
ephemeral ``connect``, a server binding a fixed port) can take them in between; a port is
handed to its consumer right before the consumer binds it.

Default search range: 20000-65535 minus the kernel's ephemeral range and reserved ports
(with Linux's stock settings: 20000-32767 and 61000-65535). It stays clear of Ray's worker
ports (10002-19999) and the well-known services below. ``start``/``end`` replace it: the
range they give is searched as it is.

>>> with reserve_ports(2, start=20000, end=21000) as held:
...     len(held.ports)
2
"""

from __future__ import annotations

import errno
import ipaddress
import logging
import socket
import threading
from dataclasses import dataclass
from types import TracebackType
from typing import NoReturn, Self

from . import _host
from ._port_ranges import (
    BUSY,
    FREE,
    SearchRange,
    default_search_range,
    explicit_search_range,
)
from ._socket_table import TableRead, mark_busy
from .errors import NoFreePortsError, PortError, shorten

__all__ = ["PortReservation", "find_free_ports", "reserve_ports"]

logger = logging.getLogger(__name__)

# A port someone else holds answers EADDRINUSE; a privileged port (< 1024) for a normal
# user, EACCES. Both mean "not for us": try the next candidate.
_TAKEN_ERRNOS = frozenset({errno.EADDRINUSE, errno.EACCES})


@dataclass(frozen=True, slots=True)
class _Host:
    text: str
    family: int
    packed: bytes

    def sockaddr(self, port: int) -> tuple[str, int]:
        return (self.text, port)


def _parse_host(host: object) -> _Host:
    if not isinstance(host, str):
        raise PortError(
            f"host must be an IP address string such as '127.0.0.1' or '::1', "
            f"got {shorten(repr(host))} ({type(host).__name__})"
        )
    text = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        raise PortError(
            f"host must be an IPv4 or IPv6 address of this machine such as '127.0.0.1' or "
            f"'::1' (host names are not resolved), got {shorten(repr(host))}"
        ) from None
    _check_bindable(host, address)
    family = socket.AF_INET if address.version == 4 else socket.AF_INET6
    return _Host(text, family, address.packed)


def _check_bindable(host: str, address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> None:
    """Refuse what a TCP server cannot serve on, though bind may accept some of it."""
    shown = shorten(repr(host))
    ipv4 = address if isinstance(address, ipaddress.IPv4Address) else address.ipv4_mapped
    if address.is_multicast or (ipv4 is not None and ipv4.is_multicast):
        raise PortError(
            f"host {shown} is a multicast address (224.0.0.0/4, ff00::/8): "
            f"expected an address of this machine"
        )
    # A subnet broadcast (of a /30 or wider) ends in binary 11: only such addresses cost
    # the look at the interfaces.
    if ipv4 is not None and int(ipv4) & 3 == 3 and ipv4 in _host.ipv4_broadcasts():
        raise PortError(f"host {shown} is a broadcast address: expected an address of this machine")
    if isinstance(address, ipaddress.IPv6Address):
        scope = address.scope_id
        if scope is None and address.is_link_local:
            raise PortError(
                f"host {shown} is a link-local IPv6 address without a scope id: expected "
                f"it with its interface, such as 'fe80::1%eth0'"
            )
        if scope is not None and not _interface_exists(scope):
            raise PortError(
                f"host {shown} names interface {shorten(repr(scope))}, which this machine "
                f"does not have"
            )


def _interface_exists(scope: str) -> bool:
    try:
        if scope.isascii() and scope.isdigit():
            socket.if_indextoname(int(scope))
        else:
            socket.if_nametoindex(scope)
    except (OSError, ValueError, OverflowError):
        return False
    return True


def _check_port(name: str, value: object) -> int | None:
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool):
        raise PortError(f"{name} must be a port number (int), got {value!r}")
    if not 1 <= value <= 65535:
        raise PortError(f"{name} must be a port number in 1..65535, got {value}")
    return value


def _check_arguments(
    count: object, host: object, consecutive: object, start: object, end: object
) -> tuple[int, _Host, SearchRange]:
    if not isinstance(count, int) or isinstance(count, bool) or count < 1:
        raise PortError(f"count must be an integer >= 1, got {count!r}")
    if not isinstance(consecutive, bool):
        raise PortError(f"consecutive must be True or False, got {consecutive!r}")
    parsed_host = _parse_host(host)
    low, high = _check_port("start", start), _check_port("end", end)
    if low is None and high is None:
        search = default_search_range()
    else:
        search = explicit_search_range(low, high)
        if search.low > search.high:
            given = f"start={start}, end={end}".replace("None", "default")
            raise PortError(
                f"start must not be above end, got {given} (searching {search.low}-{search.high})"
            )
    size = search.high - search.low + 1
    if count > size:
        raise PortError(
            f"count={count} is more than the {size} ports of the range {search.low}-{search.high}"
        )
    return count, parsed_host, search


def _hold(host: _Host, port: int) -> socket.socket | None:
    """Bind and listen on ``host:port``; None if someone else has the port.

    SO_REUSEADDR is deliberately not set: with it, bind succeeds on a port that still has
    TIME_WAIT connections, or that another SO_REUSEADDR socket has bound but not yet put in
    listen, so a probe would call such a port free while the consumer's own bind (or listen)
    then fails. A plain bind only succeeds on a port nobody holds, and once we listen, no
    one else can bind it, SO_REUSEADDR or not (SO_REUSEPORT needs it set on our socket too).
    """
    try:
        sock = socket.socket(host.family, socket.SOCK_STREAM)
    except OSError as exc:
        if exc.errno in (errno.EMFILE, errno.ENFILE):
            raise NoFreePortsError(
                f"cannot open a socket to hold port {port}: {exc.strerror} (every held port "
                f"keeps one file descriptor open; release ports or raise RLIMIT_NOFILE)"
            ) from exc
        raise PortError(f"cannot open a socket for host {host.text!r}: {exc}") from exc
    try:
        sock.bind(host.sockaddr(port))
        sock.listen(1)
    except OSError as exc:
        sock.close()
        if exc.errno in _TAKEN_ERRNOS:
            return None
        if exc.errno in (errno.EADDRNOTAVAIL, errno.EINVAL):
            raise PortError(
                f"host {host.text!r} is not an address of this machine: cannot bind it"
            ) from exc
        # socket.gaierror (an unresolvable scope) and anything else the host causes
        raise PortError(f"cannot bind host {host.text!r} (port {port}): {exc}") from exc
    return sock


class PortReservation:
    """TCP ports held open by this process until released or handed over.

    Each port has a socket bound to ``host`` and listening, so nothing else can bind it.
    Use it as a context manager, or call ``release()``; garbage collection releases too.
    It cannot be pickled: pass ``ports`` to other processes, and release (hand over) here.
    The sockets are not inherited by programs this process starts (Python's default), but a
    child made by ``fork()`` without ``exec`` holds copies: a port is then free again only
    once both processes have released it.

    Attributes:
        host: The address the ports are held on.
        ports: Every reserved port, ascending (unchanged by releasing).
    """

    __slots__ = ("__weakref__", "_lock", "_sockets", "host", "ports")

    def __init__(self, host: str, sockets: dict[int, socket.socket]) -> None:
        self.host = host
        self.ports = tuple(sorted(sockets))
        self._sockets = dict(sockets)
        self._lock = threading.Lock()

    @property
    def held(self) -> tuple[int, ...]:
        """The ports still held (not yet released, handed over or detached)."""
        with self._lock:
            return tuple(sorted(self._sockets))

    def _check(self, port: int) -> None:
        if port not in self.ports:
            raise PortError(f"port {port!r} is not part of this reservation {self.ports}")

    def _take(self, port: int) -> socket.socket | None:
        self._check(port)
        with self._lock:
            return self._sockets.pop(port, None)

    def release(self, *ports: int) -> None:
        """Close the sockets of ``ports`` (all ports if none given); idempotent.

        Raises:
            PortError: A port is not part of this reservation.
        """
        for port in ports:
            self._check(port)
        for port in ports or self.ports:
            sock = self._take(port)
            if sock is not None:
                sock.close()

    def hand_over(self, port: int) -> int:
        """Release one port for its consumer, who should bind it right away.

        Returns:
            The port.

        Raises:
            PortError: The port is not part of this reservation, or was already released.
        """
        sock = self._take(port)
        if sock is None:
            raise PortError(f"port {port} was already released or handed over")
        sock.close()
        return port

    def detach(self, port: int) -> socket.socket:
        """Give the bound, listening socket of ``port`` to the caller (no gap at all).

        For servers that adopt an open listening socket (``socket.socket(fileno=...)``,
        ``uvicorn --fd``); closing it becomes the caller's job.

        Raises:
            PortError: The port is not part of this reservation, or was already released.
        """
        sock = self._take(port)
        if sock is None:
            raise PortError(f"port {port} was already released or handed over")
        return sock

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.release()

    def __del__(self) -> None:
        sockets = getattr(self, "_sockets", None)
        if sockets:
            for sock in list(sockets.values()):
                sock.close()
            sockets.clear()

    def __reduce__(self) -> NoReturn:
        raise TypeError(
            "a PortReservation cannot be pickled: its sockets belong to this process; "
            "send .ports instead"
        )

    def __repr__(self) -> str:
        return f"PortReservation(host={self.host!r}, ports={self.ports}, held={self.held})"


@dataclass(slots=True)
class _Search:
    count: int
    host: _Host
    consecutive: bool
    search: SearchRange
    table: TableRead
    ports: bytearray
    refused: int = 0

    def _error(self, found: int) -> NoFreePortsError:
        busy = self.ports.count(BUSY) - self.refused
        wanted = (
            f"no run of {self.count} consecutive free ports"
            if self.consecutive
            else f"only {found} of {self.count} ports free"
        )
        return NoFreePortsError(
            f"{wanted} on {self.host.text} in {self.search.describe()}: "
            f"{busy} busy in the kernel's socket table ({self.table.source}, "
            f"{self.table.sockets} TCP sockets), {self.refused} more refused by bind"
        )

    def _try(self, offset: int) -> socket.socket | None:
        sock = _hold(self.host, self.search.low + offset)
        if sock is None:
            self.ports[offset] = BUSY
            self.refused += 1
        return sock

    def scattered(self) -> dict[int, socket.socket]:
        held: dict[int, socket.socket] = {}
        offset = self.ports.find(FREE)
        try:
            while len(held) < self.count:
                if offset < 0:
                    raise self._error(len(held))
                sock = self._try(offset)
                if sock is not None:
                    held[self.search.low + offset] = sock
                offset = self.ports.find(FREE, offset + 1)
        except BaseException:
            _close_all(held)
            raise
        return held

    def run(self) -> dict[int, socket.socket]:
        run = bytes(self.count)  # FREE == 0
        offset = self.ports.find(run)
        while offset >= 0:
            held: dict[int, socket.socket] = {}
            try:
                for index in range(offset, offset + self.count):
                    sock = self._try(index)
                    if sock is None:
                        break
                    held[self.search.low + index] = sock
            except BaseException:
                _close_all(held)
                raise
            if len(held) == self.count:
                return held
            _close_all(held)
            # The port that refused is now BUSY: every run through it is out.
            offset = self.ports.find(run, offset + len(held) + 1)
        raise self._error(0)


def _close_all(sockets: dict[int, socket.socket]) -> None:
    for sock in sockets.values():
        sock.close()


def reserve_ports(
    count: int,
    *,
    host: str = "127.0.0.1",
    consecutive: bool = False,
    start: int | None = None,
    end: int | None = None,
) -> PortReservation:
    """Find ``count`` free TCP ports on ``host`` and hold them until released.

    Candidates come from one read of the kernel's socket table (netlink sock_diag with the
    compiled backend, /proc/net/tcp* otherwise); each is confirmed by binding and listening,
    lowest first, and stays bound until ``release()``, ``hand_over()``, leaving the ``with``
    block, or garbage collection. A socket on the wildcard address (0.0.0.0, ::) takes its
    port on every address; one on another specific address does not take it on ``host``.

    Args:
        count: How many ports.
        host: The IPv4 or IPv6 address the consumer will bind (``"::1"`` works; use
            ``"0.0.0.0"`` for a server listening on every interface).
        consecutive: Whether the ports must be a run ``p, p+1, ..., p+count-1``.
        start: First port of the search range (inclusive).
        end: Last port of the search range (inclusive). With neither ``start`` nor ``end``,
            the default range is searched: 20000-65535 minus the kernel's ephemeral range
            and reserved ports. With either, exactly ``start..end`` (a missing bound taken
            from 20000-65535).

    Returns:
        The reservation; ``.ports`` lists the ports, ascending.

    Raises:
        PortError: A bad argument (count < 1, a port outside 1..65535, start > end, a range
            smaller than count, a host that is not an address of this machine).
        NoFreePortsError: The range does not have ``count`` free ports (or a free run).
    """
    count, parsed_host, search = _check_arguments(count, host, consecutive, start, end)
    ports = search.new_map()
    table = mark_busy(parsed_host.packed, parsed_host.family, search.low, ports)
    state = _Search(count, parsed_host, consecutive, search, table, ports)
    held = state.run() if consecutive else state.scattered()
    logger.debug(
        "reserved %s on %s (table: %s, %d sockets; %d refused by bind)",
        sorted(held),
        parsed_host.text,
        table.source,
        table.sockets,
        state.refused,
    )
    return PortReservation(parsed_host.text, held)


def find_free_ports(
    count: int,
    *,
    host: str = "127.0.0.1",
    consecutive: bool = False,
    start: int | None = None,
    end: int | None = None,
) -> tuple[int, ...]:
    """Like ``reserve_ports``, but release the ports at once and return their numbers.

    Only for callers that cannot take a hand-over: another process may take the ports
    before they are used. Arguments and errors are those of ``reserve_ports``.

    Returns:
        The ports, ascending.
    """
    with reserve_ports(count, host=host, consecutive=consecutive, start=start, end=end) as held:
        return held.ports
