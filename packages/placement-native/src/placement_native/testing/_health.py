"""Fabric health for fake GPUs: NVML's health mask built field by field, and trays whose
fabric is degraded.

The mask's fields are those of ``nvml.h`` (``NVML_GPU_FABRIC_HEALTH_MASK_SHIFT_*``):
degraded bandwidth (bits 0-1), route recovery (2-3), route unhealthy (4-5), access
timeout recovery (6-7), each 0 not supported, 1 true, 2 false; and the incorrect
configuration (bits 8-11): 0 not supported, 1 none, 2 incorrect system GUID, 3
incorrect chassis serial number, 4 no partition, 5 insufficient NVLinks.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from placement_native.errors import FakeTopologyError

from ._machines import gb200_nvl72_tray
from ._topology import FakeFabric, FakeGpu, Topology

__all__ = ["CONFIGURATIONS", "degraded_tray", "health_mask"]

_TWO_BIT = {
    "degraded_bandwidth": 0,
    "route_recovery": 2,
    "route_unhealthy": 4,
    "access_timeout_recovery": 6,
}

#: ``incorrect_configuration`` values, as nvml.h numbers them.
CONFIGURATIONS = {
    "none": 1,
    "incorrect_sysguid": 2,
    "incorrect_chassis_sn": 3,
    "no_partition": 4,
    "insufficient_nvlinks": 5,
}


def health_mask(
    *,
    degraded_bandwidth: bool | None = None,
    route_recovery: bool | None = None,
    route_unhealthy: bool | None = None,
    access_timeout_recovery: bool | None = None,
    incorrect_configuration: str | None = None,
) -> int:
    """NVML's fabric health mask with each field set: True, False, or None (not
    supported); ``incorrect_configuration`` one of :data:`CONFIGURATIONS` or None.

    >>> health_mask(degraded_bandwidth=True, route_unhealthy=False)
    33
    """
    flags = {
        "degraded_bandwidth": degraded_bandwidth,
        "route_recovery": route_recovery,
        "route_unhealthy": route_unhealthy,
        "access_timeout_recovery": access_timeout_recovery,
    }
    mask = 0
    for name, value in flags.items():
        if value is not None:
            mask |= (1 if value else 2) << _TWO_BIT[name]
    if incorrect_configuration is not None:
        if incorrect_configuration not in CONFIGURATIONS:
            raise FakeTopologyError(
                f"incorrect_configuration: expected one of {', '.join(CONFIGURATIONS)} or "
                f"None, got {incorrect_configuration!r}"
            )
        mask |= CONFIGURATIONS[incorrect_configuration] << 8
    return mask


def degraded_tray(gpus: Mapping[int, Mapping[str, object]], *, clique_id: int = 1) -> Topology:
    """A ``gb200-nvl72-tray`` in clique ``clique_id`` whose GPUs in ``gpus`` have their
    fabric changed: ``{1: {"health_mask": health_mask(degraded_bandwidth=True)}}``, or
    ``{0: {"state": "in_progress"}, 2: {"status": 3}}``.

    Raises:
        FakeTopologyError: A GPU index the tray does not have, or an unknown fabric field.
    """
    machine = gb200_nvl72_tray()
    fields = {f.name for f in dataclasses.fields(FakeFabric)}
    for gpu in machine.gpus:
        gpu.fabric = dataclasses.replace(_fabric(gpu), clique_id=clique_id)
    for index, change in gpus.items():
        if not 0 <= index < len(machine.gpus):
            raise FakeTopologyError(
                f"gpus: the tray has GPUs 0-{len(machine.gpus) - 1}, not {index}"
            )
        unknown = sorted(set(change) - fields)
        if unknown:
            raise FakeTopologyError(
                f"gpus[{index}]: unknown fabric field(s) {unknown}; fields: {sorted(fields)}"
            )
        gpu = machine.gpus[index]
        gpu.fabric = dataclasses.replace(_fabric(gpu), **change)  # type: ignore[arg-type]
    machine.validate()
    return machine


def _fabric(gpu: FakeGpu) -> FakeFabric:
    if gpu.fabric is None:  # the tray registers every GPU; a changed machine might not
        raise FakeTopologyError("degraded_tray: a GPU of the tray reports no fabric")
    return gpu.fabric
