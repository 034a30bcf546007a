"""reserve_ports / find_free_ports on real loopback sockets, against both backends."""

from __future__ import annotations

import errno
import gc
import os
import pickle
import resource
import socket
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from placement_native import _backend, _port_ranges, _socket_table
from placement_native._port_ranges import SearchRange
from placement_native.errors import NoFreePortsError, PortError
from placement_native.ports import find_free_ports, reserve_ports

# A stretch of the default range that nothing on a test machine is expected to use.
LOW = 23100
HIGH = 23999


@pytest.fixture
def sockets() -> Iterator[list[socket.socket]]:
    """Sockets a test opens; closed afterwards."""
    opened: list[socket.socket] = []
    yield opened
    for sock in opened:
        sock.close()


def _listen(opened: list[socket.socket], host: str, port: int = 0) -> int:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    opened.append(sock)
    sock.bind((host, port))
    sock.listen()
    return int(sock.getsockname()[1])


def _free_block(size: int) -> int:
    """The first port of ``size`` consecutive ports of LOW..HIGH that are free right now."""
    return find_free_ports(size, consecutive=True, start=LOW, end=HIGH)[0]


def _bindable(port: int, host: str = "127.0.0.1") -> bool:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((host, port))
        except OSError as exc:
            if exc.errno != errno.EADDRINUSE:
                raise
            return False
        return True


@pytest.fixture
def ipv6_loopback() -> None:
    if not socket.has_ipv6:
        pytest.skip("no IPv6 support")
    try:
        with socket.socket(socket.AF_INET6) as sock:
            sock.bind(("::1", 0))
    except OSError:
        pytest.skip("no IPv6 loopback")


def test_reserve_returns_count_distinct_ascending_ports_in_range(backend: str) -> None:
    with reserve_ports(5, start=LOW, end=HIGH) as held:
        assert len(held.ports) == 5
        assert list(held.ports) == sorted(set(held.ports))
        assert all(LOW <= port <= HIGH for port in held.ports)
        assert held.host == "127.0.0.1"


def test_held_ports_cannot_be_bound_until_released(backend: str) -> None:
    held = reserve_ports(3, start=LOW, end=HIGH)
    assert not any(_bindable(port) for port in held.ports)
    held.release()
    assert all(_bindable(port) for port in held.ports)


def test_held_ports_are_listening(backend: str) -> None:
    with (
        reserve_ports(1, start=LOW, end=HIGH) as held,
        socket.create_connection(("127.0.0.1", held.ports[0]), timeout=5),
    ):
        pass


def test_release_is_idempotent(backend: str) -> None:
    held = reserve_ports(2, start=LOW, end=HIGH)
    held.release()
    held.release()
    assert held.held == ()
    assert len(held.ports) == 2


def test_leaving_the_with_block_releases(backend: str) -> None:
    with reserve_ports(2, start=LOW, end=HIGH) as held:
        ports = held.ports
    assert all(_bindable(port) for port in ports)


def test_garbage_collection_releases(backend: str) -> None:
    ports = reserve_ports(2, start=LOW, end=HIGH).ports
    gc.collect()
    assert all(_bindable(port) for port in ports)


def test_release_of_some_ports_keeps_the_others(backend: str) -> None:
    with reserve_ports(3, start=LOW, end=HIGH) as held:
        first, *rest = held.ports
        held.release(first)
        assert _bindable(first)
        assert held.held == tuple(rest)
        assert not any(_bindable(port) for port in rest)


def test_hand_over_releases_one_port_for_its_consumer(backend: str) -> None:
    with reserve_ports(2, start=LOW, end=HIGH) as held:
        port = held.hand_over(held.ports[1])
        assert port == held.ports[1]
        assert _bindable(port)
        assert not _bindable(held.ports[0])


def test_hand_over_twice_is_an_error(backend: str) -> None:
    with reserve_ports(1, start=LOW, end=HIGH) as held:
        held.hand_over(held.ports[0])
        with pytest.raises(PortError, match="already released or handed over"):
            held.hand_over(held.ports[0])


def test_a_port_outside_the_reservation_is_an_error(backend: str) -> None:
    with reserve_ports(1, start=LOW, end=HIGH) as held:
        stranger = held.ports[0] + 1
        for method in (held.hand_over, held.release, held.detach):
            with pytest.raises(PortError, match=f"port {stranger} is not part of"):
                method(stranger)


