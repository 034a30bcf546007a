"""The ``table`` view: each component's processes with node, resources and local rank."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

from placement_core._hardware import FROM_NODE_KEY
from placement_core._ranks import format_rank_list, parse_rank_list
from placement_core._records import Placement
from placement_core._topology_plan import inventory_has_topology

from ._text import (
    HardwareNumbers,
    align,
    hardware_numbers,
    plural,
    ranks,
    spares_block,
    summary,
    warnings_block,
)

if TYPE_CHECKING:
    from placement_core._plan import Plan

__all__ = ["render_table"]

HEADER = ("RANK", "NODE", "RESOURCES", "VISIBLE", "LOCAL", "LOCAL_RANK", "GROUP")
#: Extra columns when the inventory carries topology (node snapshots).
TOPOLOGY_HEADER = ("LINK", "NUMA", "CPUS")


def render_table(plan: Plan, *, fold: bool = True) -> str:
    """Render every component's placements as aligned columns.

    Each component's heading names the components it shares accelerators or devices
    with (``shares resources with rollout, reward``). One row per process: rank, node
    rank, the resources it holds (accelerator ids, ``Franka #1`` for hardware, numbered as
    its node group's rules count it, ``node`` for a whole-node process), the accelerators
    it may see, ``LOCAL``: its index among the component's processes on that node out of
    their count, ``LOCAL_RANK``: the value of that variable in its environment (the
    device index to use inside the process, -1 without accelerators), and the node group.

    Args:
        plan: The plan.
        fold: Fold runs of consecutive ranks on one node into one row: processes sharing
            the same resources (100 agents on one node: ``LOCAL 0-99/100``) and
            processes on successive equal blocks of resources (``0-7 (1 each)``; VISIBLE
            ``own`` when each process sees only its own). False lists every process.

    When the inventory carries topology (node snapshots), three more columns give each
    process's worst accelerator link, its NUMA node and its CPUs (for a folded row, the
    CPUs its processes split between them, ``0-31 (16 each)`` where the shares are
    disjoint and equal); rows fold only over equal links and NUMA nodes.
    """
    topology = inventory_has_topology(plan.inventory)
    lines = [f"plan: {summary(plan)}", *spares_block(plan)]
    numbers = hardware_numbers(plan)
    sharing = plan.sharing()
    for name, placements in plan.components.items():
        rule = plan.config.components()[name]
        lines += [
            "",
            f"{name}: {plural(len(placements), 'process')} on {','.join(rule.node_groups)} "
            f"(placement {rule.placement!r}"
            + (f", stride {rule.stride})" if rule.stride > 1 else ")"),
        ]
        if sharing[name]:
            lines.append(f"  shares resources with {', '.join(sharing[name])} (time-shared)")
        lines += _from_node_lines(plan, name, placements, numbers)
        header = HEADER + TOPOLOGY_HEADER if topology else HEADER
        rows = [header, *(_row(run, numbers, topology) for run in _runs(placements, fold))]
        lines += align(rows, indent="  ")
    lines += warnings_block(plan)
    return "\n".join(lines) + "\n"


def _from_node_lines(
    plan: Plan, name: str, placements: Sequence[Placement], numbers: HardwareNumbers
) -> list[str]:
    """One line per device whose settings are read on its node at run time."""
    lines: list[str] = []
    for p in placements:
        if p.hardware_type is None:
            continue
        configs = plan.hardware_configs(name, p.rank)
        for index, config in zip(p.hardware_ranks, configs, strict=True):
            number = numbers[p.node_rank, p.hardware_type.casefold(), index]
            for field, variable in dict(config.get(FROM_NODE_KEY) or {}).items():
                lines.append(
                    f"  {p.hardware_type} #{number} on node {p.node_rank}: {field} from the "
                    f"node ({variable} at run time)"
                )
    return lines


def _resources(placement: Placement, numbers: HardwareNumbers) -> str:
    if placement.hardware_type is not None:
        return f"{placement.hardware_type} #{format_rank_list(_numbered(placement, numbers))}"
    if not placement.hardware_ranks:
        return "node"
    return format_rank_list(placement.hardware_ranks)


def _same_slot(a: Placement, b: Placement) -> bool:
    """b is the next rank on exactly a's resources (processes sharing them)."""
    return (
        b.rank == a.rank + 1
        and b.node_rank == a.node_rank
        and b.local_rank == a.local_rank + 1
        and b.hardware_ranks == a.hardware_ranks
        and b.hardware_type == a.hardware_type
        and b.visible_accelerators == a.visible_accelerators
        and b.node_group == a.node_group
    )


