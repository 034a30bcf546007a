"""The ``svg`` view: the map as a picture, with a tooltip on every accelerator.

One row per drawn node (runs of same-looking nodes folded as in the map), one cell per
accelerator coloured by the component on it. A device shared by several components is
split into stripes of their colours and outlined; a process on several accelerators is
joined by a line under its row, with a dot on each of its devices (a strided process's
dots skip devices). Hardware devices (robots) and whole-node processes are chips in the
last column. Each cell, chip, line and node label carries an SVG ``<title>``: component,
rank and the variables the worker gets (``RANK``, ``LOCAL_RANK``, the vendor's
visibility variable), plus NUMA node, CPUs and PCI bus where the inventory knows them.

Colours are Okabe and Ito's colour-blind-safe palette; past seven components they
repeat with a hatch. Every piece of user text is escaped.
"""

from __future__ import annotations

import json
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from placement_core._env import CPU_AFFINITY_ENV, HARDWARE_TYPE_ENV, VISIBILITY_ENV_VARS
from placement_core._inventory import Accelerator, Node
from placement_core._ranks import format_rank_list

from ._domains import domain_bands, renumbered_note
from ._grid import Fold, component_codes, device_name, fold_nodes, occupants_label
from ._held import HeldBy, held_cells, held_per_node
from ._memory_svg import memory_panel
from ._svg_base import (
    CELL_GAP,
    CELL_H,
    CHAR_W,
    FOLD_H,
    FONT,
    HATCH_ID,
    HEADER_H,
    LANE_H,
    MAX_LABEL,
    MAX_LANES,
    MAX_TIP_PROCESSES,
    PAD,
    PALETTE,
    ROW_GAP,
    Swatch,
    xml_escape,
)
from ._svg_base import number as _n
from ._text import hardware_numbers, node_kind, node_tag, plural, spares_block, summary

if TYPE_CHECKING:
    from placement_core._memory_check import MemoryReport
    from placement_core._plan import NodeOccupancy, Occupant, Plan

__all__ = ["PALETTE", "PlanPicture", "Swatch", "render_svg", "xml_escape"]


def _fit(label: str) -> str:
    return label if len(label) <= MAX_LABEL else label[: MAX_LABEL - 1] + "…"


def swatches(names: Sequence[str]) -> dict[str, Swatch]:
    """A swatch per component, in order."""
    codes = component_codes(names)
    return {
        name: Swatch(name, codes[name], f"k{i}", PALETTE[i % len(PALETTE)], i >= len(PALETTE))
        for i, name in enumerate(names)
    }


@dataclass(frozen=True, slots=True)
class _Link:
    component: str
    ranks: tuple[int, ...]
    ids: tuple[int, ...]
    columns: tuple[int, ...]
    lane: int


@dataclass(frozen=True, slots=True)
class _Chip:
    label: str
    occupants: tuple[Occupant, ...]
    attributes: str
    device: tuple[str, int] | None  # None: the node's whole-node processes


