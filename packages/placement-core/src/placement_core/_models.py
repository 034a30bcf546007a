"""The cluster config's models: every YAML key declared once.

See docs/concepts/cluster-config.md and docs/concepts/placement-language.md.

A key is one pydantic field of the model of its mapping: its type (an annotated alias from
:mod:`placement_core._fields`, or an inline ``Annotated`` with bounds) holds its parsing,
bounds and the words of its errors; the field holds its default, its YAML spelling
(``alias``) and its description. Rules that relate several fields or parts are the
model's ``checks``: functions of a :class:`~placement_core._validate.Part` (the valid
fields), run whether or not other fields are broken. :mod:`placement_core._validate`
walks a document through these declarations in one pass; the JSON Schema is generated
from them (:mod:`placement_core._schema`). Build a :class:`ClusterConfig` with
:func:`placement_core.load_config`, which reports every problem with its YAML path.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Annotated, Any, ClassVar, cast

from pydantic import (
    AfterValidator,
    BeforeValidator,
    Field,
    PrivateAttr,
    ValidationError,
    ValidationInfo,
)

from ._checks import cross_check, group_check, unknown_group_message
from ._errors import PlacementRuleError
from ._fields import (
    RANK_BUDGET,
    EnvVars,
    GroupLabels,
    InterpreterPath,
    Label,
    NodeRanks,
    NonNegativeInt,
    PlacementText,
    PositiveInt,
    SpareNodes,
)
from ._hardware import HardwareConfig, hardware_model, registered_hardware
from ._inventory import MAX_ACCELERATORS_PER_NODE, MAX_NODES
from ._limits import MAX_EXPANDED_RANKS
from ._memory_units import ByteSize
from ._nvlink_fields import DomainName, NvlinkGroup
from ._problems import Issues, did_you_mean, issue, issues_from
from ._ranks import format_rank_list
from ._rule_grammar import parse_rule, spans_resources
from ._shown import shown
from ._validate import Check, ConfigModel, Issue, Part
from ._vocab import (
    RESERVED_LABELS,
    RLINF_CLUSTER_KEYS,
    AcceleratorName,
    FabricHealthPolicy,
    NodeOrder,
    NvlinkOnLoss,
    TopologyMode,
)

__all__ = [
    "AcceleratorSpec",
    "ClusterConfig",
    "ComponentRule",
    "ConfigModel",
    "EnvConfig",
    "HardwareSpec",
    "InventoryEntry",
    "NodeGroup",
]


_Model = ConfigModel


def _strided_topology(rule: Part) -> Iterable[Issue]:
    if rule.get("topology") == "best" and (rule.get("stride") or 1) > 1:
        yield (
            ".topology",
            "topology: best would regroup the accelerators that stride pairs on "
            "purpose (one from each trainer shard, for weight sync on the same "
            "devices); use topology: any (each process's link is still reported) or "
            "nvlink (checks the strided groups without regrouping them)",
            "best",
        )


def _stride_has_effect(rule: Part) -> Iterable[Issue]:
    stride, text = rule.get("stride"), rule.get("placement")
    if stride is None or stride == 1 or text is None:
        return
    if any(spans_resources(segment) for segment in parse_rule(text).segments):
        return
    yield (
        ".stride",
        f"stride {stride} has no effect: each process of placement {shown(text)} holds one "
        "resource, and stride only spreads the resources of a process that spans several "
        "(such as '0-15:0-3'); remove stride or give each process several resources",
        stride,
    )


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
            accelerators). See :mod:`placement_core._topology_plan`.
        numa_node: For node and hardware placements: run the processes on the CPUs of
            this NUMA node (split between the component's processes on each node).
        nvlink_group: Every ``nvlink_group`` consecutive processes (by rank) lie in one
            NVLink domain; ``"all"``: every process of the component. None: no
            constraint. See docs/concepts/nvlink-domains.md.
    """

    key: str
    node_groups: GroupLabels = Field(("cluster",), alias="node_group")
    placement: PlacementText
    stride: PositiveInt = 1
    topology: TopologyMode = "any"
    numa_node: NonNegativeInt | None = None
    nvlink_group: NvlinkGroup | None = None

    short_form: ClassVar[str | None] = "placement"
    key_field: ClassVar[str | None] = "key"
    not_a_mapping: ClassVar[str] = (
        "expected a rule such as '0-7', or a mapping with placement "
        "(and optionally node_group, stride, topology, numa_node)"
    )

    @property
    def names(self) -> tuple[str, ...]:
        """The component names of the key (``"actor,inference"`` gives two)."""
        return tuple(name.strip() for name in self.key.split(","))

    checks: ClassVar[tuple[Check, ...]] = (_strided_topology, _stride_has_effect)


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