def test_detach_hands_over_the_listening_socket(backend: str) -> None:
    with reserve_ports(1, start=LOW, end=HIGH) as held:
        port = held.ports[0]
        with held.detach(port) as server:
            assert held.held == ()
            assert server.getsockname()[1] == port
            with socket.create_connection(("127.0.0.1", port), timeout=5):
                pass
            assert not _bindable(port)
    assert _bindable(port)


def test_a_reservation_does_not_pickle(backend: str) -> None:
    with (
        reserve_ports(1, start=LOW, end=HIGH) as held,
        pytest.raises(TypeError, match=r"send \.ports instead"),
    ):
        pickle.dumps(held)


def test_repr_shows_host_ports_and_what_is_held(backend: str) -> None:
    with reserve_ports(2, start=LOW, end=HIGH) as held:
        held.release(held.ports[0])
        assert repr(held) == (
            f"PortReservation(host='127.0.0.1', ports={held.ports}, held={held.ports[1:]})"
        )


def test_consecutive_ports_form_a_run(backend: str) -> None:
    with reserve_ports(8, consecutive=True, start=LOW, end=HIGH) as held:
        first = held.ports[0]
        assert held.ports == tuple(range(first, first + 8))


def test_ports_busy_in_the_kernel_table_are_skipped(
    backend: str, sockets: list[socket.socket]
) -> None:
    base = _free_block(6)
    taken = {_listen(sockets, "127.0.0.1", base), _listen(sockets, "127.0.0.1", base + 2)}
    with reserve_ports(3, start=base, end=base + 5) as held:
        assert held.ports == (base + 1, base + 3, base + 4)
        assert not taken & set(held.ports)


def test_a_consecutive_run_goes_past_busy_ports(backend: str, sockets: list[socket.socket]) -> None:
    base = _free_block(10)
    _listen(sockets, "127.0.0.1", base + 3)
    with reserve_ports(4, consecutive=True, start=base, end=base + 9) as held:
        assert held.ports == (base + 4, base + 5, base + 6, base + 7)


@pytest.mark.usefixtures("ipv6_loopback")
def test_a_port_on_another_specific_address_is_free_here(
    backend: str, sockets: list[socket.socket]
) -> None:
    base = _free_block(1)
    _listen(sockets, "::1", base)
    with reserve_ports(1, start=base, end=base) as held:
        assert held.ports == (base,)


def test_a_bound_but_not_listening_port_is_never_handed_out(
    backend: str, sockets: list[socket.socket]
) -> None:
    base = _free_block(2)
    bound = socket.socket()
    sockets.append(bound)
    bound.bind(("127.0.0.1", base))
    with reserve_ports(1, start=base, end=base + 1) as held:
        assert held.ports == (base + 1,)


@pytest.mark.usefixtures("ipv6_loopback")
def test_ipv6_loopback_ports_are_reserved_and_held(backend: str) -> None:
    with reserve_ports(2, host="::1", consecutive=True, start=LOW, end=HIGH) as held:
        assert held.host == "::1"
        assert held.ports[1] == held.ports[0] + 1
        assert not any(_bindable(port, "::1") for port in held.ports)


@pytest.mark.usefixtures("ipv6_loopback")
def test_bracketed_ipv6_host_is_accepted(backend: str) -> None:
    with reserve_ports(1, host="[::1]", start=LOW, end=HIGH) as held:
        assert held.host == "::1"


@pytest.mark.usefixtures("ipv6_loopback")
def test_an_ipv4_listener_does_not_take_the_port_on_ipv6_loopback(
    backend: str, sockets: list[socket.socket]
) -> None:
    base = _free_block(1)
    _listen(sockets, "127.0.0.1", base)
    with reserve_ports(1, host="::1", start=base, end=base) as held:
        assert held.ports == (base,)


def test_find_free_ports_releases_what_it_found(backend: str) -> None:
    ports = find_free_ports(3, consecutive=True, start=LOW, end=HIGH)
    assert ports == tuple(range(ports[0], ports[0] + 3))
    assert all(_bindable(port) for port in ports)


@pytest.mark.usefixtures("ipv6_loopback")
def test_both_backends_pick_the_same_ports(sockets: list[socket.socket]) -> None:
    if _backend.native_module is None:
        pytest.skip("the compiled extension is not active")
    base = _free_block(40)
    for offset in (0, 1, 5, 9, 17, 18):
        _listen(sockets, "127.0.0.1", base + offset)
    _listen(sockets, "::1", base + 2)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_socket_table, "_netlink_refused", False)
        compiled = find_free_ports(6, start=base, end=base + 39)
        compiled_run = find_free_ports(4, consecutive=True, start=base, end=base + 39)
        patch.setattr(_socket_table, "_native_lib", lambda: None)
        fallback = find_free_ports(6, start=base, end=base + 39)
        fallback_run = find_free_ports(4, consecutive=True, start=base, end=base + 39)
    assert compiled == fallback == tuple(base + i for i in (2, 3, 4, 6, 7, 8))
    assert compiled_run == fallback_run == tuple(base + i for i in (10, 11, 12, 13))


