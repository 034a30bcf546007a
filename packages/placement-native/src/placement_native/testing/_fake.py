"""``fake_nvml(topology)``: point this process (or a Ray node) at a fake NVML machine."""

from __future__ import annotations

import ctypes
import os
import shutil
import tempfile
from pathlib import Path
from types import TracebackType

from placement_native._host import MEMINFO_ENV, SYSFS_ENV
from placement_native._raw import LIBRARY_ENV
from placement_native.errors import FakeTopologyError

from ._build import library
from ._machines import TOPOLOGIES, topology
from ._topology import Topology, load_topology

__all__ = ["TOPOLOGY_ENV", "FakeNvml", "fake_nvml", "resolve"]

TOPOLOGY_ENV = "FAKE_NVML_TOPOLOGY"  # read by fake_nvml.c at nvmlInit (and watched after)
#: The fake machine's RAM unless given: a DGX H100's 2 TiB.
HOST_MEMORY_BYTES = 2 << 40


def resolve(machine: str | os.PathLike[str] | Topology) -> tuple[str, Topology]:
    """A machine argument as ``(label, Topology)``: a name, a JSON file or a ``Topology``.

    Raises:
        FakeTopologyError: an unknown name, or a file that is missing or malformed.
    """
    if isinstance(machine, Topology):
        return "custom", machine
    if isinstance(machine, str) and machine in TOPOLOGIES:
        return machine, topology(machine)
    if isinstance(machine, os.PathLike) or (
        isinstance(machine, str) and (machine.endswith(".json") or os.sep in machine)
    ):
        return str(machine), load_topology(machine)
    return str(machine), topology(machine)  # raises, listing the known names


