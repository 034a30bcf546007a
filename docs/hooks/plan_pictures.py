"""MkDocs hook: draw every shipped example (examples/*.yaml) at build time.

Each example becomes ``guides/plans/<name>.svg`` (the picture, embedded by the plan
viewer guide) and ``guides/plans/<name>.html`` (the interactive page) in the built site,
so the docs always show what the current code draws. The pictures are generated, never
committed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from mkdocs.structure.files import File, Files

from placement_core import check_memory, plan
from placement_core.render import render_html, render_svg

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
TARGET = "guides/plans"
#: Where the guide wants the examples' pictures; the hook writes one section per example.
MARKER = "<!-- plan-pictures -->"


def on_files(files: Files, config: Any) -> Files:
    """Add the generated pictures and pages of the examples to the site."""
    for example in sorted(EXAMPLES.glob("*.yaml")):
        result = plan(example)
        document = yaml.safe_load(example.read_text(encoding="utf-8"))
        # An example with a memory: section is drawn with its memory check (will-it-fit.md).
        memory = (
            check_memory(result, document["memory"], base_dir=example.parent)
            if "memory" in document
            else None
        )
        for suffix, render in ((".svg", render_svg), (".html", render_html)):
            content = render(result, memory=memory)
            files.append(
                File.generated(config, f"{TARGET}/{example.stem}{suffix}", content=content)
            )
    return files


def _caption(example: Path) -> str:
    """The example's opening comment paragraph."""
    lines = []
    for line in example.read_text(encoding="utf-8").splitlines():
        if not line.startswith("#") or line.strip() == "#":
            break
        lines.append(line.lstrip("# ").rstrip())
    return " ".join(lines)


def on_page_markdown(markdown: str, page: Any, config: Any, files: Files) -> str:
    """Put a section per shipped example where the page has the marker."""
    if MARKER not in markdown:
        return markdown
    sections = [
        f"### `examples/{example.name}`\n\n{_caption(example)}\n\n"
        f"![The plan of examples/{example.name}](plans/{example.stem}.svg)\n\n"
        f"[Open it as an interactive page](plans/{example.stem}.html) "
        "(hover cards, component filter).\n"
        for example in sorted(EXAMPLES.glob("*.yaml"))
    ]
    return markdown.replace(MARKER, "\n".join(sections))
