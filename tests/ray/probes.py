"""An actor class for the node-loss tests: what a worker sees from inside, and the
environments re-announced to it."""

from __future__ import annotations

import os
from typing import Any

import ray

WATCHED = (
    "RANK",
    "LOCAL_RANK",
    "WORLD_SIZE",
    "LOCAL_WORLD_SIZE",
    "CUDA_VISIBLE_DEVICES",
    "GROUP_VAR",
    "MASTER_ADDR",
    "MASTER_PORT",
    "PLACEMENT_DIST_INIT_ADDR",
)
"""The variables a probe reports (None for those not set)."""


class Probe:
    """Reports what it sees from inside; remembers re-announced environments."""

    def __init__(self) -> None:
        self.announced: list[dict[str, str]] = []

    def seen(self) -> dict[str, Any]:
        return {
            "pid": os.getpid(),
            "node_id": ray.get_runtime_context().get_node_id(),
            "env": {k: os.environ.get(k) for k in WATCHED},
        }

    def placement_env_changed(self, env: dict[str, str]) -> None:
        self.announced.append(env)

    def announcements(self) -> list[dict[str, str]]:
        return self.announced
