"""The simulated nodes' worker start: Ray's setup_worker.py without importing Ray first.

The script is run as the raylet runs it, on a stand-in worker that prints what it was given.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import ray
from ray._private import ray_constants

from placement_ray import _start_worker
from placement_ray.testing import START_WORKER, SimulatedCluster

STAND_IN = """
import json, os, sys
print(json.dumps({"argv": sys.argv[1:], "env": dict(os.environ), "python": sys.executable}))
"""


def start(
    tmp_path: Path, context: dict[str, object], *args: str, env: dict[str, str] | None = None
) -> dict[str, object]:
    """Run the start script as the raylet does; what the stand-in worker printed."""
    worker = tmp_path / "worker.py"
    worker.write_text(STAND_IN, encoding="utf-8")
    command = [
        sys.executable,
        START_WORKER,
        str(worker),
        *args,
        f"--serialized-runtime-env-context={json.dumps(context)}",
        "--language=PYTHON",
    ]
    done = subprocess.run(
        command, env={**os.environ, **(env or {})}, capture_output=True, text=True, check=True
    )
    result: dict[str, object] = json.loads(done.stdout)
    return result


def test_the_worker_gets_its_own_arguments_without_the_start_scripts(tmp_path: Path) -> None:
    seen = start(tmp_path, {}, "--node-ip-address=127.0.0.1", "--name", "it's quoted")
    assert seen["argv"] == ["--node-ip-address=127.0.0.1", "--name", "it's quoted"]
    assert seen["python"] == sys.executable


def test_env_vars_expand_as_rays_do(tmp_path: Path) -> None:
    context = {
        "env_vars": {
            "A": "${HOME_FOR_TEST}/a",
            "B": "$HOME_FOR_TEST:${UNSET_FOR_TEST}:$UNSET_FOR_TEST",
            "C": "${A}-c",
        }
    }
    seen = start(tmp_path, context, env={"HOME_FOR_TEST": "/h"})
    env = seen["env"]
    assert isinstance(env, dict)
    assert (env["A"], env["B"], env["C"]) == ("/h/a", "/h::$UNSET_FOR_TEST", "/h/a-c")


def test_the_contexts_interpreter_entrypoint_and_prefix_are_used(tmp_path: Path) -> None:
    other = tmp_path / "other.py"
    other.write_text(STAND_IN.replace("sys.argv[1:]", '["other", *sys.argv[1:]]'), "utf-8")
    interpreter = tmp_path / "python-wrapper"  # an interpreter of the node group's own
    interpreter.write_text(f'#!/bin/sh\nexport VIA_WRAPPER=1\nexec {sys.executable} "$@"\n')
    interpreter.chmod(0o755)
    context = {
        "py_executable": str(interpreter),
        "override_worker_entrypoint": str(other),
        "command_prefix": ["export", "PREFIXED=yes", "&&"],
    }
    seen = start(tmp_path, context, "--x=1")
    env = seen["env"]
    assert isinstance(env, dict)
    assert seen["argv"] == ["other", "--x=1"]
    assert (env["PREFIXED"], env["VIA_WRAPPER"]) == ("yes", "1")


@pytest.mark.parametrize(
    ("language", "context", "reason"),
    [
        ("JAVA", {}, "language 'JAVA'"),
        ("PYTHON", {"env_vars": {}, "container": {}}, "runtime env context fields ['container']"),
        ("PYTHON", {"java_jars": ["a.jar"]}, "Java jars"),
        ("PYTHON", [], "a runtime env context that is not an object: []"),
    ],
)
def test_what_the_script_does_not_know_goes_to_rays_script(
    language: str, context: object, reason: str
) -> None:
    assert _start_worker.delegate_reason(language, context) == reason


def test_a_context_it_knows_is_started_here() -> None:
    context = dict.fromkeys(_start_worker.CONTEXT_FIELDS)
    assert _start_worker.delegate_reason("PYTHON", context) is None


def test_rays_script_is_found_without_importing_ray() -> None:
    expected = Path(ray.__file__).parent / "_private" / "workers" / "setup_worker.py"
    assert _start_worker.ray_setup_worker() == str(expected)
    assert expected.is_file()


def test_the_script_imports_nothing_but_the_standard_library() -> None:
    code = (
        "import runpy, sys; runpy.run_path(sys.argv[1], run_name='not_main'); "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('ray', 'placement_ray')))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, START_WORKER], capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == "[]"


def test_every_simulated_nodes_raylet_starts_workers_through_it(
    simulated: SimulatedCluster,
) -> None:
    commands = [
        Path(f"/proc/{proc.process.pid}/cmdline").read_bytes().decode().split("\0")
        for node in simulated.ray_cluster.list_all_nodes()
        for proc in node.all_processes[ray_constants.PROCESS_TYPE_RAYLET]
    ]
    assert len(commands) == 3
    for command in commands:
        worker = next(arg for arg in command if arg.startswith("--python_worker_command="))
        assert f" {START_WORKER} " in worker
