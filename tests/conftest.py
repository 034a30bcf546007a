"""Settings shared by every test folder; imports no placement package (core's tests run alone)."""

from __future__ import annotations

import ast
import importlib.util
import os
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import pytest

try:
    from hypothesis import settings
except ImportError:  # a session without hypothesis (the viewer's) has no property tests
    pass
else:
    # No deadline: these machines are shared, and a slow example is not a failure (speed is
    # the benchmarks' business). CI replays the same examples every run, so a red CI always
    # names a real regression; local runs keep exploring new examples.
    settings.register_profile("dev", deadline=None)
    settings.register_profile(
        "ci", parent=settings.get_profile("dev"), derandomize=True, print_blob=True
    )
    settings.load_profile("ci" if os.environ.get("CI", "").lower() == "true" else "dev")


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: Any) -> None:
    """When skips are not listed one by one (``-r`` without ``s``, as tests_purepython
    runs), say once per reason how many tests skipped and why."""
    if "s" in config.option.reportchars.replace("A", "s").replace("a", "s"):
        return
    reasons: Counter[str] = Counter()
    for report in terminalreporter.stats.get("skipped", []):
        longrepr = report.longrepr
        reason = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
        reasons[reason.removeprefix("Skipped: ")] += 1
    for reason, count in reasons.most_common():
        terminalreporter.write_line(f"{count} skipped: {reason}")


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def package_modules(package: str) -> dict[str, Path]:
    """Every module of an installed package: dotted name -> source file (or extension)."""
    spec = importlib.util.find_spec(package)
    assert spec is not None, f"{package} is not installed"
    assert spec.origin is not None, f"{package} is a namespace package"
    root = Path(spec.origin).parent
    found = {package: root / "__init__.py"}
    for path in sorted([*root.rglob("*.py"), *root.rglob("*.so"), *root.rglob("*.pyd")]):
        relative = path.relative_to(root)
        parts = (*relative.parts[:-1], relative.name.split(".")[0])
        if parts[-1] == "__init__":
            parts = parts[:-1]
        if parts:
            found[".".join((package, *parts))] = path
    return found


def module_imports(module: str, path: Path, modules: Mapping[str, Path]) -> set[str]:
    """The package modules ``module`` imports anywhere: at module level and inside
    functions alike; only ``if TYPE_CHECKING:`` blocks are left out (they never run)."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    targets: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node.test):
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
            names = [f"{source}.{alias.name}" for alias in node.names]
            targets.update(names)
            if not all(name in modules for name in names):  # a name of the module itself
                targets.add(source)
        for child in ast.iter_child_nodes(node):
            visit(child)

    if path.suffix != ".py":
        return set()
    visit(ast.parse(path.read_text(encoding="utf-8")))
    return {t for t in targets if t in modules and t != module}


def find_cycle(graph: Mapping[str, Iterable[str]]) -> list[str] | None:
    """One import circle of ``graph`` (``a -> b -> a``), or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def walk(module: str) -> list[str] | None:
        state[module] = 1
        path.append(module)
        for target in sorted(graph.get(module, ())):
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


ImportCircle = Callable[[str], "str | None"]


@pytest.fixture(scope="session")
def import_circle() -> ImportCircle:
    """``import_circle(package)``: one circle of the package's imports, written
    ``a -> b -> a``, or None; imports inside functions count, ``TYPE_CHECKING`` ones not."""

    def circle(package: str) -> str | None:
        modules = package_modules(package)
        graph = {m: module_imports(m, path, modules) for m, path in modules.items()}
        found = find_cycle(graph)
        return None if found is None else " -> ".join(found)

    return circle


@pytest.fixture(scope="session")
def package_files() -> Callable[[str], dict[str, Path]]:
    """``package_files(package)``: every module of an installed package, dotted name ->
    source file (``package_modules``), for tests that scan the sources."""
    return package_modules
