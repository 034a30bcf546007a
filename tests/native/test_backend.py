"""Backend selection at import, and the compiled module's version check."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

import placement_native
from placement_native import _backend
from placement_native._version import __version__
from placement_native.errors import BackendMismatchError


def _python(code: str, **env: str) -> str:
    environ = {k: v for k, v in os.environ.items() if k != "PLACEMENT_NATIVE_PUREPYTHON"}
    environ.update(env)
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=environ, check=True
    )
    return result.stdout.strip()


def test_backend_is_named() -> None:
    assert placement_native.BACKEND in ("cffi", "purepython")
    assert (placement_native.BACKEND == "cffi") == (_backend.native_module is not None)


def test_env_var_forces_the_fallback() -> None:
    code = "import placement_native as p; print(p.BACKEND, p.snapshot().source)"
    env = {"PLACEMENT_NATIVE_PUREPYTHON": "1", "PLACEMENT_NVML_LIBRARY": "/nonexistent.so"}
    assert _python(code, **env) == "purepython nvml-pynvml"


def test_a_missing_extension_falls_back_quietly() -> None:
    code = (
        "import sys; sys.modules['placement_native._native'] = None\n"
        "import placement_native as p; print(p.BACKEND)"
    )
    assert _python(code) == "purepython"


@pytest.mark.skipif(_backend.native_module is None, reason="the compiled backend is not active")
def test_compiled_module_carries_the_package_version() -> None:
    module = _backend.native_module
    assert module is not None
    built_for = module.ffi.string(module.lib.placement_native_version()).decode()
    assert built_for == __version__ == placement_native.__version__


def test_a_stale_extension_is_refused() -> None:
    with pytest.raises(BackendMismatchError, match=r"built for version '0\.0\.1'"):
        _backend._verify_version("0.0.1")


def test_import_loads_no_snapshot_or_port_code() -> None:
    code = (
        "import sys, placement_native\n"
        "loaded = [m for m in sys.modules if m.startswith('placement_native.')]\n"
        "allowed = ('placement_native._backend', 'placement_native._version',"
        " 'placement_native.errors', 'placement_native._native')\n"
        "print(sorted(m for m in loaded if not m.startswith(allowed)))\n"
        "print('logging' in sys.modules, 'dataclasses' in sys.modules)"
    )
    assert _python(code).splitlines() == ["[]", "False False"]


def test_public_names_resolve_lazily() -> None:
    for name in placement_native.__all__:
        assert getattr(placement_native, name) is not None
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        placement_native.nope  # noqa: B018
