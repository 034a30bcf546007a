"""Only the reservation (``_reservation``) and the placement-group primitives under it
(``_placement_groups``) create or remove placement groups: read from every module's
calls, inside functions too.

A call counts when it names Ray's ``placement_group`` / ``remove_placement_group`` (by
any import or as an attribute of ``ray.util``), one of our primitives that create or
remove groups (``create_placement_group``, ``reserve_nodes``, ``remove_groups``), or is
``OrderedPlacementGroup.remove`` on a name that says it is a group (``group.remove()``,
``self.group.remove()``, ``groups[0].remove()``).
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from pathlib import Path

import pytest

PackageFiles = Callable[[str], dict[str, Path]]

OWNERS = {"placement_ray._placement_groups", "placement_ray._reservation"}
EXCEPTIONS = {
    # check_health is public: it removes the groups its caller names once they stay
    # RESCHEDULING (a user's own included); a launch's reservation then skips them.
    "placement_ray._failure": {"remove_placement_group"},
    # The test kit removes whatever a test left behind, not a job's groups.
    "placement_ray.testing": {"remove_placement_group"},
}
RAY_CALLS = {"placement_group", "remove_placement_group"}
RAY_MODULES = {"ray.util", "ray.util.placement_group"}
OUR_CALLS = {"create_placement_group", "reserve_nodes", "remove_groups"}
OUR_MODULES = {"placement_ray", "placement_ray._placement_groups"}


def _imported(tree: ast.AST, module: str) -> dict[str, str]:
    """Local name -> the creating or removing function it was imported as."""
    package = module.rpartition(".")[0]
    names: dict[str, str] = {}
    for node in ast.walk(tree):
        if not isinstance(node, ast.ImportFrom):
            continue
        source = node.module or ""
        if node.level:
            base = package.split(".")[: len(package.split(".")) - node.level + 1]
            source = ".".join([*base, *([source] if source else [])])
        for alias in node.names:
            ray_call = source in RAY_MODULES and alias.name in RAY_CALLS
            if ray_call or (source in OUR_MODULES and alias.name in OUR_CALLS):
                names[alias.asname or alias.name] = alias.name
    return names


def _dotted(node: ast.expr) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    return "?"


def placement_group_calls(module: str, source: str) -> list[tuple[int, str]]:
    """``(line, function)`` of each call that creates or removes a placement group."""
    tree = ast.parse(source)
    names = _imported(tree, module)
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        if isinstance(node.func, ast.Name) and node.func.id in names:
            found.append((node.lineno, names[node.func.id]))
        elif isinstance(node.func, ast.Attribute):
            owner, _, name = _dotted(node.func).rpartition(".")
            receiver = node.func.value
            if isinstance(receiver, ast.Subscript):
                receiver = receiver.value
            if (
                name == "remove"
                and not node.args
                and _dotted(receiver).endswith(("group", "groups"))
            ):
                found.append((node.lineno, "OrderedPlacementGroup.remove"))
                continue
            if (owner in RAY_MODULES and name in RAY_CALLS) or (
                owner in {"_placement_groups", *OUR_MODULES} and name in OUR_CALLS
            ):
                found.append((node.lineno, name))
    return found


def test_only_the_reservation_creates_or_removes_placement_groups(
    package_files: PackageFiles,
) -> None:
    offending = []
    for module, path in package_files("placement_ray").items():
        if module in OWNERS or path.suffix != ".py":
            continue
        allowed = EXCEPTIONS.get(module, set())
        offending += [
            f"{module}:{line} calls {name}"
            for line, name in placement_group_calls(module, path.read_text(encoding="utf-8"))
            if name not in allowed
        ]
    assert offending == []


@pytest.mark.parametrize(
    "source",
    [
        "from ray.util.placement_group import placement_group\nplacement_group([])",
        "from ray.util.placement_group import remove_placement_group as rm\ndef f(pg):\n rm(pg)",
        "import ray\nray.util.placement_group([{'CPU': 1}])",
        "import ray\nray.util.remove_placement_group(pg)",
        "from .._placement_groups import create_placement_group\ncreate_placement_group(c, [])",
        "from placement_ray import _placement_groups\n_placement_groups.remove_groups(c, [])",
        "def f():\n from placement_ray._placement_groups import reserve_nodes\n reserve_nodes(c)",
        "def f(layout):\n layout.group.remove()",
        "for g in x:\n groups[g].remove()",
    ],
)
def test_the_scan_finds_a_call_however_it_is_imported(source: str) -> None:
    assert len(placement_group_calls("placement_ray._verl.reserve", source)) == 1


def test_the_scan_ignores_names_that_only_look_alike() -> None:
    source = (
        "from ray.util.placement_group import PlacementGroup, placement_group_table\n"
        "placement_group_table(pg)\nlayout.placement_group(0)\ndef placement_group(): ...\n"
        "layout.remove()\npool.remove()\nworker_groups.remove(key)\n"
    )
    assert placement_group_calls("placement_ray._launch", source) == []


def test_the_owners_do_create_and_remove_groups(package_files: PackageFiles) -> None:
    """The scan sees the owners' own calls (so a rename cannot make it pass blind)."""
    modules = package_files("placement_ray")
    for owner in OWNERS:
        source = Path(modules[owner]).read_text(encoding="utf-8")
        assert placement_group_calls(owner, source), owner
