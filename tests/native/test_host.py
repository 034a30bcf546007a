"""Host facts: primary IP without packets, cpu lists, sysfs affinity of a PCI device."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from placement_native import _host

ROUTE_HEADER = "Iface\tDestination\tGateway\tFlags\tRefCnt\tUse\tMetric\tMask\tMTU\tWindow\tIRTT\n"


def _route_file(tmp_path: Path, *rows: str) -> Path:
    path = tmp_path / "route"
    path.write_text(ROUTE_HEADER + "".join(row + "\n" for row in rows))
    return path


def _row(iface: str, dest: str = "00000000", flags: str = "0003", metric: int = 0,
         mask: str = "00000000") -> str:  # fmt: skip
    return f"{iface}\t{dest}\t0102A8C0\t{flags}\t0\t0\t{metric}\t{mask}\t0\t0\t0"


def test_default_route_is_the_zero_destination_with_zero_mask(tmp_path: Path) -> None:
    route = _route_file(
        tmp_path,
        _row("eth1", dest="0002A8C0", mask="00FFFFFF"),
        _row("eth0"),
        _row("eth2", metric=5),
    )
    assert _host.default_route_interface(route) == "eth0"


def test_lowest_metric_default_route_wins(tmp_path: Path) -> None:
    route = _route_file(tmp_path, _row("wlan0", metric=600), _row("eth0", metric=100))
    assert _host.default_route_interface(route) == "eth0"


def test_a_route_that_is_down_is_ignored(tmp_path: Path) -> None:
    route = _route_file(tmp_path, _row("eth0", flags="0002"), _row("eth9", metric=50))
    assert _host.default_route_interface(route) == "eth9"


def test_no_default_route_or_no_file_gives_none(tmp_path: Path) -> None:
    assert (
        _host.default_route_interface(_route_file(tmp_path, _row("eth0", dest="0000000A"))) is None
    )
    assert _host.default_route_interface(tmp_path / "missing") is None


def test_primary_ip_prefers_the_default_route_address(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_host, "hostname_address", lambda name: pytest.fail("resolved the name"))
    assert _host.choose_ip("10.1.2.3", "node7") == "10.1.2.3"


def test_primary_ip_falls_back_to_the_hostname_address(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_host, "hostname_address", lambda name: "10.9.8.7" if name == "n" else None)
    assert _host.choose_ip(None, "n") == "10.9.8.7"


def test_primary_ip_is_loopback_as_a_last_resort(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_host, "hostname_address", lambda name: None)
    assert _host.choose_ip(None, "n") == "127.0.0.1"


def test_primary_ip_of_this_host_reads_the_route_first(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_host, "route_ipv4", lambda route_file=None: "10.0.0.5")
    assert _host.primary_ip() == "10.0.0.5"


def test_a_loopback_route_address_is_not_primary(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(_host, "interface_ipv4", lambda iface: "127.0.0.1")
    assert _host.route_ipv4(_route_file(tmp_path, _row("lo"))) is None


def test_loopback_interface_address_is_read_by_ioctl() -> None:
    assert _host.interface_ipv4("lo") == "127.0.0.1"
    assert _host.interface_ipv4("no-such-if0") is None


def test_hostname_address_skips_loopback() -> None:
    assert _host.hostname_address("localhost") is None


def test_parse_and_format_cpulist() -> None:
    assert _host.parse_cpulist("0-3,8,10-11\n") == [0, 1, 2, 3, 8, 10, 11]
    assert _host.format_cpulist([11, 10, 8, 3, 2, 1, 0]) == "0-3,8,10-11"
    assert _host.format_cpulist([]) == ""


def test_a_descending_cpu_range_is_an_error() -> None:
    with pytest.raises(ValueError, match="bad cpu range '5-3'"):
        _host.parse_cpulist("5-3")


@given(st.sets(st.integers(min_value=0, max_value=4095), max_size=300))
def test_cpulist_round_trips(cpus: set[int]) -> None:
    text = _host.format_cpulist(cpus)
    assert _host.parse_cpulist(text) == sorted(cpus)


@given(st.sets(st.integers(min_value=0, max_value=4095), max_size=300))
def test_mask_and_cpulist_agree(cpus: set[int]) -> None:
    mask = sum(1 << cpu for cpu in cpus)
    assert _host.cpulist_from_mask(mask) == _host.format_cpulist(cpus)


def test_nvml_mask_words_read_as_one_integer() -> None:
    words = [0xFF00FF000000000F, 1, 0, 1 << 63]
    mask = sum(word << (64 * i) for i, word in enumerate(words))
    assert _host.cpulist_from_mask(mask) == "0-3,40-47,56-64,255"


def test_sysfs_affinity_uses_the_four_digit_domain(tmp_path: Path) -> None:
    device = tmp_path / "bus" / "pci" / "devices" / "0000:9a:00.0"
    device.mkdir(parents=True)
    (device / "numa_node").write_text("1\n")
    (device / "local_cpulist").write_text("56-111,168-223\n")
    assert _host.pci_sysfs_affinity("00000000:9A:00.0", tmp_path) == (1, "56-111,168-223")


def test_sysfs_without_numa_information_gives_none(tmp_path: Path) -> None:
    device = tmp_path / "bus" / "pci" / "devices" / "0000:18:00.0"
    device.mkdir(parents=True)
    (device / "numa_node").write_text("-1\n")
    assert _host.pci_sysfs_affinity("00000000:18:00.0", tmp_path) == (None, None)
    assert _host.pci_sysfs_affinity("not-a-bus-id", tmp_path) == (None, None)


def test_numa_nodes_are_counted_from_sysfs(tmp_path: Path) -> None:
    nodes = tmp_path / "devices" / "system" / "node"
    for name in ("node0", "node1", "node3", "possible", "nodeX"):
        (nodes / name).mkdir(parents=True)
    assert _host.numa_node_count(tmp_path) == 3
    assert _host.numa_node_count(tmp_path / "nothing") == 1


def test_host_memory_is_memtotal_of_meminfo(tmp_path: Path) -> None:
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:       2113355776 kB\nMemFree:  1 kB\n", encoding="ascii")
    assert _host.host_memory_bytes(meminfo) == 2113355776 * 1024


@pytest.mark.parametrize("text", ["MemFree: 1 kB\n", "MemTotal: lots kB\n", ""])
def test_host_memory_is_none_where_meminfo_does_not_say(tmp_path: Path, text: str) -> None:
    meminfo = tmp_path / "meminfo"
    meminfo.write_text(text, encoding="ascii")
    assert _host.host_memory_bytes(meminfo) is None


def test_host_memory_of_a_missing_file_is_none(tmp_path: Path) -> None:
    assert _host.host_memory_bytes(tmp_path / "absent") is None
