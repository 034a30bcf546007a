"""Loading a cluster config: find the ``cluster:`` section, validate, report every problem.

Checks run in one pass (:func:`placement_core._validate.walk`) through the models' field
declarations: every field on its own, then each model's rules on its valid fields, so a
broken field does not hide problems elsewhere, and a rule whose own inputs are broken is
skipped rather than reported twice.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from ._controls import control_problems
from ._errors import ConfigError, Problem
from ._interpolate import JobDocument
from ._models import ClusterConfig
from ._shown import shown
from ._validate import build, walk
from ._vocab import RLINF_CLUSTER_KEYS
from ._vocab import ROOT_KEY as ROOT
from ._yamlio import plain, read_document

__all__ = ["check_source", "load_config"]


def _cluster_section(document: Any, name: str) -> Mapping[str, Any]:
    if isinstance(document, str) and name == "<string>":
        raise ConfigError(
            [
                Problem(
                    name,
                    "expected YAML with a top-level 'cluster:' key, got the text "
                    f"{shown(document)} (if it is a file path: no such file)",
                )
            ]
        )
    if not isinstance(document, Mapping):
        got = "an empty document" if document is None else type(document).__name__
        raise ConfigError(
            [Problem(name, f"expected a mapping with a top-level 'cluster:' key, got {got}")]
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
                f"(found keys: {_keys(document)})",
            )
        ]
    )


def _keys(document: Mapping[Any, Any]) -> str:
    keys = [str(key) if isinstance(key, str) else shown(key) for key in list(document)[:10]]
    keys = [key if len(key) <= 40 else key[:37] + "..." for key in keys]
    more = f" and {len(document) - 10} more" if len(document) > 10 else ""
    return (", ".join(keys) or "none") + more


def check_source(source: object, loaded: type = ClusterConfig) -> None:
    """Refuse a source that is not a path, YAML text, a mapping or an already ``loaded``
    object, before anything tries to read it.

    Raises:
        ConfigError: ``source`` is of another type (bytes get a hint to decode them).
    """
    if isinstance(source, str | os.PathLike | Mapping | loaded):
        return
    hint = " (decode it first: data.decode())" if isinstance(source, bytes | bytearray) else ""
    raise ConfigError(
        [
            Problem(
                "<config>",
                f"expected a path, YAML text, a mapping or a {loaded.__name__}, got "
                f"{type(source).__name__} {shown(source)}{hint}",
            )
        ]
    )


def _resolved(document: JobDocument, section: Mapping[str, Any]) -> Mapping[str, Any]:
    """The section with its ``${a.b}`` references resolved against the whole job.

    RLinf's own keys are left as written: placement ignores them, so a reference there
    that only OmegaConf can resolve (``${oc.env:...}``) is not an error.
    """
    return {
        key: value if key in RLINF_CLUSTER_KEYS else document.get(f"{ROOT}.{key}")
        for key, value in section.items()
    }


def load_config(
    source: str | os.PathLike[str] | Mapping[str, Any] | ClusterConfig,
) -> ClusterConfig:
    """Load and check a cluster config.

    Args:
        source: A path to a YAML file, YAML text, a mapping (e.g. a Hydra/OmegaConf
            config) or an already built :class:`ClusterConfig` (returned as is). The
            document has a top-level ``cluster:`` key (other top-level keys belong to the
            rest of the job's config and are left alone, except that simple ``${a.b}``
            references in the section are resolved against them); a mapping that is the
            cluster section itself is accepted too.

    Returns:
        The frozen, checked config.

    Raises:
        ConfigError: ``source`` is of another type, the file cannot be read or is too large
            (docs/reference/limits.md), the YAML does not parse, or the config breaks any config
            rule (docs/concepts/cluster-config.md); ``problems`` lists every problem found, each
            with its YAML path, the offending value and the rule.
    """
    check_source(source)
    if isinstance(source, ClusterConfig):
        return source
    if isinstance(source, Mapping):
        document, name = plain(source), "<mapping>"
    else:
        document, name = read_document(source)
    section = _cluster_section(document, name)
    if isinstance(document, Mapping) and ROOT in document:
        section = _resolved(JobDocument(document), section)
    controls = control_problems(
        {key: value for key, value in section.items() if key not in RLINF_CLUSTER_KEYS}, ROOT
    )
    if controls:
        raise ConfigError(controls)
    part, issues = walk(ClusterConfig, section)
    if issues:
        raise ConfigError(
            [Problem(f"{ROOT}{where}", message, value) for where, message, value in issues]
        )
    config = build(part)
    assert isinstance(config, ClusterConfig)
    return config
