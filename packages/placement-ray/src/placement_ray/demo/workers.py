"""Small actor classes the demo (and the tests) start: each says what it really sees."""

from __future__ import annotations

import os
import socket
from typing import Any

__all__ = ["DemoEngine", "DemoTrainer", "DemoWorker"]


def _rank() -> int:
    return int(os.environ.get("RANK", "-1"))


class DemoWorker:
    """A worker that answers with its rank and environment."""

    def __init__(self, label: str = "") -> None:
        self.label = label
        self.calls = 0

    def ping(self, value: Any = None) -> tuple[int, Any]:
        """``(RANK, value)``: shows which rank answered, in what order."""
        self.calls += 1
        return _rank(), value

    def getenv(self, name: str) -> str | None:
        """One environment variable as the worker sees it."""
        return os.environ.get(name)

    def bind_master(self) -> tuple[int, int, bool]:
        """What ``init_process_group`` does with the master port: rank 0 binds it.

        Every rank asks ``hand_over_master_port()``; rank 0 releases the port it holds
        and binds it at once (as a TCPStore would), the others just read ``MASTER_PORT``.

        Returns:
            ``(RANK, port, whether this rank bound it)``.
        """
        from placement_ray import hand_over_master_port

        port = hand_over_master_port()
        if _rank() != 0:
            return _rank(), port, False
        with socket.socket() as store:
            store.bind((os.environ["MASTER_ADDR"], port))
            store.listen(1)
        return _rank(), port, True

    def fail(self, rank: int) -> int:
        """Raise on ``rank`` only (to show how failures are reported)."""
        if _rank() == rank:
            raise ValueError(f"rank {rank} was asked to fail")
        return _rank()


class DemoTrainer(DemoWorker):
    """slime's train-actor calls, each answering ``(RANK, step)``."""

    def init(self, step: int = 0) -> tuple[int, int]:
        self.step = step
        return _rank(), self.step

    def train(self, rollout_id: int = 0) -> tuple[int, int]:
        self.step = getattr(self, "step", 0) + 1
        return _rank(), self.step

    def eval(self, rollout_id: int = 0) -> tuple[int, int]:
        return _rank(), getattr(self, "step", 0)

    def save(self, rollout_id: int = 0) -> tuple[int, int]:
        return _rank(), getattr(self, "step", 0)

    def update_weights(self) -> tuple[int, int]:
        return _rank(), getattr(self, "step", 0)

    def offload(self) -> tuple[int, str]:
        return _rank(), "offloaded"

    def onload(self) -> tuple[int, str]:
        return _rank(), "onloaded"


class DemoEngine(DemoWorker):
    """A stand-in for a rollout engine (an SGLang server would start here)."""

    def server_args(self) -> dict[str, str | None]:
        """What the engine would pass to its server."""
        return {
            "CUDA_VISIBLE_DEVICES": os.environ.get("CUDA_VISIBLE_DEVICES"),
            "dist_init_addr": os.environ.get("PLACEMENT_DIST_INIT_ADDR"),
        }
