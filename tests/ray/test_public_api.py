"""The curated top level: every export resolves, every error is exported, importing is cheap."""

from __future__ import annotations

import ast
import inspect
import pkgutil
import subprocess
import sys
import types
from pathlib import Path

import pytest

import placement_ray
from placement_core import PlacementError
from placement_ray import errors


def test_every_exported_name_resolves() -> None:
    missing = [name for name in placement_ray.__all__ if not hasattr(placement_ray, name)]
    assert missing == []


def test_every_error_class_is_exported_at_the_top() -> None:
    classes = {
        name
        for name, cls in inspect.getmembers(errors, inspect.isclass)
        if issubclass(cls, errors.PlacementRayError)
    }
    assert classes <= set(placement_ray.__all__)


def test_the_launch_layer_is_exported() -> None:
    assert {
        "Worker",
        "launch",
        "Launch",
        "WorkerGroup",
        "create_train_group",
        "TrainGroup",
        "create_rollout_engines",
        "RolloutEngines",
        "RolloutEngine",
        "hand_over_master_port",
        "hand_over_ports",
    } <= set(placement_ray.__all__)


@pytest.mark.parametrize("name", placement_ray.__all__)
def test_every_export_imports_by_name(name: str) -> None:
    exec(f"from placement_ray import {name}", {})


@pytest.mark.parametrize("name", [n for n in placement_ray.__all__ if n != "__version__"])
def test_no_export_is_a_module(name: str) -> None:
    assert not isinstance(getattr(placement_ray, name), types.ModuleType)


def test_no_submodule_is_named_like_an_export() -> None:
    submodules = {m.name for m in pkgutil.iter_modules(placement_ray.__path__)}
    assert submodules & set(placement_ray.__all__) == set()


def test_every_submodule_but_errors_demo_testing_and_compat_is_private() -> None:
    public = {m.name for m in pkgutil.iter_modules(placement_ray.__path__)}
    assert {n for n in public if not n.startswith("_")} == {"errors", "demo", "testing", "compat"}


def test_the_slime_drop_in_is_slimes_name_with_a_docstring() -> None:
    from placement_ray.compat import slime

    assert slime.__all__ == [
        "DEVICE_ACCELERATORS",
        "SLIME_ARGS",
        "create_placement_groups",
        "slime_dict",
    ]
    assert inspect.getdoc(slime.create_placement_groups)


@pytest.mark.parametrize(
    "name",
    [
        n
        for n in placement_ray.__all__
        if callable(getattr(placement_ray, n)) or inspect.isclass(getattr(placement_ray, n))
    ],
)
def test_every_callable_export_has_a_docstring(name: str) -> None:
    assert inspect.getdoc(getattr(placement_ray, name))


def test_every_error_is_a_placement_error() -> None:
    assert issubclass(errors.PlacementRayError, PlacementError)


def test_import_connects_to_nothing() -> None:
    code = "import placement_ray, ray\nassert not ray.is_initialized()\n"
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize(
    "module", ["_allocate", "_failure", "_launch", "_startup", "_worker", "_worker_group"]
)
def test_generic_modules_do_not_import_slime_code(module: str) -> None:
    source = Path(placement_ray.__file__).with_name(f"{module}.py").read_text()
    imported = [
        node.module or ""
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.ImportFrom)
    ]
    assert [m for m in imported if "slime" in m] == []


def test_placement_ray_imports_only_public_names_of_core() -> None:
    root = Path(placement_ray.__file__).parent
    private = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.ImportFrom)
                and (node.module or "").startswith("placement_core.")
                and node.module != "placement_core.render"
            ):
                private.append(f"{path.relative_to(root)}: from {node.module} import ...")
            if isinstance(node, ast.Import):
                private += [
                    f"{path.relative_to(root)}: import {alias.name}"
                    for alias in node.names
                    if alias.name.startswith("placement_core.")
                ]
    assert private == []
