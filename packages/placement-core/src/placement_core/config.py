"""The cluster configuration: the ``cluster:`` section of a job's YAML (SPEC 3, 5).

``load_config`` reads a path, a YAML string or a mapping (a Hydra/OmegaConf-composed dict)
and returns a frozen :class:`ClusterConfig`. Every rule of SPEC 3 is checked, and every
problem of one config is reported together in one :class:`~placement_core.errors.ConfigError`
whose :class:`~placement_core.errors.Problem` entries carry YAML paths such as
``cluster.node_groups[1].env_configs[0].node_ranks``.

Checks run in two passes: field-level checks (types, unknown keys, rank lists, rule syntax,
one node group's own consistency) over the whole document, then the rules that relate
different parts of the config (unique labels, known groups, env vars per node, ...). The
second pass runs on whatever parts are valid (:class:`~placement_core._checks.ConfigFacts`),
so a broken field does not hide problems elsewhere, and a rule whose own inputs are
broken is skipped rather than reported a second time.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Annotated, Any, Literal, Self

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PrivateAttr,
    TypeAdapter,
    ValidationError,
    ValidationInfo,
    WithJsonSchema,
    field_validator,
    model_validator,
)

from ._checks import (
    RESERVED_LABELS,
    ConfigFacts,
    EnvFacts,
    GroupFacts,
    HardwareFacts,
    RuleFacts,
    cross_check,
    group_check,
    nodes,
    rule_syntax_error,
    unknown_group_message,
)
from ._problems import Issues, did_you_mean, issue, issues_from, problems_from_validation_error
from ._yamlio import plain, read_document
from .errors import ConfigError, PlacementError, PlacementRuleError, Problem
from .hardware import HardwareConfig, hardware_model, registered_hardware
from .inventory import MAX_ACCELERATORS_PER_NODE, MAX_NODES
from .ranks import format_rank_list, parse_rank_list

__all__ = [
    "ACCELERATOR_TYPES",
    "RESERVED_LABELS",
    "AcceleratorSpec",
    "ClusterConfig",
    "ComponentRule",
    "EnvConfig",
    "HardwareSpec",
    "InventoryEntry",
    "NodeGroup",
    "config_json_schema",
    "load_config",
]

ACCELERATOR_TYPES = ("nvidia", "amd", "ascend", "intel", "musa", "kunlun")
ROOT = "cluster"

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


# --------------------------------------------------------------------------- field types


_RANK_LIST_SCHEMA: dict[str, Any] = {
    "description": "rank list: '0-3,8,10-11', 'all', an int, or a list of ints and range strings",
    "anyOf": [
        {"type": "string"},
        {"type": "integer", "minimum": 0},
        {
            "type": "array",
            "items": {"anyOf": [{"type": "integer", "minimum": 0}, {"type": "string"}]},
        },
    ],
}


def _node_ranks(value: object, info: ValidationInfo) -> tuple[int, ...]:
    if isinstance(value, tuple) and all(type(v) is int for v in value):
        value = list(value)
    context = info.context or {}
    given = context.get("num_nodes")
    num_nodes = given if isinstance(given, int) and given > 0 else None
    if "num_nodes" in context and num_nodes is None and _mentions_all(value):
        raise issue(_ALL_UNRESOLVED)  # num_nodes is broken and reported by itself
    try:
        ranks = parse_rank_list(
            value, available=range(num_nodes) if num_nodes and _mentions_all(value) else None
        )
    except PlacementError as error:
        raise issue(error.reason, None, error.path or "") from None
    if num_nodes is not None and (bad := [r for r in ranks if r >= num_nodes]):
        raise issue(
            f"{nodes(bad)} {'is' if len(bad) == 1 else 'are'} out of range: num_nodes is "
            f"{num_nodes}, so valid node ranks are 0-{num_nodes - 1}",
            format_rank_list(ranks),
        )
    return ranks


_ALL_UNRESOLVED = "'all' cannot be resolved: num_nodes is invalid"


def _mentions_all(value: object) -> bool:
    items = value if isinstance(value, list | tuple) else [value]
    return any(isinstance(item, str) and "all" in item.lower() for item in items)


NodeRanks = Annotated[
    tuple[int, ...], BeforeValidator(_node_ranks), WithJsonSchema(_RANK_LIST_SCHEMA)
]
PositiveInt = Annotated[int, Field(strict=True, gt=0)]
NonNegativeInt = Annotated[int, Field(strict=True, ge=0)]


def _label(value: object) -> object:
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)  # `label: 4090` is an int in YAML
    if isinstance(value, str):
        if not value.strip():
            raise issue("a label cannot be empty", value)
        if value != value.strip() or "," in value:
            raise issue(
                "a label cannot contain commas or leading/trailing spaces "
                "(commas separate labels in node_group)",
                value,
            )
    return value


Label = Annotated[
    str,
    BeforeValidator(_label),
    WithJsonSchema({"description": "group label", "type": ["string", "integer"]}),
]


def _env_vars(value: object) -> object:
    if isinstance(value, Mapping):
        value = [{k: v} for k, v in value.items()]
    if not isinstance(value, list | tuple):
        raise issue(
            "expected a list of single-key maps such as [{GLOO_SOCKET_IFNAME: eth0}]", value
        )
    issues: list[tuple[str, str, object]] = []
    pairs: list[tuple[str, str]] = []
    seen: dict[str, int] = {}
    for i, item in enumerate(value):
        if isinstance(item, tuple) and len(item) == 2:
            key, raw = item
        elif isinstance(item, Mapping) and len(item) == 1:
            ((key, raw),) = item.items()
        else:
            issues.append(
                (f"[{i}]", "expected a single-key map such as {GLOO_SOCKET_IFNAME: eth0}", item)
            )
            continue
        if not isinstance(key, str) or not _ENV_NAME.match(key):
            issues.append(
                (
                    f"[{i}]",
                    "expected an environment variable name (letters, digits, '_'; "
                    "not starting with a digit)",
                    key,
                )
            )
            continue
        if isinstance(raw, bool) or raw is None or not isinstance(raw, str | int | float):
            hint = (
                " (YAML reads yes/no/on/off/true/false as booleans and ~/null as null: "
                "quote the value)"
                if isinstance(raw, bool) or raw is None
                else ""
            )
            issues.append((f"[{i}].{key}", f"expected a string or number value{hint}", raw))
            continue
        if key in seen:
            issues.append(
                (
                    f"[{i}]",
                    f"{key} is already set by env_vars[{seen[key]}] of this env_config",
                    None,
                )
            )
            continue
        seen[key] = i
        pairs.append((key, str(raw)))
    if issues:
        raise Issues(issues)
    return tuple(pairs)


EnvVars = Annotated[
    tuple[tuple[str, str], ...],
    BeforeValidator(_env_vars),
    WithJsonSchema(
        {
            "description": "list of single-key maps, e.g. [{GLOO_SOCKET_IFNAME: eth0}]",
            "type": "array",
            "items": {
                "type": "object",
                "minProperties": 1,
                "maxProperties": 1,
                "additionalProperties": {"type": ["string", "number"]},
            },
        }
    ),
]


def _node_group_labels(value: object) -> object:
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    if isinstance(value, str):
        items: list[object] = [part.strip() for part in value.split(",")]
    elif isinstance(value, list | tuple):
        items = [str(v) if isinstance(v, int) and not isinstance(v, bool) else v for v in value]
    else:
        raise issue("expected a group label, 'a800,4090', or a list of labels", value)
    issues: list[tuple[str, str, object]] = []
    labels: list[str] = []
    for i, item in enumerate(items):
        suffix = f"[{i}]" if isinstance(value, list | tuple) else ""
        if not isinstance(item, str) or not item.strip():
            issues.append((suffix, "expected a non-empty group label", item))
        elif item.strip() in labels:
            issues.append((suffix, f"group {item.strip()!r} is listed twice", value))
        else:
            labels.append(item.strip())
    if not items:
        issues.append(("", "expected at least one group label", value))
    if issues:
        raise Issues(issues)
    return tuple(labels)


GroupLabels = Annotated[tuple[str, ...], BeforeValidator(_node_group_labels)]


def _interpreter(value: str) -> str:
    if not value.strip():
        raise issue("expected a path to a Python interpreter, got an empty string", value)
    return value


InterpreterPath = Annotated[str, AfterValidator(_interpreter)]


def _placement_text(value: object) -> object:
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    if not isinstance(value, str) or not value.strip():
        raise issue("expected a placement rule such as '0-7' or '0-15:0-3'", value)
    return value


# --------------------------------------------------------------------------- models


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ComponentRule(_Model):
    """Where one ``component_placement`` entry puts its processes (SPEC 5).

    Attributes:
        key: The YAML key it came from (``"actor,inference"``), used in error paths.
        node_groups: The groups whose resource spaces are concatenated, in order
            (YAML ``node_group``: a label, ``"a800,4090"`` or a list). Default ``cluster``.
        placement: The rule text as written (a YAML int becomes its string).
        stride: Packed-with-stride inside each segment where a process spans resources.
    """

    key: str
    node_groups: GroupLabels = ("cluster",)
    placement: Annotated[
        str,
        BeforeValidator(_placement_text),
        WithJsonSchema(
            {
                "description": "'resources[:processes]' segments, e.g. '0-7' or '0-15:0-3'",
                "type": ["string", "integer"],
            }
        ),
    ]
    stride: PositiveInt = 1

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

    @field_validator("placement")
    @classmethod
    def _syntax(cls, text: str) -> str:
        error = rule_syntax_error(text)
        if error is not None:
            raise issue(error)
        return text


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

    type: Literal["nvidia", "amd", "ascend", "intel", "musa", "kunlun"] = "nvidia"
    model: str | None = None
    count: Annotated[int, Field(strict=True, ge=0, le=MAX_ACCELERATORS_PER_NODE)]


class InventoryEntry(_Model):
    """Offline inventory: these nodes each have ``accelerators`` (SPEC 3.1)."""

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
    _environments: dict[str, dict[int, tuple[str | None, dict[str, str]]]] = PrivateAttr(
        default_factory=dict
    )

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
            if isinstance(rule, int | str) and not isinstance(rule, bool):
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


def _cluster_section(document: Any, name: str) -> Mapping[str, Any]:
    if isinstance(document, str) and name == "<string>":
        raise ConfigError(
            [
                Problem(
                    name,
                    f"expected YAML with a top-level 'cluster:' key, got the text {document!r} "
                    "(if it is a file path: no such file)",
                )
            ]
        )
    if not isinstance(document, Mapping):
        shown = "an empty document" if document is None else type(document).__name__
        raise ConfigError(
            [Problem(name, f"expected a mapping with a top-level 'cluster:' key, got {shown}")]
        )
    if ROOT in document:
        section = document[ROOT]
        if not isinstance(section, Mapping):
            raise ConfigError([Problem(ROOT, "expected a mapping", section)])
        return section
    if any(key in ClusterConfig.model_fields for key in document):
        return document
    raise ConfigError(
        [
            Problem(
                ROOT,
                "missing: the config needs a top-level 'cluster:' key "
                f"(found keys: {', '.join(map(str, document)) or 'none'})",
            )
        ]
    )


def load_config(
    source: str | os.PathLike[str] | Mapping[str, Any] | ClusterConfig,
) -> ClusterConfig:
    """Load and check a cluster config.

    Args:
        source: A path to a YAML file, YAML text, a mapping (e.g. a Hydra/OmegaConf
            config) or an already built :class:`ClusterConfig` (returned as is). The
            document has a top-level ``cluster:`` key (other top-level keys belong to the
            rest of the job's config and are left alone); a mapping that is the cluster
            section itself is accepted too.

    Returns:
        The frozen, checked config.

    Raises:
        ConfigError: The file cannot be read, the YAML does not parse, or the config
            breaks any rule of SPEC 3; ``problems`` lists every problem found, each with
            its YAML path, the offending value and the rule.
    """
    if isinstance(source, ClusterConfig):
        return source
    if isinstance(source, Mapping):
        document, name = plain(source), "<mapping>"
    else:
        document, name = read_document(source)
    section = _cluster_section(document, name)
    num_nodes = section.get("num_nodes")
    # num_nodes: None tells node_ranks that `all` has no set to expand to, for now.
    context = {"num_nodes": num_nodes if type(num_nodes) is int and num_nodes > 0 else None}
    try:
        return ClusterConfig.model_validate(section, context=context)
    except ValidationError as error:
        problems = [
            problem
            for problem in problems_from_validation_error(error, ClusterConfig)
            if problem.message != _ALL_UNRESOLVED
        ]
    # The config is broken somewhere: still run every cross-part rule whose inputs are valid.
    seen = {(p.path, p.message) for p in problems}
    for suffix, message, value in cross_check(_raw_facts(section, context), groups=True):
        problem = Problem(f"{ROOT}{suffix}", message, value)
        if (problem.path, problem.message) not in seen:
            seen.add((problem.path, problem.message))
            problems.append(problem)
    raise ConfigError(problems)


# --------------------------------------------------------------------------- facts


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


_NODE_RANKS: TypeAdapter[tuple[int, ...]] = TypeAdapter(NodeRanks)
_LABEL: TypeAdapter[str] = TypeAdapter(Label)
_ENV_VARS: TypeAdapter[tuple[tuple[str, str], ...]] = TypeAdapter(EnvVars)
_INTERPRETER: TypeAdapter[str] = TypeAdapter(InterpreterPath)
_GROUP_LABELS: TypeAdapter[tuple[str, ...]] = TypeAdapter(GroupLabels)
_POSITIVE: TypeAdapter[int] = TypeAdapter(PositiveInt)


def _valid(adapter: TypeAdapter[Any], raw: Mapping[str, Any], key: str, **context: Any) -> Any:
    """``raw[key]`` validated on its own, or None when it is missing or invalid."""
    if key not in raw:
        return None
    try:
        return adapter.validate_python(raw[key], context=context)
    except (ValidationError, PlacementError):
        return None


def _mappings(value: object) -> list[Mapping[str, Any]]:
    items = value if isinstance(value, list | tuple) else []
    return [item if isinstance(item, Mapping) else {} for item in items]


def _raw_hardware(raw: object) -> HardwareFacts | None:
    if not isinstance(raw, Mapping):
        return None
    kind = raw.get("type")
    model = hardware_model(kind) if isinstance(kind, str) else None
    if model is None:
        return HardwareFacts(None, ())
    configs: list[HardwareConfig | None] = []
    items = raw.get("configs")
    for item in items if isinstance(items, list | tuple) else ():
        try:
            configs.append(model.model_validate(item))
        except ValidationError:
            configs.append(None)
    return HardwareFacts(str(kind), tuple(configs))


def _rule_groups(rule: object) -> tuple[str, ...] | None:
    if not isinstance(rule, Mapping) or "node_group" not in rule:
        return ("cluster",)
    return _valid(_GROUP_LABELS, rule, "node_group")  # type: ignore[no-any-return]


def _raw_facts(section: Mapping[str, Any], context: Mapping[str, Any]) -> ConfigFacts:
    """The valid parts of a config that failed validation, each field checked on its own."""
    groups = None
    if isinstance(section.get("node_groups", ()), list | tuple):
        groups = tuple(
            GroupFacts(
                label=_valid(_LABEL, raw, "label"),
                node_ranks=_valid(_NODE_RANKS, raw, "node_ranks", **context),
                env_configs=tuple(
                    EnvFacts(
                        _valid(_NODE_RANKS, env, "node_ranks", **context),
                        _valid(_INTERPRETER, env, "python_interpreter_path"),
                        _valid(_ENV_VARS, env, "env_vars") if "env_vars" in env else (),
                    )
                    for env in _mappings(raw.get("env_configs", ()))
                ),
                hardware=_raw_hardware(raw.get("hardware")),
            )
            for raw in _mappings(section.get("node_groups", ()))
        )
    rules = None
    placement = section.get("component_placement")
    if isinstance(placement, Mapping):
        rules = tuple(
            RuleFacts(
                str(key),
                rule.get("key") if isinstance(rule, Mapping) else None,
                _rule_groups(rule),
            )
            for key, rule in placement.items()
        )
    return ConfigFacts(
        num_nodes=_valid(_POSITIVE, section, "num_nodes"),
        groups=groups,
        rules=rules,
        inventory=tuple(
            _valid(_NODE_RANKS, entry, "node_ranks", **context)
            for entry in _mappings(section.get("inventory", ()))
        ),
    )


# --------------------------------------------------------------------------- JSON schema


def config_json_schema() -> dict[str, Any]:
    """The JSON Schema of a config document (a top-level ``cluster:`` mapping).

    Hardware configs list every registered hardware type's fields.
    """
    schema = ClusterConfig.model_json_schema(mode="validation")
    defs = schema.setdefault("$defs", {})
    rule = defs["ComponentRule"]
    rule["properties"].pop("key", None)
    rule["properties"]["node_group"] = {
        "description": "a group label, 'a800,4090', or a list of labels (default: cluster)",
        "anyOf": [{"type": "string"}, {"type": "integer"}, {"type": "array"}],
    }
    rule["properties"].pop("node_groups", None)
    rule["required"] = [r for r in rule.get("required", []) if r != "key"]
    schema["properties"]["component_placement"] = {
        "description": "component name(s) -> rule; 'actor,inference' places both",
        "type": "object",
        "additionalProperties": {
            "anyOf": [
                {"type": "string", "description": "short form: a rule on the cluster group"},
                {"type": "integer", "minimum": 0},
                {"$ref": "#/$defs/ComponentRule"},
            ]
        },
    }
    for group in ("HardwareSpec",):
        refs = []
        for name in registered_hardware():
            model = hardware_model(name)
            if model is None:
                continue
            sub = model.model_json_schema(ref_template="#/$defs/{model}")
            defs.update(sub.pop("$defs", {}))
            defs[model.__name__] = sub
            refs.append({"$ref": f"#/$defs/{model.__name__}"})
        defs[group]["properties"]["type"] = {"enum": list(registered_hardware())}
        defs[group]["properties"]["configs"] = {"type": "array", "items": {"anyOf": refs}}
    defs.pop("HardwareConfig", None)
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "placement cluster config",
        "type": "object",
        "properties": {ROOT: {"$ref": "#/$defs/ClusterConfig"}},
        "required": [ROOT],
        "$defs": {**defs, "ClusterConfig": {k: v for k, v in schema.items() if k != "$defs"}},
    }
