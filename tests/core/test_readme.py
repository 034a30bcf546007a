"""placement-core's README shows what really happens: its examples run and its CLI output
is what the CLI prints."""

from __future__ import annotations

import doctest
import re
import shlex
import shutil
from pathlib import Path

import pytest

from placement_core import plan
from placement_core._cli import main

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"
README = REPO / "packages" / "placement-core" / "README.md"
TEXT = README.read_text(encoding="utf-8")


def commands() -> list[tuple[list[str], list[str]]]:
    """``(argv, expected output lines)`` of every ``$ placement ...`` in console blocks."""
    found: list[tuple[list[str], list[str]]] = []
    for block in re.findall(r"```console\n(.*?)```", TEXT, re.S):
        for chunk in re.split(r"^\$ ", block, flags=re.M)[1:]:
            command, *output = chunk.rstrip("\n").split("\n")
            argv = shlex.split(command)
            if argv[0] == "placement":
                found.append((argv[1:], output))
    return found


def test_python_examples_run(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)
    result = doctest.testfile(
        str(README), module_relative=False, optionflags=doctest.NORMALIZE_WHITESPACE
    )
    assert result.attempted > 0
    assert result.failed == 0


def test_the_annotated_config_plans() -> None:
    config = re.search(r"## The config.*?```yaml\n(.*?)```", TEXT, re.S)
    assert config is not None
    result = plan(config.group(1))
    assert [len(result.placements(c)) for c in ("actor", "rollout", "env", "agent")] == [
        64,
        64,
        2,
        400,
    ]


@pytest.mark.parametrize(("argv", "expected"), commands(), ids=lambda v: " ".join(v)[:40])
def test_cli_output_is_real(
    argv: list[str],
    expected: list[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    shutil.copytree(EXAMPLES, tmp_path / "examples")
    bad = re.search(r"`bad.yaml` of the .*?```yaml\n(.*?)```", TEXT, re.S)
    assert bad is not None
    (tmp_path / "bad.yaml").write_text(bad.group(1), encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    main(argv)
    captured = capsys.readouterr()
    printed = (captured.out + captured.err).rstrip("\n").split("\n")
    assert [line.rstrip() for line in printed] == [line.rstrip() for line in expected]
