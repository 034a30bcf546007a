"""Accelerator types: the Ray resource that holds each, and how a process sees only its own.

See docs/concepts/worker-environment.md.

Every type a config, a snapshot or a live node may name is registered here with two facts:
the **Ray resource** a placement group bundle asks for to reserve one device (``GPU`` for
NVIDIA, AMD and Intel GPUs, ``NPU`` for Ascend, ``HPU`` for Gaudi, a custom resource such
as ``MUSA`` where Ray has no accelerator manager) and the **visibility variable** that
hides the node's other devices (with Ray's ``RAY_EXPERIMENTAL_NOSET_*`` opt-out). The
built-in types are ``nvidia``, ``amd``, ``intel``, ``ascend``, ``gaudi``, ``musa`` and
``kunlun``; users register their own, as they register hardware types::

    register_accelerator("cambricon", ray_resource="MLU", env_var="MLU_VISIBLE_DEVICES")

after which ``accelerators: {type: cambricon, count: 8}`` is a valid inventory entry and
a live node offering ``MLU: 8`` launches workers with ``MLU_VISIBLE_DEVICES``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ._errors import ConfigError, PlacementRuleError, Problem
from ._vocab import (
    _RAY_RESOURCES,
    _VISIBILITY,
    ACCELERATOR_TYPES,
    CPU_AFFINITY_ENV,
    HARDWARE_ENV_VARS,
    RANK_ENV_VARS,
    RAY_RESOURCES,
    VISIBILITY_ENV_VARS,
    Visibility,
    reserved_env_vars,
)

__all__ = [
    "RAY_RESOURCES",
    "VISIBILITY_ENV_VARS",
    "AcceleratorKind",
    "Visibility",
    "accelerator_kind",
    "ray_resource",
    "register_accelerator",
    "registered_accelerators",
    "reserved_env_vars",
    "unregister_accelerator",
]

_TYPE_NAME = re.compile(r"[a-z][a-z0-9_-]*\Z")
_RESOURCE_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_.-]*\Z")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
# Ray's own resources and its placement-group internals: never an accelerator's.
_NOT_ACCELERATOR_RESOURCES = frozenset({"CPU", "memory", "object_store_memory", "bundle"})
# Variables the planner sets itself on every worker: a visibility variable of that name
# would overwrite them (``RANK='0,1'``).
_PLANNER_ENV_VARS = RANK_ENV_VARS | HARDWARE_ENV_VARS | {CPU_AFFINITY_ENV}


@dataclass(frozen=True, slots=True)
class AcceleratorKind:
    """What placement knows about one accelerator type.

    Attributes:
        name: The type as configs and snapshots write it (``ascend``).
        ray_resource: The Ray resource of one device (``NPU``).
        visibility: The variable that hides the node's other devices, with Ray's opt-outs.
    """

    name: str
    ray_resource: str
    visibility: Visibility


def registered_accelerators() -> tuple[str, ...]:
    """Names of every registered accelerator type (built-in ones included), sorted."""
    return tuple(sorted(_RAY_RESOURCES))


def accelerator_kind(name: str) -> AcceleratorKind | None:
    """The registered facts of ``name`` (case-insensitive), or None when it is unknown."""
    key = name.lower() if isinstance(name, str) else None
    if key is None or key not in _RAY_RESOURCES:
        return None
    return AcceleratorKind(key, _RAY_RESOURCES[key], _VISIBILITY[key])


def ray_resource(accelerator_type: str) -> str:
    """The Ray resource a bundle asks for to hold one device of ``accelerator_type``.

    Args:
        accelerator_type: A registered type (``nvidia``, ``ascend``, ...; any case).

    Returns:
        ``GPU``, ``NPU``, ``HPU`` or the registered custom resource name.

    Raises:
        PlacementRuleError: The type is not registered (the message lists those that are).
    """
    kind = accelerator_kind(accelerator_type)
    if kind is None:
        raise PlacementRuleError(
            f"no Ray resource is known for accelerator type {accelerator_type!r}; registered "
            f"types: {', '.join(registered_accelerators())} (register_accelerator adds one)",
            path="accelerator_type",
        )
    return kind.ray_resource


def _problems(
    where: str, ray_resource: str, env_var: str, noset_env_vars: tuple[str, ...]
) -> list[Problem]:
    problems = []
    if not isinstance(ray_resource, str) or not _RESOURCE_NAME.match(ray_resource):
        problems.append(Problem(where, "ray_resource: expected a Ray resource name", ray_resource))
    elif ray_resource in _NOT_ACCELERATOR_RESOURCES or ray_resource.startswith("accelerator_type:"):
        problems.append(
            Problem(where, "ray_resource: Ray's own resource, not an accelerator's", ray_resource)
        )
    for field, value in (("env_var", env_var), *(("noset_env_vars", v) for v in noset_env_vars)):
        if not isinstance(value, str) or not _ENV_NAME.match(value):
            problems.append(Problem(where, f"{field}: expected an environment variable", value))
        elif value in _PLANNER_ENV_VARS:
            problems.append(
                Problem(
                    where,
                    f"{field}: set by the planner on every worker, not a visibility variable "
                    f"(planner's: {', '.join(sorted(_PLANNER_ENV_VARS))})",
                    value,
                )
            )
    if env_var in noset_env_vars:
        problems.append(
            Problem(where, "noset_env_vars: names env_var itself; expected its opt-outs", env_var)
        )
    return problems


def register_accelerator(
    name: str,
    *,
    ray_resource: str,
    env_var: str,
    noset_env_vars: tuple[str, ...] | None = None,
    prefix: str = "",
    replace: bool = False,
) -> AcceleratorKind:
    """Make ``name`` an accelerator type that configs, snapshots and Ray nodes may use.

    Args:
        name: The type as written in configs (lower case: ``cambricon``).
        ray_resource: The Ray resource of one device (``MLU``); nodes offer it with
            ``ray start --resources '{"MLU": 8}'`` where Ray has no manager for it.
        env_var: The variable listing a process's visible devices.
        noset_env_vars: Variables that stop Ray overwriting ``env_var``; default
            ``RAY_EXPERIMENTAL_NOSET_<env_var>``, Ray's own naming.
        prefix: Text before the comma-separated ids (``level_zero:`` for Intel).
        replace: Allow redefining a registered type (a built-in one included).

    Returns:
        The registered facts.

    Raises:
        ConfigError: A malformed name, resource or variable, a variable the planner sets
            itself (``RANK``, ``MASTER_ADDR``, ...), or a name already registered without
            ``replace``; every problem is listed.
    """
    where = f"accelerator type {name!r}"
    if not isinstance(name, str) or not _TYPE_NAME.match(name):
        raise ConfigError(
            [Problem(where, "expected a lower-case name (letters, digits, '_', '-')", name)]
        )
    noset = (f"RAY_EXPERIMENTAL_NOSET_{env_var}",) if noset_env_vars is None else noset_env_vars
    if not isinstance(noset, tuple):
        raise ConfigError([Problem(where, "noset_env_vars: expected a tuple of names", noset)])
    problems = _problems(where, ray_resource, env_var, noset)
    shown: object = prefix  # a caller without type checks may pass anything
    if not isinstance(shown, str):
        problems.append(Problem(where, "prefix: expected a string", prefix))
    if name in _RAY_RESOURCES and not replace:
        problems.append(Problem(where, "already registered; pass replace=True to redefine it"))
    if problems:
        raise ConfigError(problems)
    _RAY_RESOURCES[name] = ray_resource
    _VISIBILITY[name] = Visibility(env_var, noset, prefix)
    return AcceleratorKind(name, ray_resource, _VISIBILITY[name])


def unregister_accelerator(name: str) -> None:
    """Remove a registered accelerator type (no-op when it is not registered).

    Raises:
        ConfigError: ``name`` is a built-in type (redefine it with ``replace=True``).
    """
    if name in ACCELERATOR_TYPES:
        raise ConfigError(
            [
                Problem(
                    f"accelerator type {name!r}",
                    "built in; register_accelerator(..., replace=True) redefines it",
                )
            ]
        )
    _RAY_RESOURCES.pop(name, None)
    _VISIBILITY.pop(name, None)
