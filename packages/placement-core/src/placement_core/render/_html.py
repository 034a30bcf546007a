"""The ``html`` view: the SVG picture in one self-contained, interactive page.

Everything is inline (CSS, script, SVG; no network, no web fonts), so the file can be
mailed, attached to a CI run or opened from disk. The page keeps its title, legend and
column header in view while the grid scrolls (runs of same-looking nodes are folded as
in the map, so 2,000 uniform nodes are a few rows), shows a hover card with each
accelerator's tooltip, and can dim everything but one component.

:func:`notebook_html` is the smaller fragment ``Plan._repr_html_`` shows in Jupyter: the
SVG in a scrolling box, its tooltips native.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._held import HeldBy
from ._memory_svg import memory_panel
from ._svg import PlanPicture, render_svg
from ._svg_base import HEADER_H, xml_escape

if TYPE_CHECKING:
    from placement_core._memory_check import MemoryReport
    from placement_core._plan import Plan

__all__ = ["NOTEBOOK_MAX_NODES", "notebook_html", "render_html"]

#: Most node rows a notebook cell draws; the rest is summarised in a note.
NOTEBOOK_MAX_NODES = 200

_CSS = """
*{box-sizing:border-box}
html,body{margin:0;height:100%;background:#fff;color:#1a1a1a;
font:13px/1.4 system-ui,-apple-system,'Segoe UI',Roboto,'DejaVu Sans',sans-serif}
body{display:flex;flex-direction:column}
header.top{flex:none;padding:10px 14px 8px;border-bottom:1px solid #ddd;background:#fafafa}
h1{margin:0 0 6px;font-size:16px}
.legend{display:flex;flex-wrap:wrap;gap:4px 14px;align-items:center;margin:0;padding:0;
list-style:none}
.legend li{display:flex;align-items:center;gap:6px}
.sw{display:inline-block;width:14px;height:14px;border:1px solid rgba(0,0,0,.25)}
.sw.shared{border:2px solid #1a1a1a}
.sw.free{background:#fff;border:1px dashed #9a9a9a}
.sw.link{width:18px;height:6px;border-radius:3px;background:#1a1a1a;border:0}
.hatch{background-image:repeating-linear-gradient(45deg,rgba(26,26,26,.45) 0 2px,
transparent 2px 6px)}
.controls{margin-top:6px;display:flex;gap:14px;align-items:center;flex-wrap:wrap}
.controls select{font:inherit}
.count{color:#555}
main.scroll{flex:1;overflow:auto;position:relative}
.colhead{position:sticky;top:0;z-index:2;background:#fff;border-bottom:1px solid #eee;
width:max-content}
.colhead svg,.grid svg{display:block}
.notes{padding:6px 14px;color:#8a4b00;white-space:pre-wrap}
#card{position:fixed;z-index:10;max-width:560px;padding:8px 10px;border-radius:6px;
background:#1f2328;color:#f6f8fa;font:12px/1.45 ui-monospace,'DejaVu Sans Mono',
'Liberation Mono',Menlo,Consolas,monospace;white-space:pre-wrap;pointer-events:none;
box-shadow:0 4px 14px rgba(0,0,0,.3)}
#card::first-line{font-weight:bold}
#card[hidden]{display:none}
.placement-plan .tip{cursor:default}
"""

# The hover card: the first hover of an element moves its SVG <title> text into
# data-tip (so the browser's own tooltip never doubles the card); textContent only,
# never HTML, so names cannot inject markup.
_JS = """
(function () {
  "use strict";
  var card = document.getElementById("card");
  var scroll = document.querySelector("main.scroll");
  function tipOf(el) {
    if (el.dataset.tip === undefined) {
      var title = null;
      for (var i = 0; i < el.children.length; i++) {
        if (el.children[i].tagName.toLowerCase() === "title") { title = el.children[i]; }
      }
      el.dataset.tip = title ? title.textContent : "";
      if (title) { el.removeChild(title); }
    }
    return el.dataset.tip;
  }
  function place(event) {
    var pad = 14, w = card.offsetWidth, h = card.offsetHeight;
    var x = event.clientX + pad, y = event.clientY + pad;
    if (x + w > window.innerWidth) { x = Math.max(0, event.clientX - w - pad); }
    if (y + h > window.innerHeight) { y = Math.max(0, event.clientY - h - pad); }
    card.style.left = x + "px";
    card.style.top = y + "px";
  }
  scroll.addEventListener("mouseover", function (event) {
    var el = event.target.closest(".tip");
    if (!el) { return; }
    var text = tipOf(el);
    if (!text) { return; }
    card.textContent = text;
    card.hidden = false;
    place(event);
  });
  scroll.addEventListener("mousemove", function (event) {
    if (!card.hidden) { place(event); }
  });
  scroll.addEventListener("mouseout", function (event) {
    var el = event.target.closest(".tip");
    if (el && !(event.relatedTarget && el.contains(event.relatedTarget))) {
      card.hidden = true;
    }
  });
  var filter = document.getElementById("filter");
  filter.addEventListener("change", function () {
    scroll.className = "scroll" + (filter.value ? " only-" + filter.value : "");
  });
})();
"""


def render_html(
    plan: Plan,
    *,
    max_nodes: int | None = None,
    memory: MemoryReport | None = None,
    held_by: HeldBy | None = None,
) -> str:
    """The plan as one self-contained HTML page.

    Args:
        plan: The plan to draw.
        max_nodes: Most node rows to draw (a note says how many were left out); None
            draws every row. Runs of same-looking nodes are folded either way.
        memory: A memory check (docs/concepts/will-it-fit.md): a panel under the grid
            draws a stacked bar per kind of GPU per phase, bytes on hover.
        held_by: ``(node rank, accelerator index) -> job name`` of accelerators other
            jobs hold on the plan's nodes: greyed out, named, in the legend.

    Returns:
        The page, ending with a newline.

    Raises:
        PlacementRuleError: ``held_by`` names a node outside the plan, a bad job name or
            an accelerator the plan uses.
    """
    picture = PlanPicture(plan, max_nodes=max_nodes, held_by=held_by)
    width = f"{picture.width:.0f}"
    body, height = picture.body(4)
    header = picture.header(2)
    dim = "".join(
        f"main.only-{s.key} :is(.acc,.chip,.link):not(.{s.key}){{opacity:.18}}"
        for s in picture.swatches.values()
    )
    legend = "".join(
        f'<li><span class="sw{" hatch" if s.hatched else ""}" '
        f'style="background-color:{s.colour}"></span>{xml_escape(f"{s.code} = {s.name}")}</li>'
        for s in picture.swatches.values()
    )
    legend += (
        '<li><span class="sw shared" style="background:linear-gradient(90deg,'
        f'{_colour(picture, 0)} 50%,{_colour(picture, 1)} 50%)"></span>'
        "shared device (outlined, striped)</li>"
        '<li><span class="sw free"></span>free</li>'
        '<li><span class="sw link"></span>one process on several accelerators</li>'
    )
    if picture.held:
        jobs = ", ".join(sorted({j for held in picture.held.values() for j in held.values()}))
        legend += (
            '<li><span class="sw" style="background:#d9d9d9"></span>'
            f"held by another job ({xml_escape(jobs)})</li>"
        )
    if plan.lost_nodes:
        legend += '<li><span class="sw" style="background:#f3d6db"></span>lost node</li>'
    if plan.config.spare_nodes or plan.lost_nodes:
        legend += '<li><span class="sw" style="background:#d6e6f2"></span>spare node</li>'
    options = "".join(
        f'<option value="{s.key}">{xml_escape(s.name)}</option>' for s in picture.swatches.values()
    )
    drawn = sum(1 for item in picture.folded.items if isinstance(item, int))
    nodes = len(plan.inventory.nodes)
    notes = "\n".join(picture.notes())
    title = xml_escape(picture.title)
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width,initial-scale=1">'
        f"<title>{title}</title><style>{_CSS}{dim}</style></head>\n"
        f'<body><header class="top"><h1>{title}</h1><ul class="legend">{legend}</ul>'
        '<div class="controls"><label>show <select id="filter">'
        f'<option value="">all components</option>{options}</select></label>'
        f'<span class="count">{drawn} of {nodes} node rows drawn; '
        "hover a cell for its processes and environment</span></div></header>\n"
        '<main class="scroll">'
        f'<div class="colhead"><svg xmlns="http://www.w3.org/2000/svg" class="placement-plan" '
        f'width="{width}" height="{HEADER_H + 4}">{picture.style()}{"".join(header)}</svg></div>\n'
        f'<div class="grid"><svg xmlns="http://www.w3.org/2000/svg" class="placement-plan" '
        f'width="{width}" height="{height + 8:.0f}">{picture.defs()}\n'
        + "\n".join(body)
        + "\n</svg></div>\n"
        + _memory_html(picture, memory)
        + (f'<div class="notes">{xml_escape(notes)}</div>' if notes else "")
        + "</main>\n"
        '<div id="card" role="tooltip" hidden></div>\n'
        f"<script>{_JS}</script></body></html>\n"
    )


def _memory_html(picture: PlanPicture, memory: MemoryReport | None) -> str:
    if memory is None:
        return ""
    width = max(picture.width, 720.0)
    panel, height = memory_panel(memory, picture.swatches, 4, width)
    return (
        f'<div class="grid"><svg xmlns="http://www.w3.org/2000/svg" class="placement-plan" '
        f'width="{width:.0f}" height="{height + 8:.0f}">{picture.style()}{picture.defs()}\n'
        + "\n".join(panel)
        + "\n</svg></div>\n"
    )


def _colour(picture: PlanPicture, index: int) -> str:
    colours = [s.colour for s in picture.swatches.values()]
    return colours[index] if index < len(colours) else "#fff"


def notebook_html(plan: Plan, *, max_nodes: int = NOTEBOOK_MAX_NODES) -> str:
    """The SVG in a scrolling box, for a notebook's output cell (``Plan._repr_html_``)."""
    svg = render_svg(plan, max_nodes=max_nodes)
    return f'<div style="max-height:640px;overflow:auto">{svg}</div>'