class PlanPicture:
    """The drawing of one plan, in parts that the SVG and HTML views put together.

    Args:
        plan: The plan to draw.
        max_nodes: Most node rows to draw; None draws every row (folds still apply).
        held_by: ``(node rank, accelerator index) -> job name`` of accelerators other
            jobs hold on the plan's nodes (``render._held``): greyed out, named.
    """

    def __init__(
        self, plan: Plan, *, max_nodes: int | None = None, held_by: HeldBy | None = None
    ) -> None:
        self.plan = plan
        self.held = held_per_node(plan, held_by)
        self.title = f"placement plan: {summary(plan)}"
        self.swatches = swatches(list(plan.components))
        self.codes = {name: s.code for name, s in self.swatches.items()}
        self.folded = fold_nodes(plan, max_nodes=max_nodes, held=self.held)
        self._numbers = hardware_numbers(plan)
        self._occupancy = plan.occupancy()
        self._nodes = plan.inventory.nodes
        self._groups: dict[int, list[str]] = {}
        for group in plan.config.node_groups:
            for rank in group.node_ranks:
                self._groups.setdefault(rank, []).append(group.label)
        drawn = [self._nodes[i] for i in self.folded.items if not isinstance(i, Fold)]
        self.columns = max(
            (len(held_cells(node, self.held.get(node.rank, {}))) for node in drawn), default=0
        )
        longest = max(
            (
                len(occupants_label(occupants, self.codes))
                for node in drawn
                for occupants in self._occupancy[node.rank].accelerators.values()
            ),
            default=1,
        )
        longest = max(longest, *(len(j) for h in self.held.values() for j in h.values()), 0)
        # Whole pixels keep the many coordinates short.
        self.cell_w = float(max(34, round(CHAR_W * min(longest, MAX_LABEL) + 10)))
        self.node_w = float(round(CHAR_W * max(4, len(str(len(self._nodes) - 1))) + 14))
        kinds = [len(node_kind(node) + node_tag(plan, node.rank)) for node in drawn]
        self.kind_w = float(round(CHAR_W * max(12, *kinds, 0) + 14))
        self.x_cells = PAD + self.node_w + self.kind_w
        self.x_extras = self.x_cells + self.columns * (self.cell_w + CELL_GAP) + 10
        extras = [
            sum(CHAR_W * len(chip.label) + 14 for chip in self._chips(self._occupancy[n.rank]))
            for n in drawn
        ]
        extras_w = max(CHAR_W * len("NODE-LEVEL / HARDWARE"), *extras, 0)
        self.width = self.x_extras + extras_w + PAD

    # -- pieces ---------------------------------------------------------------------

    def style(self) -> str:
        """The ``<style>`` element; every selector is scoped to ``.placement-plan``."""
        scope = ".placement-plan"
        rules = [
            f"{scope} text{{font-family:{FONT};font-size:12px;fill:#1a1a1a}}",
            f"{scope} .t{{font-size:15px;font-weight:bold}}",
            f"{scope} .h{{fill:#555;font-weight:bold}}",
            f"{scope} .m{{fill:#666;font-style:italic}}",
            f"{scope} .w{{fill:#8a4b00}}",
            f"{scope} .l{{text-anchor:middle;paint-order:stroke;stroke:#fff;"
            "stroke-width:3px;stroke-linejoin:round}",
            f"{scope} .free rect{{fill:#fff;stroke:#9a9a9a;stroke-dasharray:3 2}}",
            f"{scope} .o{{fill:none;stroke:#1a1a1a;stroke-width:2px}}",
            f"{scope} .u{{stroke:#1a1a1a;stroke-width:6px;stroke-linecap:round}}",
            f"{scope} .d{{stroke:#1a1a1a;stroke-width:1.5px}}",
            f"{scope} .tip:hover rect{{filter:brightness(1.08)}}",
        ]
        if self.held:
            rules.append(f"{scope} .held rect{{fill:#d9d9d9;stroke:#b0b0b0}}")
            rules.append(f"{scope} .held text{{fill:#6b6b6b}}")
        if self.plan.config.spare_nodes or self.plan.lost_nodes:
            rules.append(f"{scope} .lost .nodelabel text{{fill:#b00020}}")
            rules.append(f"{scope} .spare .nodelabel text{{fill:#0072B2;font-weight:bold}}")
            rules.append(f"{scope} .lost .rowband{{fill:#b00020;fill-opacity:.12}}")
            rules.append(f"{scope} .spare .rowband{{fill:#0072B2;fill-opacity:.12}}")
        for s in self.swatches.values():
            rules.append(f"{scope} .f{s.key[1:]}{{fill:{s.colour}}}")
        return "<style>" + "".join(rules) + "</style>"

    def defs(self) -> str:
        """The hatch pattern of components past the palette's length."""
        return (
            f'<defs><pattern id="{HATCH_ID}" width="6" height="6" '
            'patternUnits="userSpaceOnUse" patternTransform="rotate(45)">'
            '<rect width="2" height="6" fill="#1a1a1a" fill-opacity="0.45"/></pattern></defs>'
        )

    def header(self, y: float) -> list[str]:
        """The column titles (``NODE``, ``ACCELERATORS``, indices, ...) at height ``y``."""
        base = _n(y + 15)
        out = [
            f'<g class="colhead"><text class="h" x="{PAD}" y="{base}">NODE</text>',
            f'<text class="h" x="{_n(PAD + self.node_w)}" y="{base}">ACCELERATORS</text>',
        ]
        for col in range(self.columns):
            x = self.x_cells + col * (self.cell_w + CELL_GAP) + self.cell_w / 2
            out.append(f'<text class="h l" x="{_n(x)}" y="{base}">{col}</text>')
        out.append(
            f'<text class="h" x="{_n(self.x_extras)}" y="{base}">NODE-LEVEL / HARDWARE</text></g>'
        )
        return out

    def body(self, y: float) -> tuple[list[str], float]:
        """Every drawn row from height ``y``; returns the elements and the height used."""
        out: list[str] = ['<g class="rows">']
        top = y
        bands = domain_bands(self.plan)
        for item in self.folded.items:
            if not isinstance(item, Fold) and item in bands:
                y = self._band(bands[item], y, out)
            if isinstance(item, Fold):
                out.append(
                    f'<g class="fold tip" data-first="{item.first}" data-last="{item.last}">'
                    f'<text class="m" x="{PAD}" y="{_n(y + 12)}">⋮ {xml_escape(item.text)}</text>'
                    f"<title>{item.which} {'looks' if item.first == item.last else 'look'} "
                    "like the rows above and below "
                    "(the same components on the same devices); their ranks continue in order"
                    "</title></g>"
                )
                y += FOLD_H
            else:
                y = self._row(item, y, out)
        out.append("</g>")
        return out, y - top

    def _band(self, text: str, y: float, out: list[str]) -> float:
        """A domain's band: a rule across the grid and its label; returns the new y."""
        out.append(
            f'<g class="domain"><line x1="{PAD}" y1="{_n(y + 3)}" x2="{_n(self.width - PAD)}" '
            f'y2="{_n(y + 3)}" stroke="#6b4fa0" stroke-width="2"/>'
            f'<text class="h" x="{PAD}" y="{_n(y + 17)}" style="fill:#6b4fa0">'
            f"{xml_escape(text)}</text></g>"
        )
        return y + FOLD_H + 6

    def notes(self) -> list[str]:
        """Lines under the grid: renumbered nodes, nodes cut off, moves, spares, warnings."""
        renumbered = renumbered_note(self.plan)
        lines = [renumbered] if renumbered else []
        if self.folded.not_shown:
            lines.append(
                f"... {plural(self.folded.not_shown, 'more node')} not shown "
                "(--format table or json lists all)"
            )
        lines += [line for line in spares_block(self.plan) if line]
        lines += [f"warning: {warning}" for warning in self.plan.warnings]
        return lines

    def legend(self, y: float, width: float) -> tuple[list[str], float]:
        """Swatches of the components and the marks, wrapped to ``width``."""
        items: list[tuple[str, str]] = []
        for s in self.swatches.values():
            items.append(
                (self._swatch_rect(s.key, s.hatched, 0, 0, 14, 14), f"{s.code} = {s.name}")
            )
        if len(self.swatches) > 1:
            first, second = list(self.swatches.values())[:2]
            shared = (
                f'<rect class="f{first.key[1:]}" width="7" height="14"/>'
                f'<rect class="f{second.key[1:]}" x="7" width="7" height="14"/>'
                '<rect class="o" width="14" height="14"/>'
            )
            items.append((shared, "shared device (outlined, striped)"))
        items.append(('<g class="free"><rect width="14" height="14"/></g>', "free"))
        if self.held:
            jobs = sorted({job for held in self.held.values() for job in held.values()})
            items.append(
                (
                    '<g class="held"><rect width="14" height="14"/></g>',
                    f"held by another job ({', '.join(jobs)})",
                )
            )
        items.append(
            (
                '<line class="u" x1="2" y1="8" x2="14" y2="8"/>'
                '<line stroke="#fff" stroke-width="3.5" x1="2" y1="8" x2="14" y2="8"/>'
                '<circle class="d" cx="2" cy="8" r="3.5" fill="#fff"/>'
                '<circle class="d" cx="14" cy="8" r="3.5" fill="#fff"/>',
                "one process on several accelerators",
            )
        )
        if self.plan.lost_nodes:
            items.append(
                ('<g class="lost"><rect class="rowband" width="14" height="14"/></g>', "lost node")
            )
        if self.plan.config.spare_nodes or self.plan.lost_nodes:
            items.append(
                (
                    '<g class="spare"><rect class="rowband" width="14" height="14"/></g>',
                    "spare node",
                )
            )
        out = ['<g class="legend">']
        x, top = float(PAD), y
        for mark, text in items:
            w = 22 + CHAR_W * len(text) + 18
            if x + w > width - PAD and x > PAD:
                x, y = float(PAD), y + 20
            out.append(
                f'<g transform="translate({_n(x)},{_n(y)})">{mark}'
                f'<text x="22" y="12">{xml_escape(text)}</text></g>'
            )
            x += w
        out.append("</g>")
        return out, y + 20 - top

    # -- rows -----------------------------------------------------------------------

    def _row(self, rank: int, top: float, out: list[str]) -> float:
        node = self._nodes[rank]
        occupancy = self._occupancy[rank]
        links = self._links(node, occupancy)
        # Coordinates inside a row are relative to its top: shorter numbers, many rows.
        tag = node_tag(self.plan, rank)
        role = "" if not tag else " lost" if tag.startswith(" (lost") else " spare"
        out.append(f'<g class="node{role}" data-node="{rank}" transform="translate(0,{_n(top)})">')
        band = len(out)  # a lost or spare row gets a band behind all of it, sized below
        y = 0.0
        out.append(
            f'<g class="nodelabel tip"><text x="{PAD}" y="{_n(y + 16)}">{rank}</text>'
            f'<text x="{_n(PAD + self.node_w)}" y="{_n(y + 16)}">'
            f"{xml_escape(node_kind(node) + tag)}</text><title>{xml_escape(self._node_tip(node))}"
            "</title></g>"
        )
        for col, cell in enumerate(held_cells(node, self.held.get(rank, {}))):
            x = self.x_cells + col * (self.cell_w + CELL_GAP)
            if cell.job is not None or cell.accelerator is None:
                out.append(self._held_box(node, cell.index, cell.job or "", x, y))
                continue
            accelerator = cell.accelerator
            occupants = occupancy.accelerators.get(accelerator.index, ())
            out.append(
                self._box(
                    "acc",
                    x,
                    y,
                    self.cell_w,
                    occupants,
                    _fit(occupants_label(occupants, self.codes)),
                    self._accelerator_tip(node, accelerator, occupants),
                    f'data-index="{accelerator.index}"',
                )
            )
        for link in links:
            out.append(self._link(node, link, y))
        x = self.x_extras
        for chip in self._chips(occupancy):
            w = CHAR_W * len(chip.label) + 10
            tip = self._chip_tip(node, chip.device, chip.occupants)
            out.append(self._box("chip", x, y, w, chip.occupants, chip.label, tip, chip.attributes))
            x += w + 4
        out.append("</g>")
        lanes = max((link.lane + 1 for link in links), default=0)
        height = CELL_H + (lanes * LANE_H + 4 if lanes else 0)
        if role:
            out.insert(
                band,
                f'<rect class="rowband" x="0" y="-2" width="{_n(max(x, self.width))}" '
                f'height="{_n(height + 4)}"/>',
            )
        return top + height + ROW_GAP

    def _box(
        self,
        kind: str,
        x: float,
        y: float,
        w: float,
        occupants: Sequence[Occupant],
        label: str,
        tip: str,
        attributes: str,
    ) -> str:
        components = list(dict.fromkeys(c for c, _ in occupants))
        classes = [kind, "tip", *(self.swatches[c].key for c in components)]
        if len(components) > 1:
            classes.append("shared")
        if not components:
            classes.append("free")
        names = xml_escape(",".join(components))
        parts = [f'<g class="{" ".join(classes)}" {attributes} data-components="{names}">']
        if not components:
            parts.append(f'<rect x="{_n(x)}" y="{_n(y)}" width="{_n(w)}" height="{CELL_H}"/>')
        stripe = w / max(len(components), 1)
        for i, component in enumerate(components):
            s = self.swatches[component]
            parts.append(self._swatch_rect(s.key, s.hatched, x + i * stripe, y, stripe, CELL_H))
        if len(components) > 1:
            parts.append(
                f'<rect class="o" x="{_n(x + 1)}" y="{_n(y + 1)}" width="{_n(w - 2)}" '
                f'height="{CELL_H - 2}"/>'
            )
        if label:
            parts.append(
                f'<text class="l" x="{_n(x + w / 2)}" y="{_n(y + 16)}">{xml_escape(label)}</text>'
            )
        parts.append(f"<title>{xml_escape(tip)}</title></g>")
        return "".join(parts)

    def _held_box(self, node: Node, index: int, job: str, x: float, y: float) -> str:
        """An accelerator another job holds: grey, the job's name in it and its tip."""
        tip = f"node {node.rank} · accelerator {index}\nheld by job {job} (another job)"
        return (
            f'<g class="acc held tip" data-index="{index}" data-job="{xml_escape(job)}">'
            f'<rect x="{_n(x)}" y="{_n(y)}" width="{_n(self.cell_w)}" height="{CELL_H}"/>'
            f'<text class="l" x="{_n(x + self.cell_w / 2)}" y="{_n(y + 16)}">'
            f"{xml_escape(_fit(job))}</text><title>{xml_escape(tip)}</title></g>"
        )

    @staticmethod
    def _swatch_rect(key: str, hatched: bool, x: float, y: float, w: float, h: float) -> str:
        where = f'x="{_n(x)}" y="{_n(y)}" width="{_n(w)}" height="{_n(h)}"'
        rect = f'<rect class="f{key[1:]}" {where}/>'
        if hatched:
            rect += f'<rect {where} fill="url(#{HATCH_ID})"/>'
        return rect

    def _links(self, node: Node, occupancy: NodeOccupancy) -> list[_Link]:
        """Processes of this node on more than one accelerator, each given a lane."""
        column = {a.index: col for col, a in enumerate(node.accelerators)}
        groups: dict[tuple[str, tuple[int, ...]], list[int]] = {}
        for occupants in occupancy.accelerators.values():
            for component, rank in occupants:
                ids = self.plan.components[component][rank].hardware_ranks
                if len(ids) > 1:
                    ranks = groups.setdefault((component, ids), [])
                    if rank not in ranks:
                        ranks.append(rank)
        links: list[_Link] = []
        lane_ends: list[int] = []
        for (component, ids), ranks in sorted(
            groups.items(), key=lambda g: (min(column[i] for i in g[0][1]), g[0][0])
        ):
            columns = tuple(sorted(column[i] for i in ids))
            lane = next((k for k, end in enumerate(lane_ends) if end < columns[0]), None)
            if lane is None:
                if len(lane_ends) == MAX_LANES:
                    continue  # the cells' tooltips still name every accelerator
                lane = len(lane_ends)
                lane_ends.append(columns[-1])
            lane_ends[lane] = columns[-1]
            links.append(_Link(component, tuple(sorted(ranks)), ids, columns, lane))
        return links

    def _link(self, node: Node, link: _Link, y: float) -> str:
        s = self.swatches[link.component]
        cy = y + CELL_H + 4 + link.lane * LANE_H
        xs = [self.x_cells + c * (self.cell_w + CELL_GAP) + self.cell_w / 2 for c in link.columns]
        steps = {b - a for a, b in zip(link.ids, link.ids[1:], strict=False)}
        stride = f" (stride {steps.pop()})" if len(steps) == 1 and min(steps) > 1 else ""
        ranks = format_rank_list(list(link.ranks))
        who = f"{link.component} rank{'s' if len(link.ranks) > 1 else ''} {ranks}"
        tip = (
            f"node {node.rank}: {who} on accelerators {','.join(str(i) for i in link.ids)}{stride}"
        )
        dots = "".join(
            f'<circle class="d f{s.key[1:]}" cx="{_n(x)}" cy="{_n(cy)}" r="3.5"/>' for x in xs
        )
        return (
            f'<g class="link tip {s.key}" '
            f'data-components="{xml_escape(link.component)}">'
            f'<line class="u" x1="{_n(xs[0])}" y1="{_n(cy)}" x2="{_n(xs[-1])}" y2="{_n(cy)}"/>'
            f'<line stroke="{s.colour}" stroke-width="3.5" x1="{_n(xs[0])}" y1="{_n(cy)}" '
            f'x2="{_n(xs[-1])}" y2="{_n(cy)}"/>{dots}<title>{xml_escape(tip)}</title></g>'
        )

    def _chips(self, occupancy: NodeOccupancy) -> list[_Chip]:
        """The chips of a node's hardware devices and of its whole-node processes."""
        rank = occupancy.node_rank
        chips = [
            _Chip(
                f"{device_name(kind, index, rank, self._numbers)}: "
                f"{occupants_label(occupants, self.codes) or '.'}",
                occupants,
                f'data-kind="hardware" data-hardware="{xml_escape(kind)}" data-index="{index}"',
                (kind, index),
            )
            for (kind, index), occupants in sorted(occupancy.hardware.items())
        ]
        if occupancy.node:
            label = occupants_label(occupancy.node, self.codes)
            chips.append(_Chip(f"node: {label}", occupancy.node, 'data-kind="node"', None))
        return chips

    # -- tooltips -------------------------------------------------------------------

    def _node_tip(self, node: Node) -> str:
        facts = [f"node {node.rank} ({node.node_id})"]
        facts += [f"host {node.hostname}"] if node.hostname else []
        facts += [f"ip {node.ip}"] if node.ip else []
        lines = [", ".join(facts), node_kind(node)]
        if node.cpus is not None:
            lines[-1] += f", {plural(node.cpus, 'CPU')}"
        if node.hardware:
            kinds = dict.fromkeys(d.type for d in node.hardware)
            lines.append(
                "hardware: "
                + ", ".join(f"{sum(d.type == k for d in node.hardware)}x {k}" for k in kinds)
            )
        groups = self._groups.get(node.rank)
        if groups:
            lines.append("node groups: " + ", ".join(groups))
        tag = node_tag(self.plan, node.rank).strip(" ()")
        replaces = self.plan.spares().replaces.get(node.rank)
        if replaces is not None:
            tag += f": can replace {_replaced(replaces)}"
        if tag:
            lines.append(tag)
        return "\n".join(lines)

    def _accelerator_tip(
        self, node: Node, accelerator: Accelerator, occupants: Sequence[Occupant]
    ) -> str:
        lines = [
            f"node {node.rank} · accelerator {accelerator.index} · "
            f"{accelerator.model or accelerator.type}"
        ]
        known = []
        if accelerator.numa_node is not None:
            known.append(f"NUMA node {accelerator.numa_node}")
        if accelerator.cpu_affinity:
            known.append(f"CPUs {accelerator.cpu_affinity}")
        if accelerator.pci_bus_id:
            known.append(f"PCI {accelerator.pci_bus_id}")
        if known:
            lines.append(" · ".join(known))
        lines += self._process_lines(occupants) if occupants else ["free"]
        return "\n".join(lines)

    def _chip_tip(
        self, node: Node, device: tuple[str, int] | None, occupants: Sequence[Occupant]
    ) -> str:
        if device is None:
            lines = [f"node {node.rank} · whole-node processes"]
        else:
            kind, index = device
            name = device_name(kind, index, node.rank, self._numbers)
            lines = [f"node {node.rank} · {name} (device {index} of the node)"]
            lines += [
                _short_json(d.config)
                for d in node.hardware
                if (d.type, d.index) == device and d.config
            ]
        by_component: dict[str, list[int]] = {}
        for component, rank in occupants:
            by_component.setdefault(component, []).append(rank)
        lines += [
            f"{component}: {plural(len(ranks), 'process')}, ranks {format_rank_list(ranks)}"
            for component, ranks in by_component.items()
        ]
        lines += self._process_lines(occupants) if occupants else ["free"]
        return "\n".join(lines)

    def _process_lines(self, occupants: Sequence[Occupant]) -> list[str]:
        lines = [self._process(c, r) for c, r in occupants[:MAX_TIP_PROCESSES]]
        if len(occupants) > MAX_TIP_PROCESSES:
            lines.append(f"… and {plural(len(occupants) - MAX_TIP_PROCESSES, 'more process')}")
        return lines

    def _process(self, component: str, rank: int) -> str:
        p = self.plan.components[component][rank]
        env = [f"RANK={p.rank}", f"LOCAL_RANK={p.device_index}"]
        visibility = VISIBILITY_ENV_VARS.get((p.accelerator_type or "").lower())
        if p.visible_accelerators and visibility is not None:
            env.append(f"{visibility.env_var}={visibility.value(p.visible_accelerators)}")
        if p.hardware_type is not None:
            env.append(f"{HARDWARE_TYPE_ENV}={p.hardware_type}")
        if p.cpus is not None:
            env.append(f"{CPU_AFFINITY_ENV}={p.cpus}")
        where = ""
        if p.hardware_type is None and len(p.hardware_ranks) > 1:
            link = f"; link {p.link}" if p.link else ""
            where = f" (accelerators {','.join(str(i) for i in p.hardware_ranks)}{link})"
        return f"{component} rank {rank}{where}: {' '.join(env)}"


