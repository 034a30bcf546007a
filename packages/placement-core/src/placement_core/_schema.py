"""The JSON Schema of a config document, generated from the models' field declarations.

A field's YAML spelling is its alias; what a model's annotation cannot say (the short
form of a rule, a field filled from the entry's key, RLinf's keys, the registered
hardware types) is added here, once for every such field.
"""

from __future__ import annotations

from typing import Any

from ._accelerators import registered_accelerators
from ._hardware import hardware_model, registered_hardware
from ._memory_config import ESTIMATOR_FIELDS, MEMORY_KEY, PHASES_KEY, MemoryEntry
from ._models import ClusterConfig, ComponentRule
from ._vocab import RLINF_CLUSTER_KEYS
from ._vocab import ROOT_KEY as ROOT

__all__ = ["config_json_schema"]


def config_json_schema() -> dict[str, Any]:
    """The JSON Schema of a config document (a top-level ``cluster:`` mapping).

    Hardware configs list every registered hardware type's fields.
    """
    schema = ClusterConfig.model_json_schema(mode="validation")
    defs = schema.setdefault("$defs", {})
    rule = defs["ComponentRule"]
    key = ComponentRule.key_field
    rule["properties"].pop(key, None)
    rule["required"] = [r for r in rule.get("required", []) if r != key]
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
    for key in RLINF_CLUSTER_KEYS:
        schema["properties"][key] = {"description": "used by RLinf, ignored by placement"}
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
    defs["AcceleratorSpec"]["properties"]["type"] = {
        "enum": list(registered_accelerators()),
        "default": "nvidia",
    }
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "placement cluster config",
        "type": "object",
        "properties": {ROOT: {"$ref": "#/$defs/ClusterConfig"}, MEMORY_KEY: _memory_schema(defs)},
        "required": [ROOT],
        "$defs": {**defs, "ClusterConfig": {k: v for k, v in schema.items() if k != "$defs"}},
    }


def _memory_schema(defs: dict[str, Any]) -> dict[str, Any]:
    """The ``memory:`` section: an entry per component, and ``phases``."""
    entry = MemoryEntry.model_json_schema(mode="validation")
    for key in MemoryEntry.set_aside:
        owners = [name for name, keys in ESTIMATOR_FIELDS.items() if key in keys]
        entry["properties"][key] = {"description": f"a field of estimator {' and '.join(owners)}"}
    defs["MemoryEntry"] = entry
    return {
        "description": "component -> how much memory it takes (docs/concepts/will-it-fit.md)",
        "type": "object",
        "properties": {
            PHASES_KEY: {
                "description": "phase name -> the components active together",
                "type": "object",
                "additionalProperties": {"type": "array", "items": {"type": "string"}},
            }
        },
        "additionalProperties": {"$ref": "#/$defs/MemoryEntry"},
    }