def _registered_type(value: str) -> str:
    if hardware_model(value) is None:
        raise issue(
            f"unknown hardware type; registered types: {', '.join(registered_hardware())}"
            + did_you_mean(value, registered_hardware()),
            value,
        )
    return value


def _typed_configs(value: object, info: ValidationInfo) -> object:
    # Validated on its own, the field finds the type (the field before) in the context.
    fields = info.data if info.data is not None else (info.context or {}).get("fields", {})
    model = hardware_model(fields.get("type", ""))
    if model is None:
        return ()  # the unknown type is reported on its own
    if not isinstance(value, list | tuple):
        raise issue("expected a list with one config per device", value)
    if not value:
        raise issue("expected at least one device config", value)
    issues: list[tuple[str, str, object]] = []
    configs: list[HardwareConfig | None] = []
    for i, item in enumerate(value):
        if isinstance(item, model):
            configs.append(item)
            continue
        try:
            configs.append(model.model_validate(item))
        except ValidationError as error:
            configs.append(None)
            issues += [(f"[{i}]{s}", m, v) for s, m, v in issues_from(error, model)]
    dumps: list[dict[str, Any] | None] = []
    for i, config in enumerate(configs):
        dump = config.model_dump() if config is not None else None
        if dump is not None and dump in dumps:
            issues.append(
                (f"[{i}]", f"identical to configs[{dumps.index(dump)}]: each device once", None)
            )
        dumps.append(dump)
    if issues:
        raise Issues(issues, partial=tuple(configs))
    return tuple(configs)


class HardwareSpec(_Model):
    """The non-accelerator hardware of a node group: one config per device.

    Attributes:
        type: A registered hardware type (``Franka``, or one added by
            :func:`placement_core.register_hardware`).
        configs: One config per device, validated by the type's model; each has a
            ``node_rank``. ``.model_dump()`` gives the device's settings.
    """

    type: Annotated[str, AfterValidator(_registered_type)]
    configs: Annotated[tuple[HardwareConfig, ...], BeforeValidator(_typed_configs)] = Field(
        json_schema_extra={"description": "one config per device (fields depend on type)"}
    )


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

    checks: ClassVar[tuple[Check, ...]] = (group_check,)

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
    memory_bytes: ByteSize | None = Field(
        None, description="each accelerator's memory (default: from the model's name)"
    )


class InventoryEntry(_Model):
    """Offline inventory: these nodes each have ``accelerators``.

    See docs/concepts/cluster-config.md#where-the-inventory-comes-from.

    Attributes:
        node_ranks: The nodes described, in the inventory's own order (before
            ``node_order`` renumbers them).
        accelerators: Each node's accelerators.
        nvlink_domain: The NVLink domain the nodes belong to, or None (each node is
            then a domain of its own). See docs/concepts/nvlink-domains.md.
        host_memory_bytes: Each node's host memory (for the memory check), or None.
    """

    node_ranks: NodeRanks
    accelerators: AcceleratorSpec
    nvlink_domain: DomainName | None = None
    host_memory_bytes: ByteSize | None = Field(None, description="each node's host memory")


