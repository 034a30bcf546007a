"""Workers the compat tests start through verl's and OpenRLHF's own code: each reports
its rank and what it sees (importable by name in Ray's worker processes: the conftest puts
this folder on ``PYTHONPATH``)."""

from __future__ import annotations

import os
from typing import Any

import ray
from openrlhf.trainer.ray.launcher import BaseDistributedActor
from verl.single_controller.base import Worker
from verl.single_controller.base.decorator import Dispatch, register


def _seen() -> dict[str, Any]:
    ctx = ray.get_runtime_context()
    return {
        "node_id": ctx.get_node_id(),
        "ip": ray.util.get_node_ip_address(),
        "visible": os.environ.get("CUDA_VISIBLE_DEVICES", ""),
        "rank": int(os.environ.get("RANK", "-1")),
        "world_size": int(os.environ.get("WORLD_SIZE", "-1")),
        "node_rank_label": os.environ.get("PLACEMENT_NODE_RANK", ""),
    }


class VerlProbe(Worker):  # type: ignore[misc]
    """A verl worker that only reports."""

    @register(dispatch_mode=Dispatch.ONE_TO_ALL)
    def seen(self) -> dict[str, Any]:
        return {**_seen(), "worker_rank": self.rank}


class OpenRLHFProbe(BaseDistributedActor):  # type: ignore[misc]
    """An OpenRLHF model actor that only reports."""

    def seen(self) -> dict[str, Any]:
        return {**_seen(), "worker_rank": self._rank}


class EngineProbe:
    """Stands in for OpenRLHF's vLLM engine actor: reports its bundles and where it runs."""

    def __init__(self, **kwargs: Any) -> None:
        self.bundle_indices = kwargs.get("bundle_indices")

    def seen(self) -> dict[str, Any]:
        return {**_seen(), "bundle_indices": self.bundle_indices}
