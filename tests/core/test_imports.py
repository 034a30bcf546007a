"""Every placement_core module imports on its own, and the package has no import cycle."""

from __future__ import annotations

import ast
import pkgutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

import placement_core

PACKAGE = "placement_core"
ROOT = Path(placement_core.__file__).parent


def _modules() -> dict[str, Path]:
    found = {PACKAGE: ROOT / "__init__.py"}
    for info in pkgutil.walk_packages([str(ROOT)], prefix=f"{PACKAGE}."):
        base = ROOT.joinpath(*info.name.split(".")[1:])
        found[info.name] = base / "__init__.py" if info.ispkg else base.with_suffix(".py")
    return found


MODULES = _modules()


@pytest.mark.parametrize("module", sorted(MODULES))
def test_module_imports_alone_in_a_fresh_interpreter(module: str) -> None:
    result = subprocess.run(
        [sys.executable, "-c", f"import {module}"], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(module: str, path: Path, *, type_checking: bool = False) -> set[str]:
    """The package modules ``module`` imports when it loads; TYPE_CHECKING blocks only if
    asked. An import inside a function runs after every module has loaded, so it is no
    import-time cycle (``Plan._repr_html_`` imports the renderers that build on it)."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    targets: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            return
        if isinstance(node, ast.If) and _is_type_checking(node.test) and not type_checking:
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            targets.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                source = ".".join([*base, *([node.module] if node.module else [])])
            else:
                source = node.module or ""
            targets.add(source)
            targets.update(f"{source}.{alias.name}" for alias in node.names)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(path.read_text(encoding="utf-8")))
    return {target for target in targets if target in MODULES and target != module}


def _find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def walk(module: str) -> list[str] | None:
        state[module] = 1
        path.append(module)
        for target in sorted(graph[module]):
            if state.get(target) == 1:
                return [*path[path.index(target) :], target]
            if target not in state and (cycle := walk(target)):
                return cycle
        path.pop()
        state[module] = 2
        return None

    for module in sorted(graph):
        if module not in state and (cycle := walk(module)):
            return cycle
    return None


def test_the_package_has_no_import_circle_counting_imports_inside_functions(
    import_circle: Callable[[str], str | None],
) -> None:
    # Plan._repr_html_ imports the renderers on demand; they import _plan for annotations
    # only, so even that import closes no circle.
    assert import_circle(PACKAGE) is None


def test_the_circle_scanner_counts_imports_inside_functions_not_type_checking(
    import_circle: Callable[[str], str | None], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    package = tmp_path / "circled"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from circled import c\n"
        "def f():\n    from circled import b\n"
    )
    (package / "b.py").write_text("from . import a\n")
    (package / "c.py").write_text("from .a import f\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert import_circle("circled") == "circled.a -> circled.b -> circled.a"
    (package / "b.py").write_text("")
    assert import_circle("circled") is None  # a -> c only under TYPE_CHECKING


def test_type_checking_imports_make_no_cycle_either() -> None:
    # Validation must not depend on the output layer, not even for annotations.
    graph = {m: _imports(m, path, type_checking=True) for m, path in MODULES.items()}
    assert _find_cycle(graph) is None, " -> ".join(_find_cycle(graph) or [])


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert _find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]


def test_the_constants_module_is_a_leaf() -> None:
    for leaf in ("_vocab", "_scalars", "_limits"):
        assert _imports(f"{PACKAGE}.{leaf}", MODULES[f"{PACKAGE}.{leaf}"]) == set()


def test_the_message_helpers_import_only_leaves() -> None:
    leaves = {f"{PACKAGE}._limits", f"{PACKAGE}._shown"}
    for module in ("_shown", "_tokens"):
        assert _imports(f"{PACKAGE}.{module}", MODULES[f"{PACKAGE}.{module}"]) <= leaves


def test_importing_the_package_imports_no_renderer() -> None:
    # No import for a side effect: a plan draws itself in a notebook on demand.
    code = (
        "import sys, placement_core; "
        "loaded = sorted(m for m in sys.modules if m.startswith('placement_core.render')); "
        "sys.exit(f'imported: {loaded}' if loaded else 0)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
