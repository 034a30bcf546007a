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

from placement_core import MemoryReport, Plan, check_memory, inventory_for, load_config, plan
from placement_core.render import render_html, render_svg

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
TARGET = "guides/plans"
#: Where the guide wants the examples' pictures; the hook writes one section per example.
MARKER = "<!-- plan-pictures -->"


def on_files(files: Files, config: Any) -> Files:
    """Add the generated pictures and pages of the examples to the site."""
    pictures = [(example.stem, *_planned(example)) for example in sorted(EXAMPLES.glob("*.yaml"))]
    pictures.append(("nvl72_degraded_rack", degraded_rack(), None))
    for stem, result, memory in pictures:
        for suffix, render in ((".svg", render_svg), (".html", render_html)):
            content = render(result, memory=memory)
            files.append(File.generated(config, f"{TARGET}/{stem}{suffix}", content=content))
    return files


#: A healthy GB200 driver's fabric health mask: every field false, configuration none.
HEALTHY_MASK = 0b1010_1010 | 1 << 8


def _planned(example: Path) -> tuple[Plan, MemoryReport | None]:
    """An example's plan, with its memory check when it has a ``memory:`` section."""
    result = plan(example)
    document = yaml.safe_load(example.read_text(encoding="utf-8"))
    if "memory" not in document:
        return result, None
    return result, check_memory(result, document["memory"], base_dir=example.parent)


def degraded_rack() -> Any:
    """Three NVL72 racks of 6 trays as node snapshots describe them, one GPU of rack B
    reporting degraded bandwidth; a trainer in groups of 8 with one spare per rack."""
    snapshots = []
    for rank in range(18):
        rack = rank // 6
        mask = HEALTHY_MASK & ~0b11 | 1 if rank == 8 else HEALTHY_MASK
        fabric = {
            "cluster_uuid": "6f1d2c3b-4a59-4e8f-9a7b-0c1d2e3f4a5b",
            "clique_id": rack + 1,
            "state": "completed",
            "status": "success",
        }
        snapshots.append(
            {
                "schema": 1,
                "node_rank": rank,
                "hostname": f"tray-{rank:02d}",
                "accelerators": [
                    {
                        "index": i,
                        "type": "nvidia",
                        "model": "NVIDIA GB200",
                        "fabric": {**fabric, "health_mask": mask if i == 1 else HEALTHY_MASK},
                    }
                    for i in range(4)
                ],
            }
        )
    racks = [
        {
            "node_ranks": f"{6 * r}-{6 * r + 5}",
            "accelerators": {"count": 4, "model": "NVIDIA GB200"},
            "nvlink_domain": f"rack-{'abc'[r]}",
        }
        for r in range(3)
    ]
    document = {
        "cluster": {
            "num_nodes": 18,
            "spare_nodes": {"rack-a": 1, "rack-b": 1, "rack-c": 1},
            "component_placement": {"actor": {"placement": "all", "nvlink_group": 8}},
            "inventory": racks,
        }
    }
    loaded = load_config(document)
    return plan(loaded, inventory_for(loaded, snapshots=snapshots))


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
