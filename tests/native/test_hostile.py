"""Hostile input and faults: a faulty driver, hostile environment variables and port hosts
each get a bounded answer and a typed placement-native error, never a hang or a foreign
exception. Generated cases (seeded) run beside the named examples."""

from __future__ import annotations

import ast
import builtins
import contextlib
import dataclasses
import ipaddress
import json
import os
import pickle
import random
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

import placement_native
from placement_native import _backend, _cli, _host, _nvml_pynvml, _snapshot
from placement_native._model import NodeSnapshot
from placement_native.errors import (
    EnvVarError,
    NativeError,
    NVMLAnswerError,
    NVMLError,
    PortError,
)
from placement_native.ports import find_free_ports, reserve_ports
from placement_native.testing import Topology, topology

from .conftest import Take, UseNode

RNG = random.Random(20261124)
U32_MAX = 2**32 - 1

needs_both_backends = pytest.mark.skipif(
    _backend.native_module is None, reason="the compiled backend is not active"
)


def _hostile_bytes(rng: random.Random, size: int) -> bytes:
    """Bytes as a broken driver could write them: no NUL or white space (the fake's file
    format splits on those), at least one byte that cannot start valid UTF-8."""
    alphabet = [b for b in range(0x21, 0x100) if b != 0x7F]
    return bytes(rng.choice(alphabet) for _ in range(size - 1)) + b"\xff"


# Named examples: a lone byte, a truncated sequence, an encoded surrogate, an overlong
# form, a code point past U+10FFFF, and a valid prefix before the damage.
NAMED_BYTES = [
    b"\xff",
    b"H100\xc3",
    b"\xed\xa0\x80",
    b"\xc0\xaf",
    b"\xf4\x90\x80\x80",
    b"GPU-\x80-1",
]
GENERATED_BYTES = [_hostile_bytes(RNG, RNG.randint(1, 60)) for _ in range(8)]
HOSTILE_BYTES = NAMED_BYTES + GENERATED_BYTES


def _text(raw: bytes) -> str:
    """``raw`` as the fake library should write it (lone surrogates stand for the bytes)."""
    return raw.decode("utf-8", "surrogateescape")


def _with_hostile_string(field: str, raw: bytes) -> Topology:
    machine = topology("mig")
    value = _text(raw)
    mig = machine.gpus[0].mig_devices[0]
    if field == "driver":
        machine.driver = value
    elif field == "mig uuid":
        mig.uuid = value
    elif field == "mig name":
        mig.name = value
    else:
        setattr(machine.gpus[0], {"name": "name", "uuid": "uuid", "bus id": "bus"}[field], value)
    return machine


def _read_field(snap: NodeSnapshot, field: str) -> str | None:
    gpu = snap.accelerators[0]
    return {
        "driver": snap.driver,
        "name": gpu.model,
        "uuid": gpu.uuid,
        "bus id": gpu.pci_bus_id,
        "mig uuid": gpu.mig_instances[0].uuid,
        "mig name": gpu.mig_instances[0].model,
    }[field]


STRING_FIELDS = ["driver", "name", "uuid", "bus id", "mig uuid", "mig name"]


# ---- Strings from the driver that are not UTF-8 ----


@pytest.mark.parametrize("raw", HOSTILE_BYTES, ids=repr)
@pytest.mark.parametrize("field", STRING_FIELDS)
def test_invalid_utf8_from_the_driver_becomes_replacement_characters(
    take: Take, field: str, raw: bytes
) -> None:
    snap = take(_with_hostile_string(field, raw), strict=True)
    served = raw[:31] if field == "bus id" else raw  # the PCI bus id field holds 32 bytes
    assert _read_field(snap, field) == served.decode("utf-8", "replace")
    assert json.loads(snap.to_json()) == snap.to_dict()  # and the JSON form holds it


