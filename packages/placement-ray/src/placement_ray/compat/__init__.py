"""Drop-in entry points for code written against other frameworks' placement APIs.

``placement_ray.compat.slime.create_placement_groups(args)`` takes slime's own ``args``
and returns slime's own dict, so a slime job switches with one import.
``placement_ray.compat.verl`` (verl's resource pools) and ``placement_ray.compat.openrlhf``
(OpenRLHF's actor groups and vLLM engines) subclass and wrap those frameworks' own code:
they import verl or OpenRLHF, so import them only where that framework is installed.
"""

from __future__ import annotations

__all__: list[str] = []
