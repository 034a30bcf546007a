"""The documentation shows what really happens: its examples run, and the `placement`
output it shows is what the command prints.

Conventions of the pages under docs/ and of the root README (kept in this one place):

- ```` ```python ```` blocks of a page run in order in one namespace, from an empty folder
  (a snippet saved as a file runs anywhere: no path into the repository). A block that
  needs Ray, a GPU or placement-native (which this suite does not install) is preceded
  by ``<!-- docs: not run (REASON) -->``; the Ray suite covers what such blocks show. A
  block preceded by ``<!-- docs: output -->`` is what the python block before it prints,
  exactly; a python block that prints must be followed by one.
- ```` ```pycon ```` blocks are doctests: each ``>>>`` line runs and prints exactly what
  follows it. They run from the repository root, as the pages say (an interactive
  session in a clone, where ``examples/`` is).
- In ```` ```console ```` blocks, every ``$ placement ...`` command runs (from a folder
  holding a copy of examples/ and the page's declared files) and prints exactly the lines
  that follow it. A line ``...`` stands for lines left out, which the page says in words.
  ``$ cat FILE`` prints a declared file. Other commands (pip, nox, ray) are not run here.
- A block preceded by ``<!-- docs: file NAME -->`` is written to NAME for the commands of
  that page.
"""

from __future__ import annotations

import ast
import contextlib
import doctest
import io
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from placement_core import (
    Accelerator,
    Inventory,
    Node,
    Placement,
    PlacementError,
    flexible,
    format_rank_list,
    node,
    packed,
    plan,
)
from placement_core._cli import main

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs"
# The root README follows the same conventions (the core README has tests/core/test_readme.py).
PAGES = [*sorted(DOCS.rglob("*.md")), REPO / "README.md"]

# A fenced block, with the HTML comment (if any) on the line right before it.
BLOCK = re.compile(
    r"(?:^<!-- docs: (?P<marker>[^\n]*?) -->\n)?^(?P<indent>[ ]*)```(?P<lang>[\w-]*)[^\n]*\n"
    r"(?P<body>.*?)^(?P=indent)```[ ]*$",
    re.M | re.S,
)
NOT_RUN = re.compile(r"not run \((?P<reason>.+)\)")
OUTPUT = "output"
NEEDS_MORE_THAN_CORE = re.compile(r"\b(placement_native|placement_ray|ray)\b")


@dataclass(frozen=True)
class Block:
    """One fenced code block of a docs page."""

    page: Path
    line: int
    lang: str
    body: str
    marker: str | None

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(REPO)}:{self.line}"


def blocks(page: Path) -> list[Block]:
    """Every fenced block of ``page``, de-indented (blocks may sit in list items)."""
    text = page.read_text(encoding="utf-8")
    found = []
    for match in BLOCK.finditer(text):
        indent = len(match["indent"])
        body = "".join(line[indent:] for line in match["body"].splitlines(keepends=True))
        line = text.count("\n", 0, match.start("indent")) + 1
        found.append(Block(page, line, match["lang"], body, match["marker"]))
    return found


ALL_BLOCKS = [block for page in PAGES for block in blocks(page)]


def page_id(page: Path) -> str:
    return str(page.relative_to(REPO))


def declared_files(page: Path) -> dict[str, str]:
    """The files a page declares with ``<!-- docs: file NAME -->``."""
    files = {}
    for block in blocks(page):
        if block.marker and block.marker.startswith("file "):
            files[block.marker.removeprefix("file ").strip()] = block.body
    return files


def test_docs_have_pages() -> None:
    assert DOCS / "index.md" in PAGES


@pytest.mark.parametrize("block", ALL_BLOCKS, ids=lambda b: b.where)
def test_markers_are_known(block: Block) -> None:
    if block.marker is None:
        return
    assert (
        NOT_RUN.fullmatch(block.marker)
        or block.marker.startswith("file ")
        or block.marker == OUTPUT
    ), f"{block.where}: unknown marker {block.marker!r}; expected 'not run (REASON)', "
    "'file NAME' or 'output'"


@pytest.mark.parametrize(
    "block",
    [b for b in ALL_BLOCKS if b.lang == "python" and b.marker is None],
    ids=lambda b: b.where,
)
def test_python_blocks_need_only_core(block: Block) -> None:
    """A block that imports native or ray must say it is not run here, and why."""
    assert not NEEDS_MORE_THAN_CORE.search(block.body), (
        f"{block.where}: uses more than placement-core; mark it <!-- docs: not run (REASON) -->"
    )


CODE_BLOCKS = [b for b in ALL_BLOCKS if b.lang in ("python", "pycon")]
PRIVATE_IMPORT = re.compile(r"^\s*(?:>>> )?(?:from|import) placement_\w+\._\w+", re.M)
USES = re.compile(r"\b(placement_native|placement_core|placement_ray)\.\w")


