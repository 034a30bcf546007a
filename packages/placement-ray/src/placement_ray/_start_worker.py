"""Start a simulated node's Python worker as Ray's ``setup_worker.py`` does, without Ray.

Ray's raylet starts every worker as ``python setup_worker.py default_worker.py ...``.
That script imports Ray (about 0.7 s of CPU) only to read the worker's runtime env context,
set its environment variables and exec the real worker, which imports Ray again. The
testing kit's nodes run this file instead (``setup_worker_path``): for a Python worker it
does the same with the standard library alone. Anything else (another language, a context
field it does not know, Java jars, Windows) goes to Ray's own script, unchanged.

The raylet runs this file by its path: it must import nothing but the standard library.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import shlex
import sys
from pathlib import Path
from typing import Any

CONTEXT_FIELDS = frozenset(
    {"command_prefix", "env_vars", "py_executable", "override_worker_entrypoint", "java_jars"}
)
"""The fields of Ray's ``RuntimeEnvContext`` this script knows how to apply."""

_UNSET_VARIABLE = re.compile(r"\$\{[A-Z0-9_]+\}")
_MACOS_LIBRARY_PATH = "DYLD_LIBRARY_PATH"


def parse(argv: list[str]) -> tuple[str | None, dict[str, Any], list[str]]:
    """The worker's language, its runtime env context and the worker's own command line,
    read from the raylet's arguments as Ray's script reads them."""
    parser = argparse.ArgumentParser(description="Start a Ray worker (placement-ray).")
    parser.add_argument("--serialized-runtime-env-context", type=str)
    parser.add_argument("--language", type=str)
    args, worker_args = parser.parse_known_args(argv)
    context = json.loads(args.serialized_runtime_env_context or "{}")
    return args.language, context, worker_args


def delegate_reason(language: str | None, context: object) -> str | None:
    """Why Ray's own script must start this worker; None when this one does it alike."""
    if sys.platform == "win32":
        return "Windows"
    if language != "PYTHON":
        return f"language {language!r}"
    if not isinstance(context, dict):
        return f"a runtime env context that is not an object: {context!r}"
    unknown = sorted(set(context) - CONTEXT_FIELDS)
    if unknown:
        return f"runtime env context fields {unknown}"
    if context.get("java_jars"):
        return "Java jars"
    return None


def apply_env_vars(env_vars: dict[str, str] | None) -> None:
    """Set the runtime env's variables in order, as Ray does: ``$X`` and ``${X}`` expand
    from the environment, and a ``${X}`` left unexpanded (X unset) becomes empty."""
    for name, value in (env_vars or {}).items():
        os.environ[name] = _UNSET_VARIABLE.sub("", os.path.expandvars(value))


def worker_command(context: dict[str, Any], worker_args: list[str]) -> str:
    """The shell command that becomes the worker: the context's prefix, then ``exec`` of
    its interpreter on the worker's arguments (the first replaced by the context's
    entrypoint, where it names one)."""
    args = list(worker_args)
    if context.get("override_worker_entrypoint") and args:
        args[0] = context["override_worker_entrypoint"]
    executable = context.get("py_executable") or sys.executable
    parts = [*(context.get("command_prefix") or []), "exec", executable]
    parts += [shlex.quote(arg) for arg in args]
    if _MACOS_LIBRARY_PATH in os.environ:
        parts.insert(0, f"{_MACOS_LIBRARY_PATH}={os.environ[_MACOS_LIBRARY_PATH]}")
    return " ".join(parts)


def ray_setup_worker() -> str:
    """The path of Ray's own ``setup_worker.py`` (found without importing Ray)."""
    spec = importlib.util.find_spec("ray")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("placement-ray's worker start: Ray is not installed here")
    package = Path(next(iter(spec.submodule_search_locations)))
    return str(package / "_private" / "workers" / "setup_worker.py")


def main(argv: list[str]) -> None:
    language, context, worker_args = parse(argv)
    if delegate_reason(language, context) is not None:
        os.execv(sys.executable, [sys.executable, ray_setup_worker(), *argv])
    apply_env_vars(context.get("env_vars"))
    command = worker_command(context, worker_args)
    os.execvp("bash", ["bash", "-c", command])


if __name__ == "__main__":
    main(sys.argv[1:])