@needs_both_backends
@pytest.mark.parametrize("field", STRING_FIELDS)
def test_both_backends_decode_invalid_utf8_alike(use_node: UseNode, field: str) -> None:
    for raw in HOSTILE_BYTES:
        use_node(_with_hostile_string(field, raw))
        compiled, fallback = _snapshot.take("cffi"), _snapshot.take("purepython")
        assert dataclasses.replace(fallback, source=compiled.source) == compiled


def test_a_driver_version_longer_than_nvmls_buffer_is_absent(take: Take) -> None:
    machine = topology("pcie-2-switches")
    machine.driver = "5" * 100  # NVML's driver version buffer holds 80 bytes
    assert take(machine).driver is None


# ---- Counts beyond what a node can hold ----


@pytest.mark.parametrize("count", [65, 1000, 2**31, U32_MAX])
def test_a_huge_device_count_reads_the_first_64_and_says_so(take: Take, count: int) -> None:
    machine = topology("pcie-2-switches")
    machine.count = count
    snap = take(machine)
    assert len(snap.accelerators) == 64
    assert [a.uuid for a in snap.accelerators[:8]] == [g.uuid for g in machine.gpus]
    assert snap.nvml_error == (
        f"nvmlDeviceGetCount_v2 answered out of bounds: {count} devices, more than the 64 a "
        f"node can hold; GPUs 0-63 were read"
    )


def test_a_huge_device_count_is_a_typed_error_when_strict(take: Take) -> None:
    machine = topology("pcie-2-switches")
    machine.count = U32_MAX
    with pytest.raises(NVMLAnswerError, match="4294967295 devices"):
        take(machine, strict=True)


def test_a_device_count_of_64_is_in_bounds(take: Take) -> None:
    machine = topology("pcie-2-switches")
    machine.count = 64
    snap = take(machine)
    assert (len(snap.accelerators), snap.nvml_error) == (64, None)


@pytest.mark.parametrize("slots", [9, 1000, 2**31, U32_MAX])
def test_a_huge_mig_slot_count_reads_the_first_8_slots_and_says_so(take: Take, slots: int) -> None:
    machine = topology("mig")
    machine.gpus[0].mig_slots = slots
    gpu = take(machine).accelerators[0]
    assert [m.index for m in gpu.mig_instances] == [0, 1, 3]
    assert gpu.error == (
        f"nvmlDeviceGetMaxMigDeviceCount answered out of bounds: GPU 0: {slots} MIG slots, "
        f"more than the 8 a GPU can have; slots 0-7 were read"
    )


def test_a_huge_mig_slot_count_is_a_typed_error_when_strict(take: Take) -> None:
    machine = topology("mig")
    machine.gpus[0].mig_slots = U32_MAX
    with pytest.raises(NVMLAnswerError, match="GPU 0: 4294967295 MIG slots"):
        take(machine, strict=True)


@needs_both_backends
@pytest.mark.parametrize("count", [65, U32_MAX])
def test_both_backends_agree_on_huge_counts(use_node: UseNode, count: int) -> None:
    machine = topology("mig")
    machine.count = count
    machine.gpus[0].mig_slots = count
    use_node(machine)
    compiled, fallback = _snapshot.take("cffi"), _snapshot.take("purepython")
    assert dataclasses.replace(fallback, source=compiled.source) == compiled


# ---- A failing nvmlShutdown, and pynvml's own exceptions ----


def test_a_snapshot_never_shuts_nvml_down(take: Take) -> None:
    machine = topology("pcie-2-switches")
    machine.shutdown_error = 999
    snap = take(machine)
    assert len(snap.accelerators) == 8
    assert snap.nvml_error is None


