"""The examples in placement-core's docstrings run and say what they show."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import placement_core

MODULES = sorted(
    m.name
    for m in pkgutil.walk_packages(placement_core.__path__, prefix="placement_core.")
    if m.name != "placement_core.__main__"
)


@pytest.mark.parametrize("name", ["placement_core", *MODULES])
def test_docstring_examples_run(name: str) -> None:
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0, f"{result.failed} docstring example(s) failed in {name}"
