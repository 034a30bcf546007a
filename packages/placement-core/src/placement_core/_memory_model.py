"""What a trainer memory estimator returns: bytes per GPU and per host.

Both trainer estimators (Megatron-LM's theoretical memory model in
:mod:`._memory_megatron`, DeepSpeed's ZeRO-3 model-states estimate in
:mod:`._memory_zero3`) return one :class:`TrainerMemory`. See
docs/concepts/memory-estimators.md for how each figure is computed.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["GIB", "TrainerMemory"]

GIB = 1024**3


@dataclass(frozen=True, slots=True)
class TrainerMemory:
    """One trainer component's memory, as its reference estimator computes it.

    Attributes:
        weights_and_optimizer_bytes: Weights, gradients and optimizer states on the most
            loaded GPU (Megatron's most loaded model shard; DeepSpeed's per-GPU figure,
            which also holds the largest layer's gathered parameters).
        activation_bytes: Activations on the most loaded GPU (Megatron's first pipeline
            stage); 0 for ZeRO-3, which DeepSpeed's estimator does not model.
        host_bytes_per_node: Host memory per node (DeepSpeed's per-node CPU figure);
            0 for Megatron, whose model keeps nothing in host memory.
        breakdown: Named parts of the GPU figures, in bytes; they add up to
            ``weights_and_optimizer_bytes + activation_bytes``.
    """

    weights_and_optimizer_bytes: int
    activation_bytes: int
    host_bytes_per_node: int
    breakdown: tuple[tuple[str, int], ...]

    @property
    def gpu_bytes(self) -> int:
        """Everything the estimator puts on the most loaded GPU."""
        return self.weights_and_optimizer_bytes + self.activation_bytes