@pytest.mark.parametrize("code", [15, 999])
def test_a_failing_shutdown_is_our_nvml_error_when_the_session_is_given_back(
    take: Take, nvml_backend: _snapshot.Backend, code: int
) -> None:
    machine = topology("pcie-2-switches")
    machine.shutdown_error = code
    take(machine)
    failure = _snapshot._readers.get(nvml_backend).close()
    assert isinstance(failure, NVMLError)
    assert type(failure).__module__ == "placement_native.errors"
    assert str(failure).startswith("nvmlShutdown failed:")
    assert f"[{code}]" in str(failure)
    assert not _snapshot._readers.get(nvml_backend).holds()


# Every pynvml function the fallback calls, failing with each kind of code in turn.
PYNVML_CALLS = [
    "nvmlInit",
    "nvmlShutdown",
    "nvmlSystemGetDriverVersion",
    "nvmlDeviceGetCount",
    "nvmlDeviceGetHandleByIndex",
    "nvmlDeviceGetName",
    "nvmlDeviceGetUUID",
    "nvmlDeviceGetPciInfo_v3",
    "nvmlDeviceGetMemoryInfo",
    "nvmlDeviceGetNumaNodeId",
    "nvmlDeviceGetCpuAffinityWithinScope",
    "nvmlDeviceGetCudaComputeCapability",
    "nvmlDeviceGetMigMode",
    "nvmlDeviceGetMaxMigDeviceCount",
    "nvmlDeviceGetMigDeviceHandleByIndex",
    "nvmlDeviceGetNvLinkState",
    "nvmlDeviceGetNvLinkRemotePciInfo",
    "nvmlDeviceGetTopologyCommonAncestor",
    "nvmlDeviceGetP2PStatus",
]


@pytest.mark.parametrize("code", [1, 4, 15, 999])
@pytest.mark.parametrize("function", PYNVML_CALLS)
def test_no_pynvml_exception_leaves_the_fallback(
    use_node: UseNode, monkeypatch: pytest.MonkeyPatch, function: str, code: int
) -> None:
    pynvml = _nvml_pynvml._private_pynvml()
    real = getattr(pynvml, function)

    def failing(*args: object) -> object:
        if function == "nvmlShutdown":
            real()  # keep the fake library's init count balanced
        raise pynvml.NVMLError(code)

    use_node("mig")
    monkeypatch.setattr(pynvml, function, failing)
    _snapshot.take("purepython")  # records, never raises
    with contextlib.suppress(NativeError):  # pynvml's errors are no NativeError: they fail
        _snapshot.take("purepython", strict=True)


def test_the_cli_lists_the_gpus_read_beside_the_node_error(
    use_node: UseNode, capsys: pytest.CaptureFixture[str]
) -> None:
    machine = topology("pcie-2-switches")
    machine.count = 65  # beyond what a node holds: the first 64 are read
    use_node(machine)
    assert _cli.main(["snapshot"]) == 0
    out = capsys.readouterr().out
    assert "NVIDIA L40S" in out
    assert "nvml error: " in out
    assert "65 devices" in out


# ---- pynvml stays as other code in the process has it ----


def test_the_fallback_leaves_the_global_pynvml_untouched(use_node: UseNode) -> None:
    import pynvml

    before = (pynvml.nvmlLib, dict(pynvml._nvmlGetFunctionPointer_cache), pynvml._nvmlLib_refcount)
    use_node("dgx-h100")
    assert len(_snapshot.take("purepython").accelerators) == 8
    after = (pynvml.nvmlLib, dict(pynvml._nvmlGetFunctionPointer_cache), pynvml._nvmlLib_refcount)
    assert after == before
    assert sys.modules["pynvml"] is pynvml


def test_the_fallback_does_not_even_import_the_global_pynvml(use_node: UseNode) -> None:
    use_node("dgx-h100")
    code = (
        "import sys; from placement_native import _snapshot; "
        "assert len(_snapshot.take('purepython').accelerators) == 8; "
        "print('pynvml' in sys.modules)"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=os.environ
    )
    assert result.stdout.strip() == "False"


# ---- Environment variables ----

