"""The pydantic models of the cluster config.

See docs/concepts/cluster-config.md and docs/concepts/placement-language.md.

Field types come from :mod:`placement_core._fields`; the rules relating different parts
of a config from :mod:`placement_core._checks`. Build a :class:`ClusterConfig` with
:func:`placement_core.config.load_config`, which reports every problem with its YAML path.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Self

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ModelWrapValidatorHandler,
    PrivateAttr,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from ._checks import (
    ConfigFacts,
    EnvFacts,
    GroupFacts,
    HardwareFacts,
    RuleFacts,
    cross_check,
    group_check,
    unknown_group_message,
)
from ._fields import (
    EnvVars,
    GroupLabels,
    InterpreterPath,
    Label,
    NodeRanks,
    NonNegativeInt,
    PlacementText,
    PositiveInt,
)
from ._problems import Issues, did_you_mean, issue, issues_from
from ._scalars import is_int
from ._vocab import RESERVED_LABELS, RLINF_CLUSTER_KEYS, AcceleratorName, TopologyMode
from .errors import PlacementRuleError
from .hardware import HardwareConfig, hardware_model, registered_hardware
from .inventory import MAX_ACCELERATORS_PER_NODE, MAX_NODES
from .ranks import format_rank_list

__all__ = [
    "AcceleratorSpec",
    "ClusterConfig",
    "ComponentRule",
    "EnvConfig",
    "HardwareSpec",
    "InventoryEntry",
    "NodeGroup",
]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ComponentRule(_Model):
    """Where one ``component_placement`` entry puts its processes.

    See docs/concepts/placement-language.md.

    Attributes:
        key: The YAML key it came from (``"actor,inference"``), used in error paths.
        node_groups: The groups whose resource spaces are concatenated, in order
            (YAML ``node_group``: a label, ``"a800,4090"`` or a list). Default ``cluster``.
        placement: The rule text as written (a YAML int becomes its string).
        stride: Packed-with-stride inside each segment where a process spans resources.
        topology: How multi-accelerator processes are formed from the rule's accelerators
            on each node (matters with node snapshots): ``any`` (index order, the
            default), ``best`` (the grouping with the best worst link) or ``nvlink``
            (``best``, and fail unless every process has NVLink between all its
            accelerators). See :mod:`placement_core.topology`.
        numa_node: For node and hardware placements: run the processes on the CPUs of
            this NUMA node (split between the component's processes on each node).
    """

    key: str
    node_groups: GroupLabels = ("cluster",)
    placement: PlacementText
    stride: PositiveInt = 1
    topology: TopologyMode = "any"
    numa_node: NonNegativeInt | None = None

    @property
    def names(self) -> tuple[str, ...]:
        """The component names of the key (``"actor,inference"`` gives two)."""
        return tuple(name.strip() for name in self.key.split(","))

    @model_validator(mode="before")
    @classmethod
    def _yaml_spelling(cls, data: Any) -> Any:
        # YAML writes `node_group` (one label or several); the field holds a tuple.
        if isinstance(data, Mapping) and "node_group" in data:
            if "node_groups" in data:
                raise issue("give node_group only (node_groups is its internal name)")
            data = {("node_groups" if k == "node_group" else k): v for k, v in data.items()}
        return data

    @model_validator(mode="after")
    def _strided_topology(self) -> Self:
        if self.topology == "best" and self.stride > 1:
            raise issue(
                "topology: best would regroup the accelerators that stride pairs on "
                "purpose (one from each trainer shard, for weight sync on the same "
                "devices); use topology: any (each process's link is still reported) or "
                "nvlink (checks the strided groups without regrouping them)",
                "best",
                ".topology",
            )
        return self


class EnvConfig(_Model):
    """The software environment of a subset of a node group's nodes.

    Attributes:
        node_ranks: Nodes it applies to; a subset of the group's ``node_ranks``.
        python_interpreter_path: The interpreter workers on these nodes run with.
        env_vars: ``(key, value)`` pairs with string values; YAML gives a list of
            single-key maps (a plain mapping is accepted too). A key is set at most once
            per node across all groups, and never to a variable placement sets itself.
    """

    node_ranks: NodeRanks
    python_interpreter_path: InterpreterPath | None = None
    env_vars: EnvVars = ()


class HardwareSpec(_Model):
    """The non-accelerator hardware of a node group: one config per device.

    Attributes:
        type: A registered hardware type (``Franka``, or one added by
            :func:`placement_core.hardware.register_hardware`).
        configs: One config per device, validated by the type's model; each has a
            ``node_rank``. ``.model_dump()`` gives the device's settings.
    """

    type: str
    configs: tuple[HardwareConfig, ...] = Field(
        json_schema_extra={"description": "one config per device (fields depend on type)"}
    )

    @field_validator("type")
    @classmethod
    def _registered(cls, value: str) -> str:
        if hardware_model(value) is None:
            raise issue(
                f"unknown hardware type; registered types: {', '.join(registered_hardware())}"
                + did_you_mean(value, registered_hardware()),
                value,
            )
        return value

    @field_validator("configs", mode="before")
    @classmethod
    def _typed_configs(cls, value: object, info: ValidationInfo) -> object:
        model = hardware_model(info.data.get("type", ""))
        if model is None:
            return ()  # the unknown type is reported on its own
        if not isinstance(value, list | tuple):
            raise issue("expected a list with one config per device", value)
        if not value:
            raise issue("expected at least one device config", value)
        issues: list[tuple[str, str, object]] = []
        configs: list[HardwareConfig] = []
        for i, item in enumerate(value):
            if isinstance(item, model):
                configs.append(item)
                continue
            try:
                configs.append(model.model_validate(item))
            except ValidationError as error:
                issues += [(f"[{i}]{s}", m, v) for s, m, v in issues_from(error, model)]
        dumps: list[dict[str, Any]] = []
        for i, config in enumerate(configs):
            dump = config.model_dump()
            if dump in dumps:
                issues.append(
                    (f"[{i}]", f"identical to configs[{dumps.index(dump)}]: each device once", None)
                )
            dumps.append(dump)
        if issues:
            raise Issues(issues)
        return tuple(configs)


class NodeGroup(_Model):
    """A labelled set of nodes with the same hardware and software environment.

    Attributes:
        label: Unique, case-sensitive; ``cluster`` and ``node`` are reserved.
        node_ranks: The group's nodes, sorted and unique.
        env_configs: Software environments of subsets of the nodes.
        hardware: The group's non-accelerator hardware, if any.
    """

    label: Label
    node_ranks: NodeRanks
    env_configs: tuple[EnvConfig, ...] = ()
    hardware: HardwareSpec | None = None

    @model_validator(mode="after")
    def _inside_group(self) -> Self:
        issues = list(group_check(_group_facts(self)))
        if issues:
            raise Issues(issues)
        return self

    def environment(self, node_rank: int) -> tuple[str | None, dict[str, str]]:
        """``(python_interpreter_path, env_vars)`` this group gives ``node_rank``."""
        for env in self.env_configs:
            if node_rank in env.node_ranks:
                return env.python_interpreter_path, dict(env.env_vars)
        return None, {}


class AcceleratorSpec(_Model):
    """The accelerators of each node of an inventory entry."""

    type: AcceleratorName = "nvidia"
    model: str | None = None
    count: Annotated[int, Field(strict=True, ge=0, le=MAX_ACCELERATORS_PER_NODE)]


class InventoryEntry(_Model):
    """Offline inventory: these nodes each have ``accelerators``.

    See docs/concepts/cluster-config.md#where-the-inventory-comes-from.
    """

    node_ranks: NodeRanks
    accelerators: AcceleratorSpec


class ClusterConfig(_Model):
    """The ``cluster:`` section: nodes, node groups, component placement, inventory.

    Build it with :func:`load_config`, which reports every problem with its YAML path.
    """

    num_nodes: Annotated[int, Field(strict=True, gt=0, le=MAX_NODES)]
    component_placement: dict[str, ComponentRule]
    node_groups: tuple[NodeGroup, ...] = ()
    inventory: tuple[InventoryEntry, ...] = ()

    _components: dict[str, ComponentRule] | None = PrivateAttr(default=None)
    _ignored_keys: tuple[str, ...] = PrivateAttr(default=())
    _environments: dict[str, dict[int, tuple[str | None, dict[str, str]]]] = PrivateAttr(
        default_factory=dict
    )

    @model_validator(mode="wrap")
    @classmethod
    def _rlinf_keys(cls, data: Any, handler: ModelWrapValidatorHandler[Self]) -> Self:
        # RLinf's own cluster settings are accepted and set aside, so that any other
        # unknown key is still an error.
        if not isinstance(data, Mapping) or not any(k in RLINF_CLUSTER_KEYS for k in data):
            return handler(data)
        config = handler({k: v for k, v in data.items() if k not in RLINF_CLUSTER_KEYS})
        config._ignored_keys = tuple(k for k in data if k in RLINF_CLUSTER_KEYS)
        return config

    @model_validator(mode="before")
    @classmethod
    def _keyed_rules(cls, data: Any) -> Any:
        if not isinstance(data, Mapping) or not isinstance(
            data.get("component_placement"), Mapping
        ):
            return data
        rules: dict[str, Any] = {}
        for key, rule in data["component_placement"].items():
            name = key if isinstance(key, str) else str(key)
            if is_int(rule) or isinstance(rule, str):
                rules[name] = {"key": name, "placement": rule}
            elif isinstance(rule, Mapping):
                rules[name] = {"key": name, **rule} if "key" not in rule else dict(rule)
            else:
                rules[name] = rule
        return {**data, "component_placement": rules}

    @model_validator(mode="after")
    def _cross_checks(self) -> Self:
        issues = list(cross_check(_config_facts(self)))
        if issues:
            raise Issues(issues)
        return self

    def __eq__(self, other: object) -> bool:
        # Fields only: the private lookup caches must not make equal configs differ.
        if not isinstance(other, ClusterConfig):
            return NotImplemented
        return self.__dict__ == other.__dict__

    __hash__ = None  # type: ignore[assignment]  # component_placement is a dict

    @property
    def ignored_keys(self) -> tuple[str, ...]:
        """Keys of the section used by RLinf and ignored by placement, in document order.

        RLinf's scheduler, tracing and communication settings (``auto_scheduler``,
        ``use_pre_process_policy``, ``tracer``, ``net_emulation``, ...).
        """
        return self._ignored_keys

    def components(self) -> dict[str, ComponentRule]:
        """One entry per component name, in config order (``actor,inference`` gives two)."""
        if self._components is None:
            self._components = {
                name: rule for rule in self.component_placement.values() for name in rule.names
            }
        return dict(self._components)

    @property
    def labels(self) -> tuple[str, ...]:
        """The labels of the declared node groups, in config order."""
        return tuple(group.label for group in self.node_groups)

    def group(self, label: str) -> NodeGroup:
        """The node group called ``label``.

        The reserved ``cluster`` and ``node`` groups are returned as groups of every node.

        Raises:
            PlacementRuleError: No group has this label.
        """
        for group in self.node_groups:
            if group.label == label:
                return group
        if label in RESERVED_LABELS:
            return NodeGroup(label=label, node_ranks=tuple(range(self.num_nodes)))
        raise PlacementRuleError(unknown_group_message(label, self.labels), path="node_group")

    def node_environment(self, label: str, node_rank: int) -> tuple[str | None, dict[str, str]]:
        """``(python_interpreter_path, env_vars)`` that group ``label`` gives ``node_rank``.

        ``(None, {})`` for the reserved groups ``cluster`` and ``node``. The returned dict
        is a fresh copy.

        Raises:
            PlacementRuleError: The group does not exist or does not contain the node.
        """
        if label in RESERVED_LABELS and label not in self.labels:
            return None, {}
        table = self._environments.get(label)
        if table is None:
            group = self.group(label)
            table = {rank: group.environment(rank) for rank in group.node_ranks}
            self._environments[label] = table
        try:
            interpreter, env = table[node_rank]
        except KeyError:
            raise PlacementRuleError(
                f"node {node_rank} is not in node group {label!r} "
                f"(node_ranks {format_rank_list(self.group(label).node_ranks)})",
                path="node_rank",
            ) from None
        return interpreter, dict(env)


def _group_facts(group: NodeGroup) -> GroupFacts:
    hardware = group.hardware
    return GroupFacts(
        label=group.label,
        node_ranks=group.node_ranks,
        env_configs=tuple(
            EnvFacts(env.node_ranks, env.python_interpreter_path, env.env_vars)
            for env in group.env_configs
        ),
        hardware=None if hardware is None else HardwareFacts(hardware.type, hardware.configs),
    )


def _config_facts(config: ClusterConfig) -> ConfigFacts:
    return ConfigFacts(
        num_nodes=config.num_nodes,
        groups=tuple(_group_facts(group) for group in config.node_groups),
        rules=tuple(
            RuleFacts(key, rule.key if rule.key != key else None, rule.node_groups)
            for key, rule in config.component_placement.items()
        ),
        inventory=tuple(entry.node_ranks for entry in config.inventory),
    )
