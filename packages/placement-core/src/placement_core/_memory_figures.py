"""Each component's bytes on one of its GPUs and on its node's host, from its estimator.

A trainer's figure is its estimator's own (Megatron's most loaded shard, DeepSpeed's per
GPU and per node figures) for the component's GPU count in the plan; a rollout engine
reserves its fraction of the GPU; a fixed component its bytes. The per-process overhead
is kept apart (``other``).
"""

from __future__ import annotations

from dataclasses import dataclass

from ._errors import ConfigError, Problem
from ._memory_config import MEMORY_KEY, ComponentMemory
from ._memory_megatron import megatron_memory
from ._memory_zero3 import zero3_memory
from ._problems import Issues

__all__ = ["Figures", "component_figures"]


@dataclass(frozen=True, slots=True)
class Figures:
    """One process of a component on one GPU.

    Attributes:
        weights_and_optimizer: A trainer's weights, gradients and optimizer states; a
            rollout engine's or a fixed component's whole reservation.
        activations: A trainer's activations; 0 for the others.
        other: The per-process overhead (CUDA context, NCCL buffers).
        host_per_node: Host bytes per node the estimator itself counts (ZeRO-3's CPU
            offload), whether or not ``offload`` is set.
        offloaded_to_host: Host bytes per GPU while offloaded (``offload: true``): a
            trainer's or fixed component's states; 0 for rollout engines, which discard
            their weights and KV cache and reload them.
    """

    weights_and_optimizer: int
    activations: int
    other: int
    host_per_node: int = 0
    offloaded_to_host: int = 0

    @property
    def resident(self) -> int:
        """Bytes on the GPU while the component is active or resident."""
        return self.weights_and_optimizer + self.activations + self.other


def _trainer(component: ComponentMemory, gpus: int, gpus_per_node: int) -> tuple[int, int, int]:
    try:
        if component.entry.estimator == "megatron":
            memory = megatron_memory(component.trainer, gpus=gpus)
        else:
            memory = zero3_memory(component.trainer, gpus=gpus, gpus_per_node=gpus_per_node)
    except Issues as error:
        path = f"{MEMORY_KEY}.{component.name}"
        raise ConfigError(
            [Problem(f"{path}{where}", message, value) for where, message, value in error.issues]
        ) from None
    return memory.weights_and_optimizer_bytes, memory.activation_bytes, memory.host_bytes_per_node


def component_figures(
    component: ComponentMemory,
    *,
    capacity: int,
    gpus: int,
    gpus_per_node: int,
    cache: dict[tuple[str, int], Figures] | None = None,
) -> Figures:
    """One process of ``component`` on a GPU of ``capacity`` bytes.

    Args:
        component: The component's memory entry.
        capacity: The GPU's memory (rollout engines reserve a fraction of it).
        gpus: The component's GPUs in the plan (a trainer's data parallel size follows).
        gpus_per_node: The most of its GPUs on one node.
        cache: Figures already computed, by ``(component, capacity)``.

    Raises:
        ConfigError: The trainer's sizes do not divide its GPUs (path ``memory.NAME``).
    """
    key = (component.name, capacity)
    if cache is not None and key in cache:
        return cache[key]
    entry = component.entry
    other = entry.overhead_bytes
    if entry.estimator in ("megatron", "zero3"):
        weights, activations, host = _trainer(component, gpus, gpus_per_node)
        figures = Figures(weights, activations, other, host, weights)
    elif entry.estimator == "fixed":
        assert entry.bytes is not None
        figures = Figures(entry.bytes, 0, other, 0, entry.bytes)
    else:
        fraction = entry.mem_fraction_static or entry.gpu_memory_utilization
        assert fraction is not None
        figures = Figures(int(capacity * fraction), 0, other)
    if cache is not None:
        cache[key] = figures
    return figures