@pytest.mark.parametrize("block", CODE_BLOCKS, ids=lambda b: b.where)
def test_snippets_import_only_public_modules(block: Block) -> None:
    """What users copy names public API only (run or not)."""
    found = PRIVATE_IMPORT.search(block.body)
    assert found is None, f"{block.where}: imports a private module: {found[0].strip()!r}"


@pytest.mark.parametrize("block", CODE_BLOCKS, ids=lambda b: b.where)
def test_snippets_import_the_packages_they_name(block: Block) -> None:
    """A snippet that calls ``placement_native.snapshot()`` imports ``placement_native``
    (run or not: a copied snippet must run)."""
    code = "\n".join(
        line.removeprefix(">>> ").removeprefix("... ").split("#")[0]
        for line in block.body.splitlines()
        if block.lang == "python" or line.startswith((">>> ", "... "))
    )
    used = USES.findall(re.sub(r"^\s*from \S+ import .*$", "", code, flags=re.M))
    for package in sorted(set(used)):
        imported = re.search(rf"^\s*import {package}\b", code, re.M)
        assert imported, f"{block.where}: uses {package}. without 'import {package}'"


PYTHON_PAGES = [p for p in PAGES if any(b.lang in ("python", "pycon") for b in blocks(p))]


@pytest.mark.parametrize("page", PYTHON_PAGES, ids=page_id)
def test_python_examples_run(page: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    namespace: dict[str, object] = {"__name__": "__docs__"}
    parser = doctest.DocTestParser()
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    found = blocks(page)
    for i, block in enumerate(found):
        if block.marker is not None:
            continue
        if block.lang == "python":
            monkeypatch.chdir(tmp_path)
            code = compile(block.body, block.where, "exec")
            printed = io.StringIO()
            with contextlib.redirect_stdout(printed):
                exec(code, namespace)
            follower = found[i + 1] if i + 1 < len(found) else None
            shown = follower.body if follower and follower.marker == OUTPUT else None
            if printed.getvalue() or shown is not None:
                assert printed.getvalue() == shown, f"{block.where}: prints other lines"
        elif block.lang == "pycon":
            monkeypatch.chdir(REPO)
            test = parser.get_doctest(block.body, namespace, block.where, str(page), block.line)
            runner.run(test, clear_globs=False)
            namespace.update(test.globs)  # DocTest works on a copy of the namespace
    assert runner.failures == 0, f"{runner.failures} pycon example(s) failed in {page_id(page)}"


def commands(page: Path) -> list[tuple[Block, list[str], list[str]]]:
    """``(block, argv, expected lines)`` of every runnable command in console blocks."""
    found = []
    for block in blocks(page):
        if block.lang != "console" or block.marker is not None:
            continue
        for chunk in re.split(r"^\$ ", block.body, flags=re.M)[1:]:
            command, *output = chunk.rstrip("\n").split("\n")
            argv = shlex.split(command, comments=True)
            if argv and argv[0] in ("placement", "cat"):
                found.append((block, argv, output))
    return found


ALL_COMMANDS = [c for page in PAGES for c in commands(page)]


def matches(printed: list[str], expected: list[str]) -> bool:
    """Whether ``printed`` is ``expected`` where each ``...`` line stands for any lines."""
    pattern = "".join(
        "(?:.*\n)*?" if line == "..." else re.escape(line) + "\n" for line in expected
    )
    return re.fullmatch(pattern, "".join(line + "\n" for line in printed)) is not None


@pytest.mark.parametrize(
    ("block", "argv", "expected"),
    ALL_COMMANDS,
    ids=[f"{b.where} {' '.join(a)[:40]}" for b, a, _ in ALL_COMMANDS],
)
def test_console_output_is_real(
    block: Block,
    argv: list[str],
    expected: list[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    shutil.copytree(REPO / "examples", tmp_path / "examples")
    for name, text in declared_files(block.page).items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    if argv[0] == "cat":
        printed = (tmp_path / argv[1]).read_text(encoding="utf-8").rstrip("\n").split("\n")
    else:
        with contextlib.suppress(SystemExit):  # argparse exits for a wrong command line
            main(argv[1:])
        captured = capsys.readouterr()
        text = captured.out + captured.err
        printed = text.rstrip("\n").split("\n") if text else []  # --output prints nothing
    printed = [line.rstrip() for line in printed]
    expected = [line.rstrip() for line in expected]
    if "..." not in expected:
        assert printed == expected, block.where
    else:
        assert matches(printed, expected), f"{block.where}:\n" + "\n".join(printed)


# ---------------------------------------------------------------- worked-example tables
#
# A table headed ``| rule | cluster | result |`` (a component_placement rule, as YAML) or
# ``| call | cluster | result |`` (a strategy call) is checked row by row: the cluster is
# ``N × G`` (N nodes of G accelerators) or ``nodes of 8,4``; the result is what
# ``where()`` prints for the placements, or ``error: TEXT`` where TEXT is part of the
# error message.

RESULT_TABLE = re.compile(
    r"^\| (?P<kind>rule|call) \| cluster \| result \|\n\|[-| ]+\|\n(?P<rows>(?:\|.*\|\n)+)",
    re.M,
)


def inventory_of(text: str) -> Inventory:
    """``2 × 8`` or ``nodes of 8,4`` as an inventory."""
    if text.startswith("nodes of "):
        counts = [int(c) for c in text.removeprefix("nodes of ").split(",")]
    else:
        num_nodes, per_node = (int(x) for x in text.split("×"))
        counts = [per_node] * num_nodes
    return Inventory(
        tuple(
            Node(rank, f"node-{rank}", accelerators=tuple(Accelerator(i) for i in range(count)))
            for rank, count in enumerate(counts)
        )
    )


def _span(first: int, last: int) -> str:
    if first == last:
        return str(first)
    return f"{first},{last}" if last == first + 1 else f"{first}-{last}"


def where(placements: Sequence[Placement]) -> str:
    """Placements in the tables' words: ``0,1 → node 0 GPU 0; 2-5 → node 0 GPUs 1-4, one each``."""
    shared: list[tuple[int, int, int, tuple[int, ...]]] = []  # first, last, node, ids
    for p in placements:
        if (
            shared
            and shared[-1][1] == p.rank - 1
            and shared[-1][2:] == (p.node_rank, p.hardware_ranks)
        ):
            shared[-1] = (shared[-1][0], p.rank, p.node_rank, p.hardware_ranks)
        else:
            shared.append((p.rank, p.rank, p.node_rank, p.hardware_ranks))
    runs: list[tuple[int, int, int, tuple[int, ...], bool]] = []  # ..., one each
    for first, last, node_rank, ids in shared:
        if runs:
            a, b, n, seen, _ = runs[-1]
            single = first == last and len(ids) == 1
            if (
                single
                and b - a + 1 == len(seen)
                and (n, b + 1, seen[-1] + 1) == (node_rank, first, ids[0])
            ):
                runs[-1] = (a, last, n, (*seen, ids[0]), True)
                continue
        runs.append((first, last, node_rank, ids, False))
    parts = []
    for first, last, node_rank, ids, one_each in runs:
        what = f"node {node_rank}"
        if ids:
            what += f" {'GPU' if len(ids) == 1 else 'GPUs'} {format_rank_list(ids)}"
            what += ", one each" if one_each else ""
        parts.append(f"{_span(first, last)} → {what}")
    return "; ".join(parts)


def outcome(kind: str, code: str, cluster: str) -> str:
    """What a table row's rule or call gives on its cluster."""
    inventory = inventory_of(cluster)
    try:
        if kind == "rule":
            rule = yaml.safe_load(code)
            component_placement = {"a": rule}
            config = {
                "cluster": {
                    "num_nodes": inventory.num_nodes,
                    "component_placement": component_placement,
                }
            }
            placements = plan(config, inventory).components["a"]
        else:
            strategy = eval(code, {"packed": packed, "flexible": flexible, "node": node})
            placements = strategy.place(inventory)
    except PlacementError as error:
        return f"error: {error}"
    return where(placements)


def table_rows(page: Path) -> list[tuple[str, str, str, str]]:
    text = page.read_text(encoding="utf-8")
    found = []
    for table in RESULT_TABLE.finditer(text):
        for row in table["rows"].splitlines():
            cells = [cell.strip().strip("`") for cell in row.strip().strip("|").split(" | ")]
            found.append((table["kind"], *cells))  # type: ignore[arg-type]
    return found


ALL_ROWS = [(page, *row) for page in PAGES for row in table_rows(page)]


@pytest.mark.parametrize(
    ("page", "kind", "code", "cluster", "result"),
    ALL_ROWS,
    ids=[f"{page_id(r[0])} {r[2]} on {r[3]}" for r in ALL_ROWS],
)
def test_worked_example_tables_are_right(
    page: Path, kind: str, code: str, cluster: str, result: str
) -> None:
    got = outcome(kind, code, cluster)
    if result.startswith("error: "):
        assert got.startswith("error: "), got
        assert result.removeprefix("error: ") in got
    else:
        assert got == result


def test_the_main_jobs_example_lines_are_what_nox_examples_prints() -> None:
    """The README's ``$ nox -s examples`` block is the session's own output: the session
    runs the script ``EXAMPLES_SUMMARY`` of noxfile.py, run here the same way."""
    tree = ast.parse((REPO / "noxfile.py").read_text(encoding="utf-8"))
    script = next(
        node.value.value
        for node in tree.body
        if isinstance(node, ast.Assign)
        and any(isinstance(t, ast.Name) and t.id == "EXAMPLES_SUMMARY" for t in node.targets)
        and isinstance(node.value, ast.Constant)
    )
    result = subprocess.run(
        [sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    shown = readme.split("$ nox -s examples\n", 1)[1].split("```", 1)[0]
    assert result.stdout == shown
