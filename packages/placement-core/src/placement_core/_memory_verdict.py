"""The words of a memory refusal: where it does not fit, by how much, and what would help."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from ._memory_check import ComponentUse, GpuGroup, HostGroup, MemoryReport, PhaseUse
from ._memory_config import MEMORY_KEY, MemorySpec
from ._memory_units import format_bytes
from ._ranks import format_rank_list

__all__ = ["refusal"]

#: Groups and hosts spelt out in one refusal; the rest are counted.
MAX_SHOWN = 5


def plural(count: int, noun: str) -> str:
    # The renderers' helper is not imported: importing the package loads no renderer.
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def _where(group: GpuGroup) -> str:
    nodes, gpus = group.nodes, group.indices
    where = (
        f"node {format_rank_list(nodes)}" if len(nodes) == 1 else f"nodes {format_rank_list(nodes)}"
    )
    where += (
        f", GPU {format_rank_list(gpus)}" if len(gpus) == 1 else f", GPUs {format_rank_list(gpus)}"
    )
    if group.count > 1:
        where += f" ({group.count} GPUs alike)"
    return where


def _use(name: str, use: ComponentUse) -> str:
    state = "active" if use.active else ("resident" if use.weights_and_optimizer else "offloaded")
    parts = []
    if use.weights_and_optimizer:
        parts.append(f"weights and optimizer {format_bytes(use.weights_and_optimizer)}")
    if use.activations:
        parts.append(f"activations {format_bytes(use.activations)}")
    parts.append(f"other {format_bytes(use.other)}")
    return f"{name} {format_bytes(use.bytes)} {state} ({', '.join(parts)})"


def _suggestions(phase: PhaseUse, spec: MemorySpec) -> Iterator[str]:
    active = [name for name, use in phase.components.items() if use.active]
    for name, use in phase.components.items():
        component = spec.components[name]
        entry, fields = component.entry, component.fields
        path = f"{MEMORY_KEY}.{name}"
        if not use.active and not entry.offload:
            yield f"offload {name} while {', '.join(active)} runs ({path}.offload: true)"
        if entry.estimator == "megatron" and use.active:
            yield (
                f"more tensor or pipeline parallelism for {name} "
                f"({path}.tensor_model_parallel_size, pipeline_model_parallel_size)"
            )
            if not fields.get("use_distributed_optimizer"):
                yield (
                    f"the distributed optimizer for {name} ({path}.use_distributed_optimizer: true)"
                )
        elif entry.estimator == "zero3" and use.active and not fields.get("cpu_offload"):
            yield f"CPU offload of the optimizer for {name} ({path}.cpu_offload: true)"
        elif entry.estimator == "sglang":
            yield f"a lower mem_fraction_static for {name} ({path}.mem_fraction_static)"
        elif entry.estimator == "vllm":
            yield f"a lower gpu_memory_utilization for {name} ({path}.gpu_memory_utilization)"


def _group_lines(group: GpuGroup, spec: MemorySpec) -> Iterator[str]:
    for phase in group.phases:
        if phase.fits:
            continue
        uses = "; ".join(_use(name, use) for name, use in phase.components.items())
        usable = (
            f"{format_bytes(group.usable_bytes)} usable of "
            if group.usable_bytes != group.capacity_bytes
            else ""
        )
        yield (
            f"{_where(group)}, phase {phase.name}: {format_bytes(phase.total_bytes)} > "
            f"{usable}{format_bytes(group.capacity_bytes)} capacity: {uses}"
        )
        helps = list(dict.fromkeys(_suggestions(phase, spec)))
        if helps:
            yield f"  to make it fit: {'; or '.join(helps)}"


def _host_line(host: HostGroup) -> str:
    uses = ", ".join(f"{name} {format_bytes(size)}" for name, size in host.components.items())
    assert host.capacity_bytes is not None
    nodes = format_rank_list(host.nodes)
    return (
        f"node{'s' if len(host.nodes) > 1 else ''} {nodes} host memory: "
        f"{format_bytes(host.total_bytes)} > "
        f"{format_bytes(host.capacity_bytes)} capacity ({uses}); to make it fit: fewer "
        "offloaded components on the node, ZeRO-3 without cpu_offload_params, or nodes "
        "with more memory"
    )


def _capped(lines: Iterable[list[str]], what: str) -> Iterator[str]:
    items = list(lines)
    for item in items[:MAX_SHOWN]:
        yield from item
    if len(items) > MAX_SHOWN:
        yield f"... and {plural(len(items) - MAX_SHOWN, what)} more"


def refusal(report: MemoryReport) -> str:
    """Why ``report`` does not fit, one line per kind of GPU or host over capacity."""
    groups = [g for g in report.groups if not g.fits]
    hosts = [h for h in report.host_groups if not h.fits]
    over = sum(g.count for g in groups)
    head = []
    if over:
        head.append(plural(over, "GPU"))
    if hosts:
        head.append(plural(sum(len(h.nodes) for h in hosts), "host"))
    lines = [f"will not fit: {' and '.join(head)} over capacity"]
    lines += _capped(([*_group_lines(g, report.spec)] for g in groups), "kind of GPU")
    lines += _capped(([_host_line(h)] for h in hosts), "kind of host")
    return "\n  ".join(lines)