def _short_json(config: object, limit: int = 120) -> str:
    text = json.dumps(config, default=str, separators=(", ", ": "))
    return text if len(text) <= limit else text[: limit - 1] + "…"


def render_svg(
    plan: Plan,
    *,
    max_nodes: int | None = None,
    memory: MemoryReport | None = None,
    held_by: HeldBy | None = None,
) -> str:
    """Draw the plan as one standalone SVG document.

    Args:
        plan: The plan to draw.
        max_nodes: Most node rows to draw (a note says how many were left out); None
            draws every row. Runs of same-looking nodes are folded either way.
        memory: A memory check (docs/concepts/will-it-fit.md): a panel under the grid
            draws a stacked bar per kind of GPU per phase, bytes on hover.
        held_by: ``(node rank, accelerator index) -> job name`` of accelerators other
            jobs hold on the plan's nodes: greyed out in their index's place, the job's
            name in the cell and its tooltip, and a legend entry.

    Returns:
        The SVG, ending with a newline.

    Raises:
        PlacementRuleError: ``held_by`` names a node outside the plan, a bad job name or
            an accelerator the plan uses.
    """
    picture = PlanPicture(plan, max_nodes=max_nodes, held_by=held_by)
    width = max(picture.width, CHAR_W * 1.25 * len(picture.title) + 2 * PAD, 560.0)
    out = [picture.style(), picture.defs(), '<rect width="100%" height="100%" fill="#fff"/>']
    out.append(f'<text class="t" x="{PAD}" y="{PAD + 14}">{xml_escape(picture.title)}</text>')
    legend, height = picture.legend(PAD + 26, width)
    out += legend
    y = PAD + 26 + height + 6
    out += picture.header(y)
    body, height = picture.body(y + HEADER_H)
    out += body
    y += HEADER_H + height + 6
    if memory is not None:
        panel, height = memory_panel(memory, picture.swatches, y, width)
        out += panel
        y += height + 6
    chars = max(40, int((width - 2 * PAD) / CHAR_W))
    for note in picture.notes():
        for line in textwrap.wrap(note, chars) or [""]:
            out.append(f'<text class="w" x="{PAD}" y="{_n(y + 12)}">{xml_escape(line)}</text>')
            y += 16
    height = y + PAD
    head = (
        f'<svg xmlns="http://www.w3.org/2000/svg" class="placement-plan" '
        f'width="{_n(width)}" height="{_n(height)}" viewBox="0 0 {_n(width)} {_n(height)}" '
        f'role="img" aria-label="{xml_escape(picture.title)}">'
        f"<title>{xml_escape(picture.title)}</title>"
    )
    return head + "\n".join(out) + "\n</svg>\n"


#: The last texts of ``_replaced``, by the very tuple they describe.
_REPLACED: list[tuple[tuple[int, ...], str]] = []


def _replaced(replaces: tuple[int, ...]) -> str:
    """What a spare can replace, as text. Spares of one profile share the tuple: a
    thousand spares over a hundred thousand nodes format it once (found by identity,
    never hashed)."""
    for seen, text in _REPLACED:
        if seen is replaces:
            return text
    text = f"nodes {format_rank_list(replaces)}" if replaces else "no used node"
    _REPLACED[:] = [(replaces, text), *_REPLACED[:7]]
    return text