class ClusterConfig(_Model):
    """The ``cluster:`` section: nodes, node groups, component placement, inventory.

    ``spare_nodes`` (a rank list, or NVLink domain -> how many of its last nodes) are
    nodes no component may use, kept to take over the processes of a lost node (see
    :func:`placement_core.replan`). ``fabric_health`` says what a plan does with nodes
    whose NVLink fabric is degraded, ``nvlink_on_loss`` what ``replan`` does when no
    spare keeps a lost node's ``nvlink_group`` in one domain (see
    docs/concepts/nvlink-domains.md).

    Build it with :func:`load_config`, which reports every problem with its YAML path.
    """

    num_nodes: Annotated[int, Field(strict=True, gt=0, le=MAX_NODES)]
    component_placement: dict[str, ComponentRule]
    node_groups: tuple[NodeGroup, ...] = ()
    inventory: tuple[InventoryEntry, ...] = ()
    node_order: NodeOrder = "inventory"
    spare_input: SpareNodes = Field(
        default=(),
        alias="spare_nodes",
        description="nodes no component may use, kept to take over a lost node's processes: "
        "a rank list, or NVLink domain -> how many of its last nodes",
    )
    fabric_health: FabricHealthPolicy | None = Field(
        default=None,
        description="nodes with a degraded NVLink fabric: refuse, warn or ignore (default: "
        "refuse when a rule has nvlink_group, else warn)",
    )
    nvlink_on_loss: NvlinkOnLoss = Field(
        default="warn",
        description="replan when no spare keeps a lost node's nvlink_group in one domain: "
        "warn (move anyway) or refuse",
    )

    _components: dict[str, ComponentRule] | None = PrivateAttr(default=None)
    _ignored_keys: tuple[str, ...] = PrivateAttr(default=())
    _environments: dict[str, dict[int, tuple[str | None, dict[str, str]]]] = PrivateAttr(
        default_factory=dict
    )

    # RLinf's own cluster settings are accepted and set aside, so that any other unknown
    # key is still an error.
    set_aside: ClassVar[tuple[str, ...]] = RLINF_CLUSTER_KEYS
    checks: ClassVar[tuple[Check, ...]] = (cross_check,)

    @classmethod
    def validation_context(cls, raw: Mapping[Any, Any]) -> dict[str, Any]:
        """``num_nodes`` (None when broken: ``all`` then has no set to expand to) and the
        budget of node ranks the document's rank lists may expand to."""
        num_nodes = raw.get("num_nodes")
        return {
            "num_nodes": num_nodes if type(num_nodes) is int and num_nodes > 0 else None,
            RANK_BUDGET: [MAX_EXPANDED_RANKS],
        }

    def set_aside_keys(self, keys: tuple[str, ...]) -> None:
        """Record RLinf's keys of the section (see :attr:`ignored_keys`)."""
        self._ignored_keys = keys

    def __eq__(self, other: object) -> bool:
        # Fields only: the private lookup caches must not make equal configs differ.
        if not isinstance(other, ClusterConfig):
            return NotImplemented
        return self.__dict__ == other.__dict__

    __hash__ = None  # type: ignore[assignment]  # component_placement is a dict

    @property
    def spare_nodes(self) -> tuple[int, ...]:
        """The spare node ranks; ``()`` while ``spare_nodes`` names domains and the
        inventory has not resolved them (:func:`placement_core.plan` does)."""
        return self.spare_input if isinstance(self.spare_input, tuple) else ()

    @property
    def spare_domains(self) -> dict[str, int]:
        """NVLink domain -> how many of its last nodes are spares; ``{}`` for a rank list."""
        return dict(self.spare_input) if isinstance(self.spare_input, dict) else {}

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
            fields: dict[str, Any] = {"label": label, "node_ranks": tuple(range(self.num_nodes))}
            return cast("NodeGroup", NodeGroup.model_construct(**fields))
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