def _contiguous(ids: tuple[int, ...]) -> bool:
    return bool(ids) and ids == tuple(range(ids[0], ids[0] + len(ids)))


def _next_block(a: Placement, b: Placement) -> bool:
    """b is the next rank on the next block of as many contiguous resources as a's."""
    if not (
        b.rank == a.rank + 1
        and b.node_rank == a.node_rank
        and b.local_rank == a.local_rank + 1
        and b.hardware_type == a.hardware_type
        and b.node_group == a.node_group
        and b.isolate_accelerator == a.isolate_accelerator
        and _contiguous(a.hardware_ranks)
        and len(b.hardware_ranks) == len(a.hardware_ranks)
        and b.hardware_ranks[0] == a.hardware_ranks[-1] + 1
        and _contiguous(b.hardware_ranks)
    ):
        return False
    own = a.visible_accelerators == a.hardware_ranks and b.visible_accelerators == b.hardware_ranks
    return own or a.visible_accelerators == b.visible_accelerators


def _same_topology(a: Placement, b: Placement) -> bool:
    return a.link == b.link and a.numa_node == b.numa_node


def _continues(run: list[Placement], placement: Placement) -> bool:
    if len(run) == 1:
        return _same_slot(run[-1], placement) or _next_block(run[-1], placement)
    if run[0].hardware_ranks == run[1].hardware_ranks:
        return _same_slot(run[-1], placement)
    return _next_block(run[-1], placement)


def _runs(placements: Sequence[Placement], fold: bool) -> Iterator[list[Placement]]:
    """Runs of consecutive ranks that one row can describe."""
    if not placements:
        return
    run = [placements[0]]
    for placement in placements[1:]:
        if fold and _same_topology(run[-1], placement) and _continues(run, placement):
            run.append(placement)
        else:
            yield run
            run = [placement]
    yield run


def _span(a: int, b: int) -> str:
    return str(a) if a == b else f"{a}-{b}"


def _numbered(placement: Placement, numbers: HardwareNumbers) -> tuple[int, ...]:
    """A hardware placement's devices as its node group numbers them."""
    kind = (placement.hardware_type or "").casefold()
    return tuple(numbers[placement.node_rank, kind, i] for i in placement.hardware_ranks)


def _row(run: list[Placement], numbers: HardwareNumbers, topology: bool) -> tuple[str, ...]:
    first, last = run[0], run[-1]
    resources, visible = _resources(first, numbers), ranks(first.visible_accelerators)
    if len(run) > 1 and first.hardware_ranks != last.hardware_ranks:
        each = len(first.hardware_ranks)
        resources = f"{_resources_span(first, last, numbers)} ({each} each)"
        if first.visible_accelerators == first.hardware_ranks:
            visible = "own"
    row = (
        _span(first.rank, last.rank),
        str(first.node_rank),
        resources,
        visible,
        f"{_span(first.local_rank, last.local_rank)}/{first.local_world_size}",
        format_rank_list(sorted({p.device_index for p in run})),
        first.node_group,
    )
    if not topology:
        return row
    return (
        *row,
        first.link or "-",
        "-" if first.numa_node is None else str(first.numa_node),
        _cpus(run),
    )


def _cpus(run: list[Placement]) -> str:
    """The CPUs of a row: for a folded row, those its processes split, with ``(n each)``
    where each holds a disjoint share of the same size."""
    shares = [parse_rank_list(p.cpus) for p in run if p.cpus]
    union = sorted({c for share in shares for c in share})
    if not union:
        return "-"
    sizes = {len(share) for share in shares}
    if len(shares) > 1 and len(sizes) == 1 and len(union) == sum(map(len, shares)):
        return f"{format_rank_list(union)} ({sizes.pop()} each)"
    return format_rank_list(union)


def _resources_span(first: Placement, last: Placement, numbers: HardwareNumbers) -> str:
    if first.hardware_type:
        low, high = _numbered(first, numbers)[0], _numbered(last, numbers)[-1]
        return f"{first.hardware_type} #{_span(low, high)}"
    return _span(first.hardware_ranks[0], last.hardware_ranks[-1])