# Default range ------------------------------------------------------------------------


KernelSettings = Callable[[str, str], None]


@pytest.fixture
def kernel_settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> KernelSettings:
    """Point the kernel's ephemeral-range and reserved-ports files at test copies."""

    def configure(ephemeral: str, reserved: str) -> None:
        (tmp_path / "ip_local_port_range").write_text(ephemeral)
        (tmp_path / "ip_local_reserved_ports").write_text(reserved)
        monkeypatch.setattr(
            _port_ranges, "EPHEMERAL_RANGE_FILE", str(tmp_path / "ip_local_port_range")
        )
        monkeypatch.setattr(
            _port_ranges, "RESERVED_PORTS_FILE", str(tmp_path / "ip_local_reserved_ports")
        )

    return configure


def _in_default_range(port: int, ephemeral: tuple[int, int]) -> bool:
    return 20000 <= port <= 65535 and not ephemeral[0] <= port <= ephemeral[1]


def test_default_range_avoids_ray_ephemeral_and_reserved_ports(
    backend: str, kernel_settings: KernelSettings
) -> None:
    kernel_settings("20010\t60999\n", "20000-20003,20005\n")
    with reserve_ports(3) as held:
        assert set(held.ports) <= {20004, *range(20006, 20010), *range(61000, 65536)}


def test_default_range_follows_the_live_kernel_settings(backend: str) -> None:
    ephemeral = _port_ranges.read_ephemeral_range() or (32768, 60999)
    reserved = _port_ranges.read_reserved_ports()
    with reserve_ports(16) as held:
        for port in held.ports:
            assert _in_default_range(port, ephemeral)
            assert not any(low <= port <= high for low, high in reserved)
            low_ray, high_ray = _port_ranges.RAY_WORKER_PORTS
            assert not low_ray <= port <= high_ray


def test_explicit_range_overrides_every_exclusion(
    backend: str, kernel_settings: KernelSettings
) -> None:
    kernel_settings("23100 23999\n", "23100-23999\n")
    with reserve_ports(1, start=LOW, end=HIGH) as held:
        assert LOW <= held.ports[0] <= HIGH


def test_one_bound_alone_takes_the_other_from_20000_65535() -> None:
    assert _port_ranges.explicit_search_range(65000, None) == SearchRange(65000, 65535)
    assert _port_ranges.explicit_search_range(None, 20005) == SearchRange(20000, 20005)


def test_an_empty_default_range_says_why(backend: str, kernel_settings: KernelSettings) -> None:
    kernel_settings("1024 65535", "")
    with pytest.raises(
        NoFreePortsError,
        match=r"in nothing \(the default range 20000-65535 without .*"
        r"the kernel's ephemeral range 20000-65535\)",
    ):
        reserve_ports(1)


# Bad arguments ------------------------------------------------------------------------


@pytest.mark.parametrize("count", [0, -3, True, 2.0, "2", None])
def test_count_must_be_a_positive_integer(count: object) -> None:
    with pytest.raises(PortError, match=r"count must be an integer >= 1, got "):
        reserve_ports(count)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("start", "end", "message"),
    [
        (0, None, "start must be a port number in 1..65535, got 0"),
        (None, 65536, "end must be a port number in 1..65535, got 65536"),
        (-1, 10, "start must be a port number in 1..65535, got -1"),
        ("20000", None, "start must be a port number \\(int\\), got '20000'"),
        (None, 3.5, "end must be a port number \\(int\\), got 3.5"),
        (30000, 29999, "start must not be above end, got start=30000, end=29999"),
        (None, 15000, "start must not be above end, got start=default, end=15000"),
    ],
)
def test_bad_ranges_are_rejected(start: object, end: object, message: str) -> None:
    with pytest.raises(PortError, match=message):
        reserve_ports(1, start=start, end=end)  # type: ignore[arg-type]


def test_a_range_smaller_than_count_is_rejected() -> None:
    with pytest.raises(
        PortError, match="count=5 is more than the 3 ports of the range 30000-30002"
    ):
        find_free_ports(5, start=30000, end=30002)


@pytest.mark.parametrize("host", ["localhost", "127.0.0.256", "", "::g", "[127.0.0.1"])
def test_host_must_be_an_ip_address(host: str) -> None:
    with pytest.raises(PortError, match="host must be an IPv4 or IPv6 address"):
        reserve_ports(1, host=host)


