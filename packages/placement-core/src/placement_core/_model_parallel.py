"""Model-parallel jobs: plan what RLinf's reasoning and agent entry points launch.

Those entry points do not run ``actor``, ``rollout``, ``inference`` / ``actor_inference``,
``critic``, ``critic_inference`` and ``reward`` as their ``component_placement`` rules are
written: RLinf's ``ModelParallelComponentPlacement`` keeps only each component's
accelerators (which must form one contiguous range) and derives the processes from the
job's parallel sizes. This module does the same from the whole job document and returns
an ordinary cluster config with the derived rules, so every planner feature (views, worker
environments, the Ray layer) applies unchanged.

The mode is chosen as RLinf chooses it:

- **auto** when ``cluster.auto_scheduler`` is true and there is no critic: actor, rollout
  and inference must be disjoint and lie in that order from accelerator 0 to the last;
  the actor then spans every accelerator, and with ``cluster.use_pre_process_policy``
  rollout also covers the actor's accelerators;
- **collocated** when actor and rollout have the same accelerators: one actor process per
  accelerator, rollout processes of ``rollout.tensor_parallel_size`` accelerators, strided
  by ``actor TP / rollout TP`` when the actor's tensor-parallel groups are wider, so each
  rollout engine sits inside one actor group and weights move over CUDA IPC;
- **disaggregated** when the components are disjoint: rollout processes of
  ``len(rollout) / (len(rollout) // (TP x PP))`` accelerators, everything else one
  process per accelerator.

Components other than these keep their rules as written. A ``runner.task_type:
reasoning_eval`` job places only ``rollout`` (engines of ``tensor_parallel_size`` GPUs, no
stride) and ``reward``, as RLinf's ``ModelParallelEvalComponentPlacement`` does.

>>> job = {
...     "cluster": {"num_nodes": 1, "component_placement": {"actor,rollout,reward": "all"}},
...     "actor": {"model": {"tensor_model_parallel_size": 4}},
...     "rollout": {"tensor_parallel_size": 2},
... }
>>> from placement_core import Inventory
>>> layout = derive_model_parallel(job, Inventory.uniform(1, 8))
>>> layout.mode, layout.config.components()["rollout"].placement
('collocated', '0-7:0-3')
>>> layout.config.components()["rollout"].stride
2
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from ._config import ClusterConfig, ComponentRule, load_config
from ._errors import ConfigError, Problem
from ._interpolate import MISSING, JobDocument
from ._inventory import Inventory
from ._loader import check_source
from ._plan import Plan, plan
from ._rules import parse_rule
from ._sources import attach_hardware, inventory_for
from ._spaces import ResourceSpace, build_space
from ._yamlio import plain, read_document

__all__ = [
    "MODEL_PARALLEL_COMPONENTS",
    "ModelParallelLayout",
    "derive_model_parallel",
    "load_job",
    "looks_model_parallel",
    "plan_model_parallel",
]

MODEL_PARALLEL_COMPONENTS = (
    "actor",
    "rollout",
    "inference",
    "actor_inference",
    "critic",
    "critic_inference",
    "reward",
)
"""The components whose processes a model-parallel job derives from parallel sizes."""

Mode = Literal["collocated", "disaggregated", "auto", "eval"]
_MODEL_PARALLEL_TASKS = ("reasoning", "coding_online_rl", "reasoning_eval")
_PLACEMENT = "cluster.component_placement"
_MODEL_SIZES = (
    "tensor_model_parallel_size",
    "pipeline_model_parallel_size",
    "context_parallel_size",
)


@dataclass(frozen=True, slots=True)
class ModelParallelLayout:
    """What RLinf launches for a model-parallel job.

    Attributes:
        mode: ``"collocated"``, ``"disaggregated"`` or ``"auto"``; ``"eval"`` for a
            ``runner.task_type: reasoning_eval`` job (rollout and reward only).
        config: The job's cluster config with the derived rules in place of the written
            ones (plan it like any other config).
        derived: The components whose rules were derived, in config order.
    """

    mode: Mode
    config: ClusterConfig
    derived: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class _Ranks:
    """A component's accelerator ranks in rule order, as runs of consecutive ranks.

    Never a list of every rank: a rule on 100,000 nodes x 1,024 accelerators names 100
    million of them, and the checks need only the runs.
    """

    spans: tuple[range, ...]

    @classmethod
    def of(cls, spans: Iterable[range]) -> _Ranks:
        merged: list[range] = []
        for span in spans:
            if merged and merged[-1].stop == span.start:
                merged[-1] = range(merged[-1].start, span.stop)
            elif span:
                merged.append(span)
        return cls(tuple(merged))

    def __len__(self) -> int:
        return sum(len(span) for span in self.spans)

    def __bool__(self) -> bool:
        return bool(self.spans)

    @property
    def first(self) -> int:
        return self.spans[0].start

    @property
    def last(self) -> int:
        return self.spans[-1].stop - 1

    @property
    def contiguous(self) -> bool:
        """One run from the first rank to the last, as RLinf requires."""
        return len(self.spans) == 1

    def isdisjoint(self, other: _Ranks) -> bool:
        mine = sorted(self.spans, key=lambda span: span.start)
        theirs = sorted(other.spans, key=lambda span: span.start)
        i = j = 0
        while i < len(mine) and j < len(theirs):
            if mine[i].stop <= theirs[j].start:
                i += 1
            elif theirs[j].stop <= mine[i].start:
                j += 1
            else:
                return False
        return True

    def text(self) -> str:
        return ",".join(
            str(span.start) if len(span) == 1 else f"{span.start}-{span.stop - 1}"
            for span in self.spans
        )


@dataclass(frozen=True, slots=True)
class _Derived:
    first: int
    last: int
    per_process: int = 1
    stride: int = 1


def load_job(source: str | os.PathLike[str] | Mapping[str, Any] | JobDocument) -> JobDocument:
    """Read a whole job document: a YAML path, YAML text or a mapping (e.g. OmegaConf's).

    Raises:
        ConfigError: The file cannot be read, the YAML does not parse, or the document
            is not a mapping with a ``cluster:`` section, or ``source`` is of another type.
    """
    check_source(source, JobDocument)
    if isinstance(source, JobDocument):
        return source
    if isinstance(source, Mapping):
        document, name = plain(source), "<mapping>"
    else:
        document, name = read_document(source)
    if not isinstance(document, Mapping) or not isinstance(document.get("cluster"), Mapping):
        raise ConfigError(
            [
                Problem(
                    name,
                    "a model-parallel job is a whole job document with a top-level cluster: "
                    "section next to actor:, rollout:, ...",
                )
            ]
        )
    return JobDocument(document)


def looks_model_parallel(document: Mapping[str, Any]) -> bool:
    """Whether a job document is one whose layout :func:`plan_model_parallel` shows.

    RLinf picks the placement by ``runner.task_type``: ``reasoning``,
    ``coding_online_rl`` and ``reasoning_eval`` jobs are model-parallel, the others
    (``embodied``, ``sft``, ...) are not. Without a task type, a document with ``actor.model``
    and ``rollout`` sections whose cluster places ``actor`` and ``rollout`` (and no
    ``env``, which embodied jobs have) counts as one.
    """
    runner = document.get("runner")
    task = runner.get("task_type") if isinstance(runner, Mapping) else None
    if isinstance(task, str):
        return task in _MODEL_PARALLEL_TASKS
    actor, rollout = document.get("actor"), document.get("rollout")
    cluster = document.get("cluster")
    if not (isinstance(actor, Mapping) and isinstance(actor.get("model"), Mapping)):
        return False
    if not isinstance(rollout, Mapping) or not isinstance(cluster, Mapping):
        return False
    placement = cluster.get("component_placement")
    if not isinstance(placement, Mapping):
        return False
    names = {name.strip() for key in placement for name in str(key).split(",")}
    return {"actor", "rollout"} <= names and "env" not in names


def derive_model_parallel(
    job: str | os.PathLike[str] | Mapping[str, Any] | JobDocument,
    inventory: Inventory | None = None,
    *,
    nvlink_groups: bool = False,
) -> ModelParallelLayout:
    """Derive the model-parallel components' placements as RLinf does.

    Args:
        job: The whole job document (YAML path, YAML text or mapping); ``${a.b}``
            references are resolved where a value is needed.
        inventory: The nodes; None builds it from the config's ``inventory:`` section
            (:func:`~placement_core.inventory_for`).
        nvlink_groups: Also give ``actor``, ``critic`` and the inference components an
            ``nvlink_group`` of their tensor x expert parallel size (``model.
            tensor_model_parallel_size`` x ``model.expert_model_parallel_size``), so each
            such group lies in one NVLink domain (the CLI's ``--nvlink-groups``). See
            docs/concepts/nvlink-domains.md.

    Returns:
        The mode and the cluster config with derived rules.

    Raises:
        ConfigError: The cluster section is invalid, a needed value is missing, wrong or
            unresolvable, or the layout breaks one of RLinf's model-parallel rules (the
            path names the key to change).
        InventoryError: No inventory is known.
        PlacementRuleError: A written rule cannot be resolved on the inventory.
    """
    document = load_job(job)
    config = load_config(document.document)
    if inventory is None:
        inventory = inventory_for(config)
    inventory = attach_hardware(inventory, config)
    return _Deriver(document, config, inventory, nvlink_groups=nvlink_groups).run()


def plan_model_parallel(
    job: str | os.PathLike[str] | Mapping[str, Any] | JobDocument,
    inventory: Inventory | None = None,
    *,
    colocate: Iterable[Iterable[str]] = (),
    nvlink_groups: bool = False,
) -> Plan:
    """Plan a model-parallel job: :func:`derive_model_parallel`, then :func:`placement_core.plan`.

    Args:
        job: The whole job document (YAML path, YAML text or mapping).
        inventory: The nodes; None builds it from the config's ``inventory:`` section.
        colocate: Passed on to :func:`placement_core.plan`.
        nvlink_groups: Passed on to :func:`derive_model_parallel`.

    Returns:
        The :class:`~placement_core.Plan` of what RLinf launches.
    """
    document = load_job(job)
    if inventory is None:
        inventory = inventory_for(load_config(document.document))
    layout = derive_model_parallel(document, inventory, nvlink_groups=nvlink_groups)
    return plan(layout.config, inventory, colocate=colocate)


class _Deriver:
    """One derivation; attribute names follow RLinf's where they mean the same."""

    def __init__(
        self,
        document: JobDocument,
        config: ClusterConfig,
        inventory: Inventory,
        *,
        nvlink_groups: bool = False,
    ) -> None:
        self.doc = document
        self.config = config
        self.inventory = inventory
        self.nvlink_groups = nvlink_groups
        self.rules = config.components()
        self._spaces: dict[tuple[str, ...], ResourceSpace] = {}
        self.gpus: dict[str, _Ranks] = {}
        for name in ("actor", "rollout", "critic", "critic_inference", "reward"):
            if name in self.rules:
                self.gpus[name] = self._hardware_ranks(name)
        # RLinf reads `inference`, else `actor_inference`, as the actor's inference.
        self.inference_key = next(
            (n for n in ("inference", "actor_inference") if n in self.rules), None
        )
        if self.inference_key is not None:
            self.gpus["inference"] = self._hardware_ranks(self.inference_key)

    # ------------------------------------------------------------------ inputs

    def _hardware_ranks(self, name: str) -> _Ranks:
        rule = self.rules[name]
        path = f"{_PLACEMENT}.{rule.key}"
        parsed = parse_rule(rule.placement, path=f"{path}.placement")
        space = self._space(rule.node_groups, path)
        spans: list[range] = []
        for segment in parsed.segments:
            first, last = segment.resources or (0, space.size - 1)
            spans.append(range(first, last + 1))
        return _Ranks.of(spans)

    def _space(self, groups: tuple[str, ...], path: str | None) -> ResourceSpace:
        # One space per set of groups: on 100,000 nodes each costs a pass over them.
        if groups not in self._spaces:
            self._spaces[groups] = build_space(self.inventory, self.config, groups, path=path)
        return self._spaces[groups]

    def _size(self, path: str, default: int) -> int:
        value = self.doc.get(path, default)
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise _error(path, "expected an integer >= 1", value)
        return int(value)

    def _mapping(self, path: str) -> bool:
        """Whether ``path`` holds a mapping, resolving only a reference that *is* the
        value: the keys inside stay unresolved, since placement reads only a few of them
        (``${oc.env:MODEL_DIR}`` in ``rollout.model_dir`` is RLinf's business)."""
        value = self.doc.raw(path, None)
        if isinstance(value, str) and "${" in value:
            value = self.doc.get(path, None)
        return isinstance(value, Mapping)

    def _model_sizes(self, section: str, world: int) -> None:
        """RLinf's (Megatron's) rule for a model section: tensor, pipeline and context
        parallel sizes are integers >= 1 whose product divides the component's
        accelerators (the data-parallel size is a whole number)."""
        model = self._section_model(section)
        sizes = [self._size(f"{model}.{key}", 1) for key in _MODEL_SIZES]
        product = sizes[0] * sizes[1] * sizes[2]
        if world % product:
            raise _error(
                model,
                f"{section}'s {world} accelerator(s) are not a multiple of its tensor x "
                f"pipeline x context parallel sizes ({sizes[0]} x {sizes[1]} x {sizes[2]} = "
                f"{product}), so its data-parallel size would not be a whole number",
            )

    def _flag(self, name: str) -> bool:
        value = self.doc.get(f"cluster.{name}", False)
        if not isinstance(value, bool):
            raise _error(f"cluster.{name}", "expected true or false", value)
        return value

    def actor_tp(self) -> int:
        self._section_model("actor")
        return self._size("actor.model.tensor_model_parallel_size", 1)

    def _rollout(self) -> None:
        if not self._mapping("rollout"):
            raise _error(
                "rollout",
                "required: a model-parallel job reads tensor_parallel_size and "
                "pipeline_parallel_size from its rollout section",
            )

    def rollout_tp(self) -> int:
        self._rollout()
        return self._size("rollout.tensor_parallel_size", 1)

    def rollout_pp(self) -> int:
        self._rollout()
        return self._size("rollout.pipeline_parallel_size", 1)

    def _section_model(self, section: str) -> str:
        if not self._mapping(f"{section}.model"):
            raise _error(
                f"{section}.model",
                f"required: the {section} section has no model mapping to read its "
                "tensor_model_parallel_size from",
            )
        return f"{section}.model"

    def inference_tp(self) -> tuple[int, str]:
        for section in ("inference", "actor_inference"):
            if self.doc.has(section):
                model = self._section_model(section)
                path = f"{model}.tensor_model_parallel_size"
                return self._size(path, 1), path
        return self.actor_tp(), "actor.model.tensor_model_parallel_size"

    def critic_inference_tp(self) -> tuple[int, str]:
        path = "critic_inference.model.tensor_model_parallel_size"
        if self.doc.has(path):
            return self._size(path, 1), path
        self._section_model("critic")
        return self._size("critic.model.tensor_model_parallel_size", 1), (
            "critic.model.tensor_model_parallel_size"
        )

    def _model_group(self, section: str) -> int:
        """``tensor x expert`` parallel size of a section's model (1 when unset)."""
        model = self._section_model(section)
        return self._size(f"{model}.tensor_model_parallel_size", 1) * self._size(
            f"{model}.expert_model_parallel_size", 1
        )

    def _group_section(self, name: str) -> str | None:
        """The section whose model's parallel sizes group a derived component."""
        if name in ("actor", "critic"):
            return name
        if name in ("inference", "actor_inference"):
            return next((s for s in ("inference", "actor_inference") if self.doc.has(s)), "actor")
        if name == "critic_inference":
            return name if self.doc.has("critic_inference.model") else "critic"
        return None  # rollout engines and reward: one process never spans nodes

    def group_sizes(self, derived: Mapping[str, _Derived]) -> dict[str, int]:
        """Per derived component of one process per accelerator, its nvlink_group."""
        sizes: dict[str, int] = {}
        for name, d in derived.items() if self.nvlink_groups else ():
            section = self._group_section(name)
            if section is not None and d.per_process == 1:
                size = self._model_group(section)
                if size > 1:
                    sizes[name] = size
        return sizes

    # ------------------------------------------------------------------ checks

    def _key_path(self, name: str) -> str:
        key = self.inference_key if name == "inference" else name
        return f"{_PLACEMENT}.{self.rules[key or name].key}"

    def _check_inputs(self) -> None:
        for name, what in (("actor", "an 'actor'"), ("rollout", "a 'rollout'")):
            if name not in self.gpus:
                raise _error(
                    _PLACEMENT, f"a model-parallel job needs {what} component; none is placed"
                )
        if "reward" not in self.gpus:
            raise _error(
                _PLACEMENT,
                "a model-parallel job needs a 'reward' component (RLinf requires one even "
                "when it shares the actor's accelerators: actor,rollout,reward: all)",
            )
        for name in ("actor", "rollout", "inference", "critic_inference", "critic"):
            gpus = self.gpus.get(name)
            if gpus is not None and not gpus.contiguous:
                raise _error(
                    self._key_path(name),
                    f"{name}'s accelerators must form one contiguous range in a model-parallel job",
                    gpus.text(),
                )

    def _disjoint(self) -> bool:
        none = _Ranks(())

        def apart(a: str, b: str) -> bool:
            return self.gpus.get(a, none).isdisjoint(self.gpus.get(b, none))

        return all(
            apart(a, b)
            for a, b in (
                ("actor", "rollout"),
                ("actor", "inference"),
                ("rollout", "inference"),
                ("critic", "actor"),
                ("critic", "rollout"),
                ("critic", "critic_inference"),
                ("rollout", "critic_inference"),
            )
        )

    def _gpus_summary(self) -> str:
        return ", ".join(
            f"{name} {self.gpus[name].text()}"
            for name in ("actor", "rollout", "inference", "critic", "critic_inference")
            if name in self.gpus
        )

    def _is_auto(self, num_gpus: int) -> bool:
        if not self._flag("auto_scheduler") or "critic" in self.gpus:
            return False
        if not self._disjoint():
            raise _error(
                "cluster.auto_scheduler",
                "auto mode refines disaggregated mode: actor, rollout and inference must use "
                f"disjoint accelerators (got {self._gpus_summary()})",
            )
        actor, rollout = self.gpus["actor"], self.gpus["rollout"]
        inference = self.gpus.get("inference")
        ordered = actor.first == 0 and actor.last == rollout.first - 1
        if inference is None:
            ordered = ordered and rollout.last == num_gpus - 1
        else:
            ordered = ordered and rollout.last == inference.first - 1
            ordered = ordered and inference.last == num_gpus - 1
        if not ordered:
            chain = "actor -> rollout" + (" -> inference" if inference is not None else "")
            raise _error(
                _PLACEMENT,
                f"auto mode needs {chain} placed in this order on consecutive accelerators "
                f"from 0 to {num_gpus - 1} (got {self._gpus_summary()})",
            )
        return True

    def _mode(self, num_gpus: int) -> Mode:
        if self._is_auto(num_gpus):
            return "auto"
        if self.gpus["actor"] == self.gpus["rollout"]:
            for name in ("inference", "critic_inference"):
                if name in self.gpus:
                    raise _error(
                        self._key_path(name),
                        f"{name} must not be placed in collocated mode (actor and rollout "
                        "share their accelerators, so the actor computes log-probabilities "
                        "itself); remove it or give actor and rollout disjoint accelerators",
                    )
            return "collocated"
        if self._disjoint():
            if "inference" in self.gpus:
                tp, path = self.inference_tp()
                if tp > len(self.gpus["inference"]):
                    raise _error(
                        path,
                        f"inference's tensor parallel size exceeds its "
                        f"{len(self.gpus['inference'])} accelerator(s)",
                        tp,
                    )
                recompute = self.doc.get("algorithm.recompute_logprobs", MISSING)
                if recompute is MISSING:
                    raise _error(
                        "algorithm.recompute_logprobs",
                        "required when inference is placed in disaggregated mode",
                    )
                if not isinstance(recompute, bool):
                    raise _error(
                        "algorithm.recompute_logprobs", "expected true or false", recompute
                    )
                if not recompute:
                    raise _error(
                        "algorithm.recompute_logprobs",
                        "is false, which disables inference; remove the inference placement "
                        "or set it to true",
                    )
            if "critic_inference" in self.gpus:
                tp, path = self.critic_inference_tp()
                world = len(self.gpus["critic_inference"])
                if tp > world:
                    raise _error(
                        path,
                        f"critic_inference's tensor parallel size exceeds its {world} "
                        "accelerator(s)",
                        tp,
                    )
            return "disaggregated"
        raise _error(
            _PLACEMENT,
            "matches neither collocated mode (actor and rollout on the same accelerators) "
            "nor disaggregated mode (actor, rollout, inference, critic and critic_inference "
            f"on disjoint accelerators): got {self._gpus_summary()}",
        )

    def _sanity(self, mode: Mode, num_gpus: int) -> None:
        for name, tp, path in (
            ("actor", self.actor_tp(), "actor.model.tensor_model_parallel_size"),
            ("rollout", self.rollout_tp(), "rollout.tensor_parallel_size"),
        ):
            if tp > len(self.gpus[name]):
                raise _error(
                    path,
                    f"{name}'s tensor parallel size exceeds its {len(self.gpus[name])} "
                    "accelerator(s)",
                    tp,
                )
        self.rollout_pp()  # read in every mode, so a bad value never passes unseen
        self._model_sizes("actor", num_gpus if mode == "auto" else len(self.gpus["actor"]))
        if "critic" in self.gpus and self._mapping("critic.model"):
            self._model_sizes("critic", len(self.gpus["critic"]))

    # ------------------------------------------------------------------ derivation

    def _rollout_by_dp(self, rollout: _Ranks) -> _Derived:
        per_engine = self.rollout_tp() * self.rollout_pp()
        dp = len(rollout) // per_engine
        if dp == 0:
            raise _error(
                "rollout.tensor_parallel_size",
                f"rollout needs at least tensor_parallel_size x pipeline_parallel_size = "
                f"{per_engine} accelerators; it has {len(rollout)}",
            )
        return _Derived(rollout.first, rollout.last, len(rollout) // dp)

    def _derive(self, mode: Mode, num_gpus: int) -> dict[str, _Derived]:
        gpus = self.gpus
        out: dict[str, _Derived] = {}

        def packed(name: str, target: str | None = None) -> None:
            if gpus.get(name):
                out[target or name] = _Derived(gpus[name].first, gpus[name].last)

        if mode == "collocated":
            actor_tp, rollout_tp = self.actor_tp(), self.rollout_tp()
            if actor_tp > rollout_tp and actor_tp % rollout_tp:
                raise _error(
                    "rollout.tensor_parallel_size",
                    f"must divide actor.model.tensor_model_parallel_size ({actor_tp}) in "
                    "collocated mode: each rollout engine is strided inside one actor "
                    "tensor-parallel group",
                    rollout_tp,
                )
            stride = actor_tp // rollout_tp if actor_tp > rollout_tp else 1
            packed("actor")
            rollout = gpus["rollout"]
            out["rollout"] = _Derived(rollout.first, rollout.last, rollout_tp, stride)
            packed("reward")
            packed("critic")
        elif mode == "disaggregated":
            out["rollout"] = self._rollout_by_dp(gpus["rollout"])
            packed(
                "inference", "inference" if "critic_inference" not in gpus else "actor_inference"
            )
            packed("critic_inference")
            packed("actor")
            packed("reward")
            packed("critic")
        else:
            out["actor"] = _Derived(0, num_gpus - 1)
            rollout = gpus["rollout"]
            if self._flag("use_pre_process_policy"):
                actor = gpus["actor"]
                span = actor.last - actor.first + 1
                if span % self.rollout_tp():
                    raise _error(
                        "cluster.use_pre_process_policy",
                        f"needs the actor's {span} accelerators to be a multiple of "
                        f"rollout.tensor_parallel_size ({self.rollout_tp()}), since rollout "
                        "also runs on them",
                    )
                rollout = _Ranks.of((range(actor.last + 1), *rollout.spans))
            out["rollout"] = self._rollout_by_dp(rollout)
            packed("inference")
            packed("reward")
        self._check_blocks(out)
        return out

    def _check_blocks(self, out: Mapping[str, _Derived]) -> None:
        for name, derived in out.items():
            count = derived.last - derived.first + 1
            block = derived.per_process * derived.stride
            if count % block:
                source = "inference" if name == "actor_inference" else name
                raise _error(
                    self._key_path(source),
                    f"{name}'s {count} accelerators are not a multiple of "
                    f"{derived.per_process} per process x stride {derived.stride} = {block}",
                )

    def _run_eval(self) -> ModelParallelLayout:
        # RLinf's ModelParallelEvalComponentPlacement: rollout and reward only, collocated,
        # rollout engines of tensor_parallel_size GPUs without stride.
        for name in ("rollout", "reward"):
            if name not in self.gpus:
                raise _error(
                    _PLACEMENT, f"a reasoning_eval job needs a '{name}' component; none is placed"
                )
        rollout = self.gpus["rollout"]
        if not rollout.contiguous:
            raise _error(
                self._key_path("rollout"),
                "rollout's accelerators must form one contiguous range in a model-parallel job",
                rollout.text(),
            )
        self.rollout_pp()
        tp = self.rollout_tp()
        if tp > len(rollout):
            raise _error(
                "rollout.tensor_parallel_size",
                f"rollout's tensor parallel size exceeds its {len(rollout)} accelerator(s)",
                tp,
            )
        derived = {"rollout": _Derived(rollout.first, rollout.last, tp)}
        if self.gpus["reward"]:
            derived["reward"] = _Derived(self.gpus["reward"].first, self.gpus["reward"].last)
        self._check_blocks(derived)
        return ModelParallelLayout("eval", self._config_with(derived), tuple(derived))

    def run(self) -> ModelParallelLayout:
        if self.doc.get("runner.task_type", None) == "reasoning_eval":
            return self._run_eval()
        self._check_inputs()
        num_gpus = self._space(self.rules["actor"].node_groups, None).size
        mode = self._mode(num_gpus)
        self._sanity(mode, num_gpus)
        derived = self._derive(mode, num_gpus)
        return ModelParallelLayout(mode, self._config_with(derived), tuple(derived))

    def _config_with(self, derived: Mapping[str, _Derived]) -> ClusterConfig:
        groups = self.group_sizes(derived)
        sources = {name: name for name in derived}
        for name in ("inference", "actor_inference"):
            if name in derived:
                sources[name] = self.inference_key or name
        placement: dict[str, Any] = {}
        written = self.doc.get("cluster.component_placement")
        for key, value in written.items():
            names = [n.strip() for n in str(key).split(",")]
            kept = [n for n in names if n not in sources.values()]
            for name in names:
                target = next((t for t, s in sources.items() if s == name), None)
                if target is not None:
                    placement[target] = _rule(
                        self.rules[name], derived[target], target, groups.get(target)
                    )
            if kept:
                placement[",".join(kept)] = value
        for target in derived:
            placement.setdefault(
                target,
                _rule(self.rules[sources[target]], derived[target], target, groups.get(target)),
            )
        cluster = {**self.doc.raw("cluster"), "component_placement": placement}
        return load_config({**self.doc.document, "cluster": cluster})


def _rule(
    written: ComponentRule, derived: _Derived, target: str, nvlink_group: int | None = None
) -> dict[str, Any]:
    count = derived.last - derived.first + 1
    processes = count // derived.per_process
    text = f"{derived.first}-{derived.last}" if count > 1 else str(derived.first)
    if derived.per_process > 1:
        text += f":0-{processes - 1}" if processes > 1 else ":0"
    rule: dict[str, Any] = {"node_group": list(written.node_groups), "placement": text}
    if derived.stride > 1 and derived.per_process > 1:  # stride spreads multi-GPU engines
        rule["stride"] = derived.stride
    # What RLinf has no word for is the written rule's, and stays.
    if written.topology == "best" and derived.stride > 1:
        raise _error(
            f"{_PLACEMENT}.{written.key}.topology",
            f"topology: best cannot apply to {target}: RLinf strides its processes across "
            f"the actor's shards (stride {derived.stride}, for weight sync on the same "
            "devices), and best would regroup them; use topology: any (each process's "
            "link is still reported) or nvlink (checks the strided groups as they are)",
            written.topology,
        )
    if written.topology != "any":
        rule["topology"] = written.topology
    if written.numa_node is not None:
        rule["numa_node"] = written.numa_node
    if nvlink_group is not None:
        rule["nvlink_group"] = nvlink_group
    elif written.nvlink_group is not None:
        rule["nvlink_group"] = written.nvlink_group
    return rule


def _error(path: str, message: str, value: Any = None) -> ConfigError:
    return ConfigError([Problem(path, message, value)])
