"""The environment of a worker.

See docs/concepts/worker-environment.md.

The per-vendor visibility table and the reserved variable names live in
:mod:`placement_core._vocab` (config validation reads them too) and are re-exported here.

A process placed on non-accelerator hardware (a robot arm) also gets its device's type
and config entry, so the controller knows which robot it drives.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from ._errors import PlacementRuleError
from ._records import Placement
from ._vocab import (
    CPU_AFFINITY_ENV,
    HARDWARE_CONFIG_ENV,
    HARDWARE_ENV_VARS,
    HARDWARE_TYPE_ENV,
    RANK_ENV_VARS,
    RESERVED_ENV_VARS,
    VISIBILITY_ENV_VARS,
    Visibility,
    reserved_env_vars,
)

__all__ = [
    "CPU_AFFINITY_ENV",
    "HARDWARE_CONFIG_ENV",
    "HARDWARE_ENV_VARS",
    "HARDWARE_TYPE_ENV",
    "RANK_ENV_VARS",
    "RESERVED_ENV_VARS",
    "VISIBILITY_ENV_VARS",
    "Visibility",
    "check_user_env",
    "hardware_env",
    "visibility_env",
    "worker_env",
]


def hardware_env(hardware_type: str, configs: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """The variables telling a process which hardware it drives.

    Args:
        hardware_type: The registered type (``Franka``).
        configs: The config entries of the process's devices, in its ``hardware_ranks``
            order (``HardwareDevice.config``).

    Returns:
        ``PLACEMENT_HARDWARE_TYPE`` and ``PLACEMENT_HARDWARE_CONFIG``: the JSON of the one
        device's config entry, or a JSON list of entries when the process has several.
    """
    entries = [dict(config) for config in configs]
    shown: object = entries[0] if len(entries) == 1 else entries
    return {
        HARDWARE_TYPE_ENV: hardware_type,
        HARDWARE_CONFIG_ENV: json.dumps(shown, default=str),
    }


def visibility_env(accelerator_type: str | None, ids: Sequence[int]) -> dict[str, str]:
    """The visibility variable (and Ray opt-outs) for ``ids`` of ``accelerator_type``.

    Returns an empty dict for ``None`` (no accelerators).

    Raises:
        PlacementRuleError: An accelerator type with no known visibility variable.
    """
    if accelerator_type is None:
        return {}
    visibility = VISIBILITY_ENV_VARS.get(accelerator_type.lower())
    if visibility is None:
        known = ", ".join(sorted(VISIBILITY_ENV_VARS))
        raise PlacementRuleError(
            f"no visibility variable is known for accelerator type {accelerator_type!r}; "
            f"known types: {known} (placement_core.register_accelerator adds one)",
            path="accelerator_type",
        )
    env = {visibility.env_var: visibility.value(ids)}
    env.update(dict.fromkeys(visibility.noset_env_vars, "1"))
    return env


def check_user_env(env_vars: Mapping[str, str], *, path: str | None = None) -> None:
    """Reject user variables that would override the planner's own.

    Raises:
        PlacementRuleError: A reserved variable is set (the message names it).
    """
    reserved = reserved_env_vars()
    clashes = sorted(k for k in env_vars if k in reserved)
    if clashes:
        raise PlacementRuleError(
            f"env_vars may not set {', '.join(clashes)}: the planner sets "
            f"{'it' if len(clashes) == 1 else 'them'} for every worker",
            path=path,
        )


def worker_env(
    placement: Placement,
    *,
    world_size: int,
    master_addr: str,
    master_port: int | None = None,
    user_env: Mapping[str, str] | None = None,
    hardware_configs: Sequence[Mapping[str, Any]] = (),
    path: str | None = None,
) -> dict[str, str]:
    """The environment of the worker of ``placement``.

    See docs/concepts/worker-environment.md.

    Sets ``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK`` (the device index inside the process:
    0 when isolating, the first assigned accelerator's position among the visible ones
    otherwise, -1 without accelerators), ``LOCAL_WORLD_SIZE``, ``NODE_RANK`` (the
    placement node rank), ``MASTER_ADDR``, ``MASTER_PORT`` (only when given) and the
    accelerator type's visibility variable with Ray's opt-outs, on top of ``user_env``
    (the env_vars of the placement's node group on its node). A placement on hardware
    also gets :func:`hardware_env` of ``hardware_configs`` (its devices' config entries),
    and a placement that knows its CPUs gets them as ``PLACEMENT_CPU_AFFINITY``.

    Raises:
        PlacementRuleError: ``user_env`` sets a reserved variable.
    """
    env: dict[str, str] = {}
    if user_env:
        check_user_env(user_env, path=path)
        env.update(user_env)
    env["RANK"] = str(placement.rank)
    env["WORLD_SIZE"] = str(world_size)
    env["LOCAL_RANK"] = str(placement.device_index)
    env["LOCAL_WORLD_SIZE"] = str(placement.local_world_size)
    env["NODE_RANK"] = str(placement.placement_node_rank)
    env["MASTER_ADDR"] = master_addr
    if master_port is not None:
        env["MASTER_PORT"] = str(master_port)
    # An empty list still sets the variable: unset, CUDA and its peers show every device.
    env.update(visibility_env(placement.accelerator_type, placement.visible_accelerators))
    if placement.hardware_type is not None:
        env.update(hardware_env(placement.hardware_type, hardware_configs))
    if placement.cpus is not None:
        env[CPU_AFFINITY_ENV] = placement.cpus
    return env