class FakeNvml:
    """A fake NVML machine: its library, its topology file, its sysfs tree, and ``env``.

    Entering it (``with``) sets ``env`` in ``os.environ`` so ``placement_native.snapshot()``
    (both backends) and everything above it see the machine; leaving restores every
    variable and removes the files it wrote. Without ``with``, pass ``env`` to other
    processes (a Ray node's ``env_vars``) and call ``close()`` when done.

    Args:
        machine: A topology name (``topology_names()``), a JSON file (``str`` ending in
            ``.json`` or a path) or a ``Topology``.
        directory: Where to write the topology file and sysfs tree; default a fresh
            temporary directory, removed by ``close()``.
        sysfs: An existing sysfs tree to use (the NUMA node directories are added to it);
            default one under ``directory``.
        host_memory_bytes: The machine's RAM, served as ``MemTotal`` of a fake
            ``/proc/meminfo`` (``PLACEMENT_MEMINFO``); None leaves this host's own.

    Attributes:
        name: The topology's name, file path, or ``"custom"``.
        topology: The machine served.
        library: The fake ``libnvidia-ml.so.1`` (``PLACEMENT_NVML_LIBRARY``).
        topology_file: The directive file the library reads (``FAKE_NVML_TOPOLOGY``).
        sysfs: The fake sysfs root (``PLACEMENT_SYSFS_ROOT``).
        meminfo: The fake ``/proc/meminfo`` (``PLACEMENT_MEMINFO``), or None.
        env: The variables above.

    Raises:
        FakeTopologyError: an unknown or malformed topology.
        FakeNVMLBuildError: the library could not be compiled (no C compiler, ...).
    """

    def __init__(
        self,
        machine: str | os.PathLike[str] | Topology,
        *,
        directory: str | os.PathLike[str] | None = None,
        sysfs: str | os.PathLike[str] | None = None,
        host_memory_bytes: int | None = HOST_MEMORY_BYTES,
    ) -> None:
        self.name, self.topology = resolve(machine)
        self.topology.validate()
        self.library = library(old_driver=self.topology.old_driver)
        self._owned: Path | None = None
        if directory is None:
            self._owned = Path(tempfile.mkdtemp(prefix="placement-fake-nvml-"))
            root = self._owned
        else:
            root = Path(directory)
            root.mkdir(parents=True, exist_ok=True)
        try:
            handle, path = tempfile.mkstemp(prefix="topology-", suffix=".txt", dir=root)
            os.close(handle)
            # A new file each time: the fake re-reads a topology when its path changes.
            self.topology_file = self.topology.write(Path(path))
            self.sysfs = Path(sysfs) if sysfs is not None else root / "sys"
            for k in range(self.topology.host_numa_nodes()):
                (self.sysfs / "devices" / "system" / "node" / f"node{k}").mkdir(
                    parents=True, exist_ok=True
                )
            self.meminfo: Path | None = None
            if host_memory_bytes is not None:
                handle, path = tempfile.mkstemp(prefix="meminfo-", dir=root)
                os.close(handle)
                self.meminfo = Path(path)
                self.meminfo.write_text(
                    f"MemTotal:       {host_memory_bytes // 1024} kB\n", encoding="ascii"
                )
        except BaseException:
            self.close()
            raise
        self.env = {
            LIBRARY_ENV: str(self.library),
            TOPOLOGY_ENV: str(self.topology_file),
            SYSFS_ENV: str(self.sysfs),
        }
        if self.meminfo is not None:
            self.env[MEMINFO_ENV] = str(self.meminfo)
        self._saved: list[dict[str, str | None]] = []

    def change(self, machine: str | os.PathLike[str] | Topology) -> None:
        """Serve another machine from now on, in place: the next ``nvmlInit`` (the next
        snapshot) reads it. A tray whose fabric health changes between two snapshots is
        ``fake.change(degraded_tray(...))`` between them.

        Raises:
            FakeTopologyError: an unknown or malformed topology.
        """
        name, topology = resolve(machine)
        topology.validate()
        if topology.old_driver != self.topology.old_driver:
            raise FakeTopologyError(
                "change: the new machine needs the other fake library (old_driver "
                f"{topology.old_driver}); start a new fake_nvml for it"
            )
        fresh = self.topology_file.with_name(self.topology_file.name + ".new")
        topology.write(fresh)
        # A new inode: the fake re-reads a file whose inode, size or mtime changed.
        os.replace(fresh, self.topology_file)
        self.name, self.topology = name, topology

    def __enter__(self) -> FakeNvml:
        self._saved.append({key: os.environ.get(key) for key in self.env})
        os.environ.update(self.env)
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        for key, old in self._saved.pop().items():
            if old is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = old
        if not self._saved:
            self.close()

    def nvml_calls(self) -> tuple[int, int]:
        """How often this process called the fake library's ``nvmlInit`` (any flavour)
        and ``nvmlShutdown`` so far, failed calls included (one library per process:
        every topology served by it counts).

        Returns:
            ``(inits, shutdowns)``.
        """
        lib = ctypes.CDLL(str(self.library))
        inits = ctypes.c_int.in_dll(lib, "fake_nvml_init_count").value
        return inits, ctypes.c_int.in_dll(lib, "fake_nvml_shutdown_count").value

    def close(self) -> None:
        """Remove the files this object wrote into its own temporary directory."""
        if self._owned is not None:
            shutil.rmtree(self._owned, ignore_errors=True)
            self._owned = None

    def __repr__(self) -> str:
        return f"FakeNvml({self.name!r}, gpus={len(self.topology.gpus)}, sysfs={str(self.sysfs)!r})"


def fake_nvml(
    machine: str | os.PathLike[str] | Topology,
    *,
    directory: str | os.PathLike[str] | None = None,
    sysfs: str | os.PathLike[str] | None = None,
    host_memory_bytes: int | None = HOST_MEMORY_BYTES,
) -> FakeNvml:
    """Serve a fake machine through NVML for the duration of a ``with`` block.

    >>> from placement_native.testing import fake_nvml
    >>> import placement_native
    >>> with fake_nvml("dgx-h100"):
    ...     len(placement_native.snapshot().accelerators)
    8

    Args:
        machine: A topology name (``dgx-h100``, ``pcie-4x-nvlink-bridges``,
            ``pcie-2-switches``, ``mig``, ``no-permission``, ``old-driver``, ``no-driver``,
            ``no-gpus``), a JSON topology file, or a ``Topology``.
        directory: Where to write its files (default: a temporary directory).
        sysfs: An existing sysfs tree to use instead of a fresh one.
        host_memory_bytes: The machine's RAM (default 2 TiB); None: this host's own.

    Returns:
        A ``FakeNvml``; use it as a context manager.

    Raises:
        FakeTopologyError: an unknown or malformed topology.
        FakeNVMLBuildError: the library could not be compiled (no C compiler, ...).
    """
    return FakeNvml(machine, directory=directory, sysfs=sysfs, host_memory_bytes=host_memory_bytes)
