"""The ``component_placement`` rule language: parsing and resolution.

See docs/concepts/placement-language.md.

A rule such as ``"0-1:0-3,3-5,7-10:7-14"`` names resource ranks of a resource space and
the process ranks placed on them. :func:`parse_rule` checks the text (and everything that
needs no resource space); :func:`resolve_rule` maps it onto a
:class:`~placement_core.ResourceSpace`. The two live in separate private modules
(the config checks need the grammar, not the resource spaces); this module is their
public face.
"""

from __future__ import annotations

from ._rule_grammar import Rule, Segment, parse_rule
from ._rule_resolve import Entry, resolve_rule

__all__ = ["Entry", "Rule", "Segment", "parse_rule", "resolve_rule"]
