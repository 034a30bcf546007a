"""Drop-in entry points for code written against other frameworks' placement APIs.

``placement_ray.compat.slime.create_placement_groups(args)`` takes slime's own ``args``
and returns slime's own dict, so a slime job switches with one import.
"""

from __future__ import annotations

__all__: list[str] = []