def test_host_must_be_a_string() -> None:
    with pytest.raises(PortError, match=r"host must be an IP address string .* got 127"):
        reserve_ports(1, host=127)  # type: ignore[arg-type]


def test_host_must_belong_to_this_machine(backend: str) -> None:
    # 192.0.2.0/24 is TEST-NET-1 (RFC 5737): never configured on a real interface.
    with pytest.raises(PortError, match=r"host '192\.0\.2\.1' is not an address of this machine"):
        reserve_ports(1, host="192.0.2.1", start=LOW, end=HIGH)


def test_consecutive_must_be_a_bool() -> None:
    with pytest.raises(PortError, match="consecutive must be True or False, got 'yes'"):
        reserve_ports(2, consecutive="yes")  # type: ignore[arg-type]


def test_no_consecutive_run_says_what_was_searched(
    backend: str, sockets: list[socket.socket]
) -> None:
    base = _free_block(6)
    for offset in (1, 3, 5):
        _listen(sockets, "127.0.0.1", base + offset)
    source = "netlink" if backend == "cffi" else "proc"
    with pytest.raises(
        NoFreePortsError,
        match=rf"^no run of 2 consecutive free ports on 127\.0\.0\.1 in {base}-{base + 5}: "
        rf"3 busy in the kernel's socket table \({source}, \d+ TCP sockets\), "
        r"0 more refused by bind$",
    ):
        reserve_ports(2, consecutive=True, start=base, end=base + 5)


def test_too_few_free_ports_says_how_many_were_found(
    backend: str, sockets: list[socket.socket]
) -> None:
    base = _free_block(3)
    _listen(sockets, "127.0.0.1", base + 1)
    with pytest.raises(
        NoFreePortsError,
        match=rf"only 2 of 3 ports free on 127.0.0.1 in {base}-{base + 2}: 1 busy in the "
        r"kernel's socket table",
    ):
        reserve_ports(3, start=base, end=base + 2)
    assert _bindable(base), "nothing stays held after a failure"
    assert _bindable(base + 2)


def test_port_errors_survive_pickling(sockets: list[socket.socket]) -> None:
    base = _free_block(1)
    _listen(sockets, "127.0.0.1", base)
    errors: list[Exception] = []
    for call in (lambda: reserve_ports(0), lambda: reserve_ports(1, start=base, end=base)):
        with pytest.raises((PortError, NoFreePortsError)) as caught:
            call()
        errors.append(caught.value)
    for error in errors:
        copy = pickle.loads(pickle.dumps(error))
        assert type(copy) is type(error)
        assert str(copy) == str(error)


def test_errors_are_the_documented_builtin_kinds() -> None:
    with pytest.raises(ValueError, match="count"):
        reserve_ports(0)
    assert issubclass(NoFreePortsError, OSError)


# Properties ---------------------------------------------------------------------------


@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    busy=st.sets(st.integers(0, 23), max_size=16),
    count=st.integers(1, 6),
    consecutive=st.booleans(),
)
def test_reserved_ports_are_free_distinct_and_in_range(
    sockets: list[socket.socket], busy: set[int], count: int, consecutive: bool
) -> None:
    base = _free_block(24)
    listeners: list[socket.socket] = []
    try:
        for offset in busy:
            _listen(listeners, "127.0.0.1", base + offset)
        try:
            held = reserve_ports(count, consecutive=consecutive, start=base, end=base + 23)
        except NoFreePortsError:
            free = [offset for offset in range(24) if offset not in busy]
            if consecutive:
                runs = (set(range(i, i + count)) <= set(free) for i in range(24 - count + 1))
                assert not any(runs)
            else:
                assert len(free) < count
            return
        with held:
            assert len(set(held.ports)) == count
            assert all(base <= port <= base + 23 for port in held.ports)
            assert not {port - base for port in held.ports} & busy
            if consecutive:
                assert held.ports == tuple(range(held.ports[0], held.ports[0] + count))
    finally:
        for sock in listeners:
            sock.close()


def test_running_out_of_file_descriptors_is_a_clear_error(backend: str) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    open_now = len(os.listdir("/proc/self/fd"))
    resource.setrlimit(resource.RLIMIT_NOFILE, (open_now + 8, hard))
    try:
        with pytest.raises(NoFreePortsError, match="every held port keeps one file descriptor"):
            reserve_ports(20, start=LOW, end=HIGH)
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    assert _bindable(find_free_ports(1, start=LOW, end=HIGH)[0])
