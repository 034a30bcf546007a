"""Fixtures shared by placement-core's tests."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"


@pytest.fixture
def examples() -> Path:
    """The repository's examples/ folder."""
    return EXAMPLES


@pytest.fixture
def heterogeneous_yaml() -> str:
    """RLinf's 18-node heterogeneous cluster config (seed 001), with an inventory."""
    return (EXAMPLES / "heterogeneous.yaml").read_text(encoding="utf-8")


@pytest.fixture
def write_file(tmp_path: Path) -> Callable[[str, str], Path]:
    """Write text to a file under tmp_path and return its path."""

    def write(name: str, text: str) -> Path:
        path = tmp_path / name
        path.write_text(text, encoding="utf-8")
        return path

    return write
