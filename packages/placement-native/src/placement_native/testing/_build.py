"""Compile the fake ``libnvidia-ml.so.1`` (package data ``fake_nvml.c``) on first use.

The library lands in a per-user cache directory, keyed by a hash of the source and the
variant, so a new package version builds afresh and every later run (and every process
of a test session, Ray workers included) reuses it; a compiler is needed only to build.
"""

from __future__ import annotations

import hashlib
import os
import shlex
import shutil
import subprocess
import tempfile
import threading
from importlib import resources
from pathlib import Path

from placement_native.errors import FakeNVMLBuildError

__all__ = ["CACHE_ENV", "cache_dir", "library"]

CACHE_ENV = "PLACEMENT_FAKE_NVML_CACHE"
COMPILERS = ("cc", "gcc", "clang")
FLAGS = ["-shared", "-fPIC", "-O1", "-fvisibility=hidden"]

_built: dict[tuple[bool, Path], Path] = {}
_lock = threading.Lock()


def cache_dir() -> Path:
    """Where built libraries are kept: ``$PLACEMENT_FAKE_NVML_CACHE``, else
    ``$XDG_CACHE_HOME/placement-native/fake-nvml`` (``~/.cache`` without it)."""
    explicit = os.environ.get(CACHE_ENV)
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "placement-native" / "fake-nvml"


def _compiler() -> list[str]:
    chosen = os.environ.get("CC", "").strip()
    if chosen:
        command = shlex.split(chosen)
        if shutil.which(command[0]) is None:
            raise FakeNVMLBuildError(
                f"CC={chosen!r}: {command[0]!r} is not an executable on PATH; the fake NVML "
                "library needs a C compiler (set CC to one, or unset it to use cc/gcc/clang)",
                compiler=chosen,
            )
        return command
    for name in COMPILERS:
        found = shutil.which(name)
        if found:
            return [found]
    raise FakeNVMLBuildError(
        "no C compiler found: the fake NVML library is compiled on first use, but CC is "
        f"unset and none of {', '.join(COMPILERS)} is on PATH; install one (for example "
        "`apt-get install gcc`) or set CC",
        compiler="",
    )


def library(*, old_driver: bool = False) -> Path:
    """The fake ``libnvidia-ml.so.1``, compiled on first use.

    Args:
        old_driver: The variant without the symbols newer drivers add.

    Raises:
        FakeNVMLBuildError: no C compiler, the cache directory is not writable, or the
            compile failed (the compiler's own message is included).
    """
    with _lock:
        key = (old_driver, cache_dir())
        known = _built.get(key)
        if known is not None and known.exists():
            return known
        source = resources.files(__package__).joinpath("fake_nvml.c").read_bytes()
        variant = ["-DFAKE_OLD_DRIVER"] if old_driver else []
        digest = hashlib.sha256(b"\0".join([source, " ".join(FLAGS + variant).encode()]))
        name = f"{digest.hexdigest()[:16]}-{'old' if old_driver else 'current'}"
        target = cache_dir() / name / "libnvidia-ml.so.1"
        if not target.exists():
            _compile(_compiler(), source, variant, target)
        _built[key] = target
        return target


def _compile(compiler: list[str], source: bytes, variant: list[str], target: Path) -> None:
    """Build into a private temporary name, then rename: concurrent builders never see
    a half-written library."""
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        work = Path(tempfile.mkdtemp(prefix=".build-", dir=target.parent))
    except OSError as exc:
        raise FakeNVMLBuildError(
            f"cannot write the fake NVML library under {target.parent}: {exc}; "
            f"set {CACHE_ENV} to a writable directory",
            compiler=" ".join(compiler),
        ) from None
    try:
        (work / "fake_nvml.c").write_bytes(source)
        built = work / target.name
        command = [*compiler, *FLAGS, *variant, "-o", str(built), str(work / "fake_nvml.c")]
        try:
            done = subprocess.run(command, capture_output=True, text=True, check=False)
        except OSError as exc:
            raise FakeNVMLBuildError(
                f"running the C compiler {compiler[0]!r} failed: {exc}",
                compiler=" ".join(compiler),
            ) from None
        if done.returncode != 0:
            raise FakeNVMLBuildError(
                f"compiling the fake NVML library with {' '.join(compiler)!r} failed "
                f"(exit {done.returncode}):\n{done.stderr.strip()}",
                compiler=" ".join(compiler),
            )
        os.replace(built, target)
    finally:
        shutil.rmtree(work, ignore_errors=True)
