"""Every exception class of placement_core round-trips through pickle (they cross Ray
process boundaries) with its message and attributes, and errors survive ``python -O``."""

from __future__ import annotations

import importlib
import inspect
import pickle
import pkgutil
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import pytest

import placement_core
from placement_core._errors import PlacementError, Problem


def _exception_classes() -> list[type[BaseException]]:
    found: dict[str, type[BaseException]] = {}
    for info in pkgutil.walk_packages(placement_core.__path__, "placement_core."):
        if info.name.endswith("__main__"):
            continue
        module = importlib.import_module(info.name)
        for _, obj in inspect.getmembers(module, inspect.isclass):
            if issubclass(obj, BaseException) and obj.__module__.startswith("placement_core"):
                found[f"{obj.__module__}.{obj.__qualname__}"] = obj
    return [found[name] for name in sorted(found)]


# Classes whose constructor is not ``(reason, *, path=None)``, by class name.
SAMPLES: dict[str, Callable[[type[Any]], BaseException]] = {
    "ConfigError": lambda cls: cls(
        [
            Problem("cluster.node_groups[1].label", "label 'node' is reserved", "node"),
            Problem("cluster.num_nodes", "expected an int > 0", 0),
        ]
    ),
    "Issues": lambda cls: cls([(".node_ranks", "node 9 is out of range", 9)]),
    "FileRefused": lambda cls: cls("is a FIFO (named pipe), expected a YAML config"),
    "DuplicateKey": lambda cls: cls("the key 'hostname' appears twice in one JSON object"),
    "_Refused": lambda cls: cls(problem="the document nests deeper than 100 levels"),
    "NoSpareError": lambda cls: cls(
        "no compatible spare for lost node 1",
        lost=(1,),
        needs={1: "8x nvidia A800; node groups a800"},
        path="cluster.spare_nodes",
    ),
    "PlacementSyntaxError": lambda cls: cls(
        "expected INT", source="0-3:a", span=(4, 5), path="cluster.component_placement.x"
    ),
}


def _sample(cls: type[BaseException]) -> BaseException:
    if cls.__name__ in SAMPLES:
        return SAMPLES[cls.__name__](cls)
    if issubclass(cls, PlacementError):
        return cls("something is wrong", path="cluster.component_placement.actor")
    pytest.fail(f"add a sample instance of {cls.__qualname__} to SAMPLES")


CLASSES = _exception_classes()


def test_the_known_errors_are_discovered() -> None:
    names = {cls.__name__ for cls in CLASSES}
    assert {"PlacementError", "ConfigError", "PlacementSyntaxError"} <= names
    assert {"PlacementRuleError", "InventoryError"} <= names


@pytest.mark.parametrize("cls", CLASSES, ids=lambda cls: cls.__qualname__)
def test_exception_round_trips_through_pickle(cls: type[BaseException]) -> None:
    error = _sample(cls)
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is cls
    assert str(copy) == str(error)
    assert copy.args == error.args
    assert vars(copy) == vars(error)


@pytest.mark.parametrize(
    "cls",
    [c for c in CLASSES if issubclass(c, PlacementError) and c is not PlacementError],
    ids=lambda c: c.__qualname__,
)
def test_concrete_errors_are_value_errors(cls: type[PlacementError]) -> None:
    assert issubclass(cls, ValueError)


def test_errors_survive_python_dash_o() -> None:
    code = (
        "from placement_core._rules import parse_rule\n"
        "from placement_core._errors import PlacementRuleError\n"
        "try:\n"
        "    parse_rule('0-3:1-4')\n"
        "except PlacementRuleError as e:\n"
        "    print('raised', type(e).__name__)\n"
    )
    result = subprocess.run(
        [sys.executable, "-O", "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert result.stdout.strip() == "raised PlacementRuleError"
