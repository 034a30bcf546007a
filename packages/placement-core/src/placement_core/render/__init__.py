"""Text, JSON and picture views of a plan, as the ``placement plan --format`` options print them.

- :func:`render_table`: per component, one row per process (runs of identical rows
  folded), with node, resources, visible devices, local rank and group.
- :func:`render_map`: a node x accelerator grid of who sits where, so colocation shows
  at a glance; identical consecutive nodes are folded and long maps are capped.
- :func:`render_json` / :func:`write_json` / :func:`plan_to_dict`: the machine-readable
  plan (``write_json`` streams it, for plans of millions of processes).
- :func:`render_svg`: the map as a picture, a tooltip on every accelerator.
- :func:`render_html`: that picture in one self-contained interactive page.

The map, SVG and HTML views take ``held_by`` (:data:`HeldBy`): accelerators other jobs
hold on the plan's nodes, greyed out with the job's name (a shared cluster).
"""

from __future__ import annotations

from ._held import HeldBy
from ._html import render_html
from ._json import plan_to_dict, render_json, write_json
from ._map import render_map
from ._svg import render_svg
from ._table import render_table

__all__ = [
    "HeldBy",
    "plan_to_dict",
    "render_html",
    "render_json",
    "render_map",
    "render_svg",
    "render_table",
    "write_json",
]
