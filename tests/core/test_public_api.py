"""The public names of placement_core: importable, unambiguous and documented."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re
import types
from pathlib import Path

import pytest

import placement_core

PUBLIC_MODULES = ("placement_core", "placement_core.render")


def _exports() -> list[tuple[str, str]]:
    return [
        (module, name)
        for module in PUBLIC_MODULES
        for name in importlib.import_module(module).__all__
        if not (name.startswith("__") and name.endswith("__"))
    ]


def _submodules(module: str) -> set[str]:
    package = importlib.import_module(module)
    return {info.name for info in pkgutil.iter_modules(package.__path__)}


def _documented_constant(name: str) -> bool:
    """A ``#:`` comment right above the constant's assignment in some package module."""
    pattern = re.compile(rf"^#:.*\n(?:#:.*\n)*{re.escape(name)}\b[^\n]*=", re.MULTILINE)
    root = Path(placement_core.__file__).parent
    return any(pattern.search(path.read_text(encoding="utf-8")) for path in root.rglob("*.py"))


@pytest.mark.parametrize(("module", "name"), _exports())
def test_every_export_imports(module: str, name: str) -> None:
    namespace: dict[str, object] = {}
    exec(f"from {module} import {name}", namespace)
    assert namespace[name] is getattr(importlib.import_module(module), name)


@pytest.mark.parametrize(("module", "name"), _exports())
def test_no_export_is_a_module(module: str, name: str) -> None:
    assert not isinstance(getattr(importlib.import_module(module), name), types.ModuleType)


@pytest.mark.parametrize("module", PUBLIC_MODULES)
def test_no_export_shares_a_name_with_a_submodule(module: str) -> None:
    exported = set(importlib.import_module(module).__all__)
    assert exported & _submodules(module) == set()


@pytest.mark.parametrize("module", PUBLIC_MODULES)
def test_every_public_submodule_is_the_attribute_of_its_name(module: str) -> None:
    package = importlib.import_module(module)
    for name in _submodules(module) - {"__main__"}:
        submodule = importlib.import_module(f"{module}.{name}")
        assert getattr(package, name) is submodule, f"{module}.{name} is hidden"


@pytest.mark.parametrize(("module", "name"), _exports())
def test_every_export_is_documented(module: str, name: str) -> None:
    value = getattr(importlib.import_module(module), name)
    if inspect.isclass(value) or inspect.isroutine(value):
        assert value.__dict__.get("__doc__") if inspect.isclass(value) else value.__doc__, (
            f"{module}.{name} has no docstring"
        )
    else:
        assert _documented_constant(name), f"{module}.{name} has no '#:' comment"