NOT_UTF8 = "/opt/nvidia/\udcff\udcfe/libnvidia-ml.so.1"  # bytes 0xff 0xfe, as os.environ has them
PATH_VARIABLES = ["PLACEMENT_NVML_LIBRARY", "PLACEMENT_SYSFS_ROOT"]


@pytest.mark.parametrize("name", PATH_VARIABLES)
def test_a_path_variable_that_is_not_utf8_is_a_typed_error(
    use_node: UseNode, nvml_backend: str, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    use_node("dgx-h100")
    monkeypatch.setenv(name, NOT_UTF8)
    with pytest.raises(EnvVarError) as info:
        _snapshot.take(nvml_backend)
    error = info.value
    assert error.name == name
    assert str(error) == (
        f"{name}={NOT_UTF8!r} is not usable: expected a UTF-8 path of at most 4095 bytes "
        f"(the value is not valid UTF-8)"
    )


@pytest.mark.parametrize("name", PATH_VARIABLES)
def test_a_path_variable_longer_than_path_max_is_a_typed_error(
    monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    monkeypatch.setenv(name, "/x" * 5000)
    with pytest.raises(EnvVarError, match=r"\(10000 characters\)' is not usable") as info:
        placement_native.snapshot()
    assert len(str(info.value)) < 200


def _generated_bad_ranks() -> list[str]:
    rng = random.Random(7)
    junk = [
        "".join(rng.choice("0123456789-+.eE x_٣") for _ in range(rng.randint(1, 12)))
        for _ in range(20)
    ]
    return [j for j in junk if not (j.strip().isascii() and j.strip().isdigit())]


BAD_RANKS = ["9" * 5000, "-1", "1e3", "0x10", "3.0", "٣", "２", "2147483648", "1_000"]


@pytest.mark.parametrize("value", BAD_RANKS + _generated_bad_ranks())
@pytest.mark.parametrize("name", ["PLACEMENT_NODE_RANK", "RLINF_NODE_RANK"])
def test_a_bad_node_rank_is_a_typed_error_naming_the_variable(
    use_node: UseNode, monkeypatch: pytest.MonkeyPatch, name: str, value: str
) -> None:
    use_node("no-driver")
    monkeypatch.delenv("PLACEMENT_NODE_RANK", raising=False)
    monkeypatch.setenv(name, value)
    with pytest.raises(EnvVarError) as info:
        placement_native.snapshot()
    message = str(info.value)
    assert message.startswith(f"{name}=")
    assert message.endswith("expected an integer from 0 to 2147483647")
    assert len(message) < 200  # the 5,000 digits are shortened


@pytest.mark.parametrize(("value", "rank"), [(" 7 ", 7), ("0", 0), ("2147483647", 2**31 - 1)])
def test_node_ranks_up_to_int32_max_are_read(
    take: Take, monkeypatch: pytest.MonkeyPatch, value: str, rank: int
) -> None:
    monkeypatch.setenv("PLACEMENT_NODE_RANK", value)
    assert take("no-driver").node_rank == rank


def test_env_errors_pickle() -> None:
    error = EnvVarError("PLACEMENT_NODE_RANK", "9" * 5000, "an integer")
    clone = pickle.loads(pickle.dumps(error))
    assert (type(clone), str(clone), clone.name) == (EnvVarError, str(error), error.name)


def test_the_cli_reports_a_bad_variable_in_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("PLACEMENT_NODE_RANK", "9" * 5000)
    assert _cli.main(["snapshot"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: PLACEMENT_NODE_RANK='9999")
    assert err.count("\n") == 1


# ---- Port hosts ----


def _multicast_samples() -> list[str]:
    rng = random.Random(11)
    v4 = [str(ipaddress.IPv4Address(rng.randint(0xE0000000, 0xEFFFFFFF))) for _ in range(6)]
    v6 = [str(ipaddress.IPv6Address((0xFF << 120) | rng.getrandbits(120))) for _ in range(6)]
    return v4 + v6


MULTICAST = ["224.0.0.1", "239.255.255.250", "ff02::1", "[ff05::2]", "::ffff:224.0.0.1"]
BROADCAST = ["255.255.255.255", "127.255.255.255", "::ffff:255.255.255.255"]
LINK_LOCAL_WITHOUT_SCOPE = ["fe80::1", "[fe80::1]", "fe80::abcd:12ff:fe34:5678"]
UNKNOWN_INTERFACE = ["fe80::1%no-such-if0", "fe80::1%4000000"]
REFUSED_HOSTS = {
    "multicast": MULTICAST + _multicast_samples(),
    "broadcast": BROADCAST + sorted(str(b) for b in _host.ipv4_broadcasts()),
    "link-local IPv6 address without a scope id": LINK_LOCAL_WITHOUT_SCOPE,
    "which this machine does not have": UNKNOWN_INTERFACE,
    "host names are not resolved": ["localhost", "no-such-host.invalid", "eth0"],
}
REFUSED_CASES = [(why, host) for why, hosts in REFUSED_HOSTS.items() for host in hosts]


@pytest.mark.parametrize(("why", "host"), REFUSED_CASES)
@pytest.mark.parametrize("function", [reserve_ports, find_free_ports])
def test_hosts_that_cannot_be_served_are_refused_naming_the_host(
    backend: str, function: Callable[..., object], why: str, host: str
) -> None:
    with pytest.raises(PortError) as info:
        function(1, host=host, start=23100, end=23999)
    assert why in str(info.value)
    assert repr(host) in str(info.value)


@pytest.mark.parametrize("host", ["fe80::1%lo", "fe80::1%1", "192.0.2.77", "2001:db8::77"])
def test_an_address_that_is_not_this_machines_is_refused_naming_it(backend: str, host: str) -> None:
    with pytest.raises(PortError, match="is not an address of this machine") as info:
        reserve_ports(1, host=host, start=23100, end=23999)
    assert host in str(info.value)


@pytest.mark.parametrize("host", ["h" * 10_000, "fe80::1%" + "x" * 10_000])
def test_a_hostile_host_string_is_shortened_in_the_message(backend: str, host: str) -> None:
    with pytest.raises(PortError) as info:
        reserve_ports(1, host=host)
    assert len(str(info.value)) < 300


@pytest.mark.parametrize("host", ["127.0.0.3", "127.0.0.1", "0.0.0.0"])
def test_addresses_ending_like_a_broadcast_but_local_are_served(backend: str, host: str) -> None:
    with reserve_ports(1, host=host, start=23100, end=23999) as held:
        assert len(held.ports) == 1


# ---- Only typed errors leave the package ----

# Raises of builtin exceptions that a protocol asks for, or that never leave the module.
ALLOWED_BUILTIN_RAISES = {
    ("__init__.py", "AttributeError"),  # module __getattr__ (PEP 562)
    ("ports.py", "TypeError"),  # __reduce__: pickle's way of refusing
    ("_host.py", "ValueError"),  # parse_cpulist, caught by pci_sysfs_affinity
    ("_socket_table.py", "OSError"),  # caught by mark_busy, which reads /proc instead
    ("_nvml_pynvml.py", "ImportError"),  # caught by read, which records it as an NVMLError
}
BUILTIN_EXCEPTIONS = {
    name
    for name, value in vars(builtins).items()
    if isinstance(value, type) and issubclass(value, BaseException)
}


def test_the_package_raises_only_its_own_errors() -> None:
    package = Path(placement_native.__file__).parent
    found = set()
    for path in sorted(package.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call):
                func = node.exc.func
                if isinstance(func, ast.Name) and func.id in BUILTIN_EXCEPTIONS:
                    found.add((path.name, func.id))
    assert found <= ALLOWED_BUILTIN_RAISES
