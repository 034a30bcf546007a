"""The demo (``python -m placement_ray.demo``) and the small worker classes it starts."""

from __future__ import annotations
