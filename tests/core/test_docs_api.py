"""The API reference (docs/reference/api/*.md) covers every public name of each package.

The names are read from each package's ``__all__`` in its source (statically: this suite
installs placement-core only), and each must appear in a mkdocstrings ``:::`` directive of
its page, either by itself or, for an error class, through the package's errors module.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PACKAGES = {
    "placement_core": REPO / "packages" / "placement-core" / "src" / "placement_core",
    "placement_native": REPO / "packages" / "placement-native" / "src" / "placement_native",
    "placement_ray": REPO / "packages" / "placement-ray" / "src" / "placement_ray",
}
PAGES = {
    "placement_core": REPO / "docs" / "reference" / "api" / "core.md",
    "placement_native": REPO / "docs" / "reference" / "api" / "native.md",
    "placement_ray": REPO / "docs" / "reference" / "api" / "ray.md",
}
# Documented in the page's prose rather than by a directive (a value griffe cannot read).
IN_PROSE = {"placement_native": {"BACKEND"}}


def public_names(package: str) -> list[str]:
    tree = ast.parse((PACKAGES[package] / "__init__.py").read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets
        ):
            return [ast.literal_eval(e) for e in node.value.elts]  # type: ignore[attr-defined]
    raise AssertionError(f"{package} has no __all__")


def documented(package: str) -> set[str]:
    """The last component of every ``::: target`` of the package's page."""
    text = PAGES[package].read_text(encoding="utf-8")
    return {target.rsplit(".", 1)[-1] for target in re.findall(r"^::: (\S+)", text, re.M)}


CASES = [
    (package, name)
    for package in PACKAGES
    for name in public_names(package)
    if name != "__version__" and name not in IN_PROSE.get(package, set())
]


@pytest.mark.parametrize(("package", "name"), CASES, ids=[f"{p}.{n}" for p, n in CASES])
def test_every_public_name_is_in_the_api_reference(package: str, name: str) -> None:
    targets = documented(package)
    through_errors = name.endswith("Error") and "errors" in targets
    assert name in targets or through_errors, (
        f"{package}.{name} is public but {PAGES[package].relative_to(REPO)} has no "
        f"'::: {package}.{name}' directive"
    )


@pytest.mark.parametrize("package", list(IN_PROSE))
def test_names_in_prose_are_named(package: str) -> None:
    text = PAGES[package].read_text(encoding="utf-8")
    for name in IN_PROSE[package]:
        assert f"{package}.{name}" in text
