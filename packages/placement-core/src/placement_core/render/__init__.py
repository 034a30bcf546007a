"""Text and JSON views of a plan, as the ``placement plan --format`` options print them.

- :func:`render_table`: per component, one row per process (runs of identical rows
  folded), with node, resources, visible devices, local rank and group.
- :func:`render_map`: a node x accelerator grid of who sits where, so colocation shows
  at a glance; identical consecutive nodes are folded and long maps are capped.
- :func:`render_json` / :func:`plan_to_dict`: the machine-readable plan.
"""

from __future__ import annotations

from .json import plan_to_dict, render_json
from .map import render_map
from .table import render_table

__all__ = ["plan_to_dict", "render_json", "render_map", "render_table"]
