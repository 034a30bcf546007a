"""The pieces every SVG drawing of a plan shares: palette, sizes, escaping, swatches.

Kept apart from ``_svg`` so the panels it draws (``_memory_svg``) import them without
importing the picture that draws them.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass

__all__ = ["PALETTE", "Swatch", "xml_escape"]

#: Okabe & Ito's colour-blind-safe colours (black left out: labels are drawn on them).
PALETTE = ("#E69F00", "#56B4E9", "#009E73", "#F0E442", "#0072B2", "#D55E00", "#CC79A7")
FONT = "ui-monospace, 'DejaVu Sans Mono', 'Liberation Mono', Menlo, Consolas, monospace"
CHAR_W = 7.3  # advance of one 12px monospace character
CELL_H = 24
CELL_GAP = 2
LANE_H = 8
MAX_LANES = 4
ROW_GAP = 6
FOLD_H = 18
HEADER_H = 22
PAD = 12
MAX_LABEL = 14
MAX_TIP_PROCESSES = 6
HATCH_ID = "placement-plan-hatch"

_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def xml_escape(text: str) -> str:
    """Text made safe inside an XML or HTML element or a double-quoted attribute.

    >>> xml_escape('<script>"&')
    '&lt;script&gt;&quot;&amp;'
    """
    return html.escape(_NOT_XML.sub("\ufffd", text), quote=True)


def number(value: float) -> str:
    return format(round(value, 1), "g")


@dataclass(frozen=True, slots=True)
class Swatch:
    """How one component is drawn.

    Attributes:
        name: The component.
        code: Its short code in cell labels (the map's).
        key: Its CSS class (``k0``, ``k1``, ...), safe whatever the name.
        colour: Fill colour.
        hatched: Whether a hatch tells it apart from an earlier component of its colour.
    """

    name: str
    code: str
    key: str
    colour: str
    hatched: bool
