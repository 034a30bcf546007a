"""The ``memory:`` section of a job: how much GPU and host memory each component takes.

See docs/concepts/will-it-fit.md.

::

    memory:
      phases:                       # optional: components active together
        generate_and_train: [actor, rollout]
      actor:
        estimator: megatron         # megatron | zero3 | sglang | vllm | fixed
        offload: true
        tensor_model_parallel_size: 2     # the estimator's own fields, flat
      rollout:
        estimator: sglang
        mem_fraction_static: 0.7

Each entry is read through the same validation pass as ``cluster:``
(:func:`placement_core._validate.walk`), so every problem is reported with its path
(``memory.actor.tensor_model_parallel_size``); the fields of the Megatron and ZeRO-3
estimators are handed to their own parsers (:mod:`placement_core._memory_megatron`,
:mod:`placement_core._memory_zero3`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any, ClassVar, Literal

from pydantic import Field, StrictBool

from ._errors import ConfigError, Problem
from ._memory_megatron import MEGATRON_FIELDS, parse_megatron
from ._memory_units import ByteSize, Fraction
from ._memory_zero3 import ZERO3_FIELDS, parse_zero3
from ._models import ClusterConfig
from ._problems import Issues, did_you_mean
from ._shown import shown
from ._validate import Check, ConfigModel, Issue, Part, build, walk

__all__ = [
    "DEFAULT_OVERHEAD_BYTES",
    "ESTIMATOR_FIELDS",
    "MEMORY_KEY",
    "ComponentMemory",
    "MemoryEntry",
    "MemorySpec",
    "load_memory",
]

MEMORY_KEY = "memory"
PHASES_KEY = "phases"

#: Per process and GPU, beyond what the estimators count: the CUDA context with
#: PyTorch's kernels loaded (about 500-600 MiB on Hopper) and NCCL's communication
#: buffers (``NCCL_BUFFSIZE``, 4 MiB per channel and peer, a few hundred MiB at most).
DEFAULT_OVERHEAD_BYTES = 1 << 30

Estimator = Literal["megatron", "zero3", "sglang", "vllm", "fixed"]

#: The estimator each estimator-specific key belongs to.
_OWN_KEYS: dict[str, str] = {
    "mem_fraction_static": "sglang",
    "gpu_memory_utilization": "vllm",
    "bytes": "fixed",
}
_TRAINER_FIELDS: dict[str, tuple[str, ...]] = {
    "megatron": tuple(MEGATRON_FIELDS),
    "zero3": tuple(ZERO3_FIELDS),
}
#: The fields each trainer estimator reads from a ``memory:`` entry, by estimator
#: (``megatron``: Megatron-LM's argument names; ``zero3``: DeepSpeed's).
ESTIMATOR_FIELDS: Mapping[str, tuple[str, ...]] = MappingProxyType(_TRAINER_FIELDS)


def _estimator_keys(entry: Part) -> Iterable[Issue]:
    estimator = entry.get("estimator")
    if estimator is None:
        return  # reported by itself
    for key, owner in _OWN_KEYS.items():
        if key not in entry.values:
            continue  # broken, reported by itself
        given = entry.values[key] is not None
        if owner == estimator and not given:
            yield f".{key}", f"required key is missing: estimator {estimator} needs {key}", None
        elif owner != estimator and given:
            yield (
                f".{key}",
                f"{key} belongs to estimator {owner}, not to this entry's {estimator}",
                entry.values[key],
            )
    for key in entry.set_aside:
        owners = [name for name, keys in _TRAINER_FIELDS.items() if key in keys]
        if estimator not in owners:
            yield (
                f".{key}",
                f"{key} is a field of estimator{'s' if len(owners) > 1 else ''} "
                f"{' and '.join(owners)}, not of this entry's {estimator}",
                None,
            )


class MemoryEntry(ConfigModel):
    """One component's entry of the ``memory:`` section.

    Attributes:
        estimator: How its memory is estimated: ``megatron`` or ``zero3`` (a trainer,
            from its model and parallel sizes), ``sglang`` (``mem_fraction_static`` of
            the GPU), ``vllm`` (``gpu_memory_utilization`` of the GPU) or ``fixed``
            (``bytes``).
        offload: The component releases its GPU memory while another component on its
            GPU is active (slime's offload flags, SGLang's memory release, vLLM's sleep
            mode); a trainer's or a fixed component's states then count against its
            node's host memory.
        overhead_bytes: Per process and GPU, beyond the estimator's figures (CUDA
            context, NCCL buffers); reported apart, as ``other``.
        mem_fraction_static: ``sglang``: the fraction of the GPU it reserves.
        gpu_memory_utilization: ``vllm``: the fraction of the GPU it reserves.
        bytes: ``fixed``: its bytes per GPU (an integer or a size such as ``"20GiB"``).
    """

    estimator: Estimator
    offload: StrictBool = False
    overhead_bytes: ByteSize = Field(DEFAULT_OVERHEAD_BYTES)
    mem_fraction_static: Fraction | None = None
    gpu_memory_utilization: Fraction | None = None
    bytes: ByteSize | None = None

    set_aside: ClassVar[tuple[str, ...]] = tuple(
        dict.fromkeys((*_TRAINER_FIELDS["megatron"], *_TRAINER_FIELDS["zero3"]))
    )
    checks: ClassVar[tuple[Check, ...]] = (_estimator_keys,)
    not_a_mapping: ClassVar[str] = (
        "expected a mapping with estimator (megatron, zero3, sglang, vllm or fixed) and its fields"
    )


@dataclass(frozen=True, slots=True)
class ComponentMemory:
    """One component's memory entry, checked.

    Attributes:
        name: The component.
        entry: Its entry's common fields.
        fields: The estimator's own fields as written (``tensor_model_parallel_size``, ...).
        trainer: What :func:`parse_megatron` or :func:`parse_zero3` made of them; None
            for the other estimators.
    """

    name: str
    entry: MemoryEntry
    fields: Mapping[str, Any]
    trainer: Any = None


@dataclass(frozen=True, slots=True)
class MemorySpec:
    """The ``memory:`` section, checked.

    Attributes:
        components: Per component with an entry, in the section's order.
        phases: The declared phases, ``(name, components active together)``; empty when
            none are declared (each component is then a phase of its own).
        notes: What the section leaves out and why (for a section derived from another
            program's keys).
    """

    components: Mapping[str, ComponentMemory]
    phases: tuple[tuple[str, tuple[str, ...]], ...] = ()
    notes: tuple[str, ...] = ()


def _entry(
    name: str, raw: object, base_dir: Path, problems: list[Problem]
) -> ComponentMemory | None:
    path = f"{MEMORY_KEY}.{name}"
    part, issues = walk(MemoryEntry, raw)
    problems += [Problem(f"{path}{where}", message, value) for where, message, value in issues]
    if issues or not isinstance(raw, Mapping):
        return None
    entry = build(part)
    assert isinstance(entry, MemoryEntry)
    fields = {key: raw[key] for key in part.set_aside}
    trainer = None
    parse = {"megatron": parse_megatron, "zero3": parse_zero3}.get(entry.estimator)
    if parse is not None:
        try:
            trainer = parse(fields, base_dir=base_dir)
        except Issues as error:
            problems += [Problem(f"{path}{where}", m, v) for where, m, v in error.issues]
            return None
    return ComponentMemory(name, entry, fields, trainer)


def _phases(
    raw: object, names: tuple[str, ...], problems: list[Problem]
) -> tuple[tuple[str, tuple[str, ...]], ...]:
    path = f"{MEMORY_KEY}.{PHASES_KEY}"
    expected = "expected a mapping of phase name to the components active together"
    if not isinstance(raw, Mapping) or not raw:
        problems.append(Problem(path, f"{expected}, such as {{train: [actor, rollout]}}", raw))
        return ()
    phases: list[tuple[str, tuple[str, ...]]] = []
    for phase, members in raw.items():
        where = f"{path}.{phase}"
        if not isinstance(members, list | tuple) or not members:
            problems.append(Problem(where, "expected a non-empty list of component names", members))
            continue
        unknown = [m for m in members if m not in names]
        for member in unknown:
            problems.append(
                Problem(
                    where,
                    f"{shown(member)} has no entry in memory: "
                    f"(entries: {', '.join(names) or 'none'})" + did_you_mean(str(member), names),
                    member,
                )
            )
        if not unknown:
            phases.append((str(phase), tuple(dict.fromkeys(members))))
    return tuple(phases)


def load_memory(
    document: Mapping[str, Any], config: ClusterConfig, *, base_dir: Path
) -> MemorySpec | None:
    """The job's ``memory:`` section, checked against its config; None without one.

    Args:
        document: The whole job document (``cluster:``, ``memory:``, ...).
        config: The job's cluster config (its components).
        base_dir: What relative paths in the section (``hf_config``) are relative to.

    Raises:
        ConfigError: Every problem of the section, each with its path.
    """
    if MEMORY_KEY not in document:
        return None
    raw = document[MEMORY_KEY]
    if not isinstance(raw, Mapping):
        raise ConfigError(
            [Problem(MEMORY_KEY, "expected a mapping of component name to its memory entry", raw)]
        )
    known = config.components()
    problems: list[Problem] = []
    entries: dict[str, ComponentMemory] = {}
    for key, value in raw.items():
        if key == PHASES_KEY:
            continue
        if key not in known:
            problems.append(
                Problem(
                    f"{MEMORY_KEY}.{key}",
                    f"unknown component; components: {', '.join(known)}"
                    + did_you_mean(str(key), known),
                )
            )
            continue
        entry = _entry(str(key), value, base_dir, problems)
        if entry is not None:
            entries[str(key)] = entry
    declared = [str(key) for key in raw if key != PHASES_KEY and key in known]
    phases = _phases(raw[PHASES_KEY], tuple(declared), problems) if PHASES_KEY in raw else ()
    if problems:
        raise ConfigError(problems)
    return MemorySpec(entries, phases)
