"""Reading cluster configs: YAML files, YAML text and mappings from other tools."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from .errors import ConfigError, Problem

__all__ = ["line_of", "plain", "read_document", "yaml_lines"]


class _StrictLoader(yaml.SafeLoader):
    """A safe loader that rejects duplicate keys instead of keeping the last one."""


def _construct_mapping(loader: _StrictLoader, node: yaml.MappingNode, deep: bool = False) -> Any:
    loader.flatten_mapping(node)
    seen: dict[Any, yaml.Node] = {}
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if isinstance(key, str | int | float | bool) and key in seen:
            raise yaml.constructor.ConstructorError(
                "while constructing a mapping",
                node.start_mark,
                f"found duplicate key {key!r} (first at line {seen[key].start_mark.line + 1})",
                key_node.start_mark,
            )
        if isinstance(key, str | int | float | bool):
            seen[key] = key_node
    return loader.construct_mapping(node, deep=deep)


_StrictLoader.add_constructor(
    yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG,
    _construct_mapping,
)


def _looks_like_path(text: str) -> bool:
    if "\n" in text or not text.strip():
        return False
    if text.endswith((".yaml", ".yml", ".json")):
        return True
    try:
        return Path(text).exists()  # a directory too, so it is reported as one
    except OSError:
        return False


def read_document(source: str | os.PathLike[str]) -> tuple[Any, str]:
    """Parse a YAML file or YAML text; return the document and a name for messages.

    A str is a path when it has no newline and names an existing file or directory or ends with
    ``.yaml``, ``.yml`` or ``.json``; otherwise it is YAML text.

    Raises:
        ConfigError: The file cannot be read or the YAML does not parse (with its line
            and column).
    """
    if isinstance(source, str) and not _looks_like_path(source):
        return _parse_yaml(source, "<string>"), "<string>"
    path = Path(source)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError([Problem(str(path), "no such file")]) from None
    except IsADirectoryError:
        raise ConfigError([Problem(str(path), "is a directory, expected a YAML file")]) from None
    except (OSError, UnicodeDecodeError) as error:
        raise ConfigError([Problem(str(path), f"cannot read the file: {error}")]) from None
    return _parse_yaml(text, str(path)), str(path)


def _parse_yaml(text: str, name: str) -> Any:
    try:
        return yaml.load(text, Loader=_StrictLoader)
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        where = f"{name}:{mark.line + 1}:{mark.column + 1}" if mark else name
        what = " ".join(p for p in (error.context, error.problem) if p)
        raise ConfigError([Problem(where, f"YAML syntax error: {what}")]) from None
    except yaml.YAMLError as error:
        raise ConfigError([Problem(name, f"YAML error: {error}")]) from None


def plain(value: Any) -> Any:
    """Plain dicts and lists from any Mapping / Sequence (OmegaConf's DictConfig, ...)."""
    if isinstance(value, Mapping):
        return {key: plain(item) for key, item in value.items()}
    if isinstance(value, Sequence) and not isinstance(value, str | bytes):
        return [plain(item) for item in value]
    return value


def yaml_lines(text: str, *, root: str = "cluster") -> dict[str, int]:
    """The 1-based line of every key and list item of a YAML config, by YAML path.

    Paths use the format of :class:`~placement_core.errors.Problem` (``cluster.
    node_groups[1].label``); a document without a top-level ``cluster:`` key is taken as
    the cluster section itself. Returns an empty dict when the text does not parse.
    """
    try:
        document = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError:
        return {}
    lines: dict[str, int] = {}
    if not isinstance(document, yaml.MappingNode):
        return lines
    has_root = any(
        isinstance(key, yaml.ScalarNode) and key.value == root for key, _ in document.value
    )
    stack: list[tuple[yaml.Node, str]] = [(document, "" if has_root else root)]
    while stack:
        node, path = stack.pop()
        if isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                if isinstance(key, yaml.ScalarNode):
                    child = f"{path}.{key.value}" if path else str(key.value)
                    lines.setdefault(child, key.start_mark.line + 1)
                    stack.append((value, child))
        elif isinstance(node, yaml.SequenceNode):
            for index, item in enumerate(node.value):
                child = f"{path}[{index}]"
                lines.setdefault(child, item.start_mark.line + 1)
                stack.append((item, child))
    return lines


def line_of(path: str, lines: Mapping[str, int]) -> int | None:
    """The line of ``path``, or of its nearest enclosing key when it is not written."""
    while path:
        if path in lines:
            return lines[path]
        cut = max(path.rfind("."), path.rfind("["))
        if cut <= 0:
            return None
        path = path[:cut]
    return None
