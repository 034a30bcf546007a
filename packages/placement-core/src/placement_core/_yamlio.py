"""Reading cluster configs: YAML files, YAML text and mappings from other tools.

Configs are read so that what a user typed is what is placed, and so that no document
can make the reader hang or eat the machine:

- Scalars follow the YAML 1.2 core schema, not PyYAML's YAML 1.1 defaults. Integers are
  decimal (``010`` is ten), ``0o17`` (octal) or ``0x1F`` (hex); floats are decimal with an
  optional exponent, ``.inf`` or ``.nan``; booleans are ``true``/``false`` (``True``,
  ``TRUE``, ...). There is no base 60 (``1:0`` is the text ``1:0``, a placement rule), no
  ``_`` inside numbers, no timestamps, and ``yes``/``no``/``on``/``off`` are strings.
- Duplicate keys are errors.
- Composition is bounded: at most :data:`~placement_core._limits.MAX_YAML_NODES` nodes
  (an alias counts as the size of what it repeats, so an alias bomb stops early), at most
  :data:`~placement_core._limits.MAX_YAML_DEPTH` levels of nesting, and an alias inside
  its own anchor (a recursive structure) is refused with the anchor's line.
- Files are read only when they are regular files of at most
  :data:`~placement_core._limits.MAX_CONFIG_BYTES` bytes (:mod:`placement_core._files`).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from ._errors import ConfigError, Problem
from ._files import FileRefused, read_text_file
from ._limits import MAX_CONFIG_BYTES, MAX_INT_DIGITS, MAX_YAML_DEPTH, MAX_YAML_NODES
from ._shown import shown

__all__ = ["file_lines", "line_of", "plain", "read_document", "yaml_lines"]

_INT = "tag:yaml.org,2002:int"
_FLOAT = "tag:yaml.org,2002:float"
_BOOL = "tag:yaml.org,2002:bool"
_TIMESTAMP = "tag:yaml.org,2002:timestamp"
_YAML_1_1_ONLY = {_INT, _FLOAT, _BOOL, _TIMESTAMP}


class _Refused(yaml.MarkedYAMLError):
    """A document the reader refuses (too big, too deep, recursive, a huge number)."""


class _BoundedComposer(yaml.SafeLoader):
    """Counts nodes and depth while composing; aliases count at their expanded size."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._count = 0
        self._depth = 0
        self._heights: list[int] = []
        self._open: dict[str, int] = {}  # anchors being composed -> their line
        self._measured: dict[int, tuple[int, int]] = {}  # anchored node -> (size, height)

    def _grow(self, size: int, mark: Any) -> None:
        self._count += size
        if self._count > MAX_YAML_NODES:
            raise _Refused(
                problem=f"the document is larger than {MAX_YAML_NODES:,} YAML nodes (an "
                "alias counts as everything it repeats): is it an alias bomb?",
                problem_mark=mark,
            )

    def _reach(self, height: int, mark: Any) -> None:
        if self._depth + height > MAX_YAML_DEPTH:
            raise _Refused(
                problem=f"the document nests deeper than {MAX_YAML_DEPTH} levels",
                problem_mark=mark,
            )
        if self._heights:
            self._heights[-1] = max(self._heights[-1], height)

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node | None:
        event = self.peek_event()  # type: ignore[no-untyped-call]
        if isinstance(event, yaml.AliasEvent):
            target = self.anchors.get(event.anchor)
            if event.anchor in self._open:
                mark: Any = event.start_mark
                raise _Refused(
                    problem=f"the alias *{event.anchor} sits inside its own anchor "
                    f"&{event.anchor} (line {self._open[event.anchor]}): recursive "
                    "structures cannot be read",
                    problem_mark=mark,
                )
            if target is not None:
                size, height = self._measured[id(target)]
                self._grow(size, event.start_mark)
                self._reach(height, event.start_mark)
            return super().compose_node(parent, index)
        self._reach(1, event.start_mark)
        self._grow(1, event.start_mark)
        anchor = getattr(event, "anchor", None)
        if anchor is not None:
            self._open[anchor] = event.start_mark.line + 1
        before = self._count
        self._depth += 1
        self._heights.append(0)
        node = super().compose_node(parent, index)
        height = 1 + self._heights.pop()
        self._depth -= 1
        if self._heights:
            self._heights[-1] = max(self._heights[-1], height)
        if anchor is not None:
            del self._open[anchor]
            self._measured[id(node)] = (self._count - before + 1, height)
        return node


class _StrictLoader(_BoundedComposer):
    """YAML 1.2 core scalars, duplicate keys refused, bounded composition."""

    yaml_implicit_resolvers = {  # noqa: RUF012  # PyYAML's own class-level table
        first: [(tag, regexp) for tag, regexp in resolvers if tag not in _YAML_1_1_ONLY]
        for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
    }

    def construct_object(self, node: yaml.Node, deep: bool = False) -> Any:
        try:
            return super().construct_object(node, deep=deep)
        except yaml.YAMLError:
            raise
        except (ValueError, TypeError, KeyError, AttributeError, OverflowError):
            # An explicit tag on a value it cannot take (`!!int 1:0`, `!!bool maybe`).
            raise _Refused(
                problem=f"cannot read {shown(node.value)} as {node.tag}",
                problem_mark=node.start_mark,
            ) from None


_StrictLoader.add_implicit_resolver(
    _BOOL, re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF")
)
# Integers before floats: the first resolver that matches wins.
_StrictLoader.add_implicit_resolver(
    _INT, re.compile(r"^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$"), list("-+0123456789")
)
_StrictLoader.add_implicit_resolver(
    _FLOAT,
    re.compile(
        r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?"
        r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$"
    ),
    list("-+.0123456789"),
)


def _construct_int(loader: _StrictLoader, node: yaml.ScalarNode) -> int:
    text = str(loader.construct_scalar(node))
    digits = text.lstrip("+-")
    if len(digits) > MAX_INT_DIGITS:
        raise _Refused(
            problem=f"an integer of {len(digits):,} digits: at most {MAX_INT_DIGITS} are read",
            problem_mark=node.start_mark,
        )
    base = {"0o": 8, "0x": 16}.get(digits[:2].lower(), 10)
    value = int(digits[2:] if base != 10 else digits, base)
    return -value if text.startswith("-") else value


def _construct_mapping(loader: _StrictLoader, node: yaml.MappingNode, deep: bool = False) -> Any:
    loader.flatten_mapping(node)
    seen: dict[Any, yaml.Node] = {}
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if isinstance(key, str | int | float | bool) and key in seen:
            raise yaml.constructor.ConstructorError(
                "while constructing a mapping",
                node.start_mark,
                f"found duplicate key {shown(key)} (first at line {seen[key].start_mark.line + 1})",
                key_node.start_mark,
            )
        if isinstance(key, str | int | float | bool):
            seen[key] = key_node
    return loader.construct_mapping(node, deep=deep)


_StrictLoader.add_constructor(_INT, _construct_int)
_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def _looks_like_path(text: str) -> bool:
    if not text.strip():
        return False
    try:
        if Path(text).exists():  # a directory too, so it is reported as one
            return True  # an existing file is a path, even with a newline in its name
    except (OSError, ValueError):  # a name too long, an embedded NUL byte
        pass
    return "\n" not in text and text.endswith((".yaml", ".yml", ".json"))


def read_document(source: str | os.PathLike[str]) -> tuple[Any, str]:
    """Parse a YAML file or YAML text; return the document and a name for messages.

    A str is a path when it names an existing file or directory, or has no newline and ends
    with ``.yaml``, ``.yml`` or ``.json``; otherwise it is YAML text.

    Raises:
        ConfigError: The file cannot be read, is not a regular file or is too large, the
            YAML does not parse (with its line and column), or it breaks a reading limit
            (size, nesting, a recursive alias, a huge integer).
    """
    if isinstance(source, str) and not _looks_like_path(source):
        if len(source) > MAX_CONFIG_BYTES or len(source.encode("utf-8", "replace")) > (
            MAX_CONFIG_BYTES
        ):
            raise ConfigError(
                [Problem("<string>", f"the YAML text is larger than {MAX_CONFIG_BYTES:,} bytes")]
            )
        return _parse_yaml(source, "<string>"), "<string>"
    name = os.fsdecode(os.fspath(source))
    try:
        text = read_text_file(source, limit=MAX_CONFIG_BYTES, what="a YAML config")
    except FileNotFoundError:
        raise ConfigError([Problem(name, "no such file")]) from None
    except IsADirectoryError:
        raise ConfigError([Problem(name, "is a directory, expected a YAML file")]) from None
    except FileRefused as error:
        raise ConfigError([Problem(name, str(error))]) from None
    except UnicodeDecodeError as error:
        raise ConfigError([Problem(name, f"cannot read the file: {error}")]) from None
    except OSError as error:
        raise ConfigError(
            [Problem(name, f"cannot read the file: {error.strerror or error}")]
        ) from None
    return _parse_yaml(text, name), name


def _parse_yaml(text: str, name: str) -> Any:
    try:
        return yaml.load(text, Loader=_StrictLoader)
    except _Refused as error:
        where = _where(name, text, error.problem_mark)
        raise ConfigError([Problem(where, str(error.problem))]) from None
    except yaml.MarkedYAMLError as error:
        where = _where(name, text, error.problem_mark or error.context_mark)
        what = " ".join(p for p in (error.context, error.problem) if p)
        raise ConfigError([Problem(where, f"YAML syntax error: {what}")]) from None
    except yaml.YAMLError as error:
        raise ConfigError([Problem(name, f"YAML error: {error}")]) from None


def _where(name: str, text: str, mark: Any) -> str:
    """``name:line:column`` of a YAML mark; the end of the stream is the last line's end
    (PyYAML puts it one line past a final newline, a line the file does not have)."""
    if mark is None:
        return name
    lines = text.splitlines()
    if lines and mark.line >= len(lines):
        return f"{name}:{len(lines)}:{len(lines[-1]) + 1}"
    return f"{name}:{mark.line + 1}:{mark.column + 1}"


def plain(value: Any, *, name: str = "<mapping>") -> Any:
    """Plain dicts and lists from any Mapping / Sequence (OmegaConf's DictConfig, ...).

    Bounded like a YAML document: at most :data:`~placement_core._limits.MAX_YAML_NODES`
    values and :data:`~placement_core._limits.MAX_YAML_DEPTH` levels; a container inside
    itself is refused.

    Raises:
        ConfigError: The value is too large, too deep or contains itself.
    """
    count = 0
    active: set[int] = set()

    def refuse(reason: str) -> ConfigError:
        return ConfigError([Problem(name, reason)])

    def convert(item: Any, depth: int) -> Any:
        nonlocal count
        count += 1
        if count > MAX_YAML_NODES:
            raise refuse(f"the config is larger than {MAX_YAML_NODES:,} values")
        is_mapping = isinstance(item, Mapping)
        if not is_mapping and not (
            isinstance(item, Sequence) and not isinstance(item, str | bytes | bytearray)
        ):
            return item
        if depth >= MAX_YAML_DEPTH:
            raise refuse(f"the config nests deeper than {MAX_YAML_DEPTH} levels")
        if id(item) in active:
            raise refuse(
                f"a {type(item).__name__} contains itself: recursive structures cannot be read"
            )
        active.add(id(item))
        try:
            if is_mapping:
                return {key: convert(child, depth + 1) for key, child in item.items()}
            return [convert(child, depth + 1) for child in item]
        finally:
            active.discard(id(item))

    return convert(value, 0)


def yaml_lines(text: str, *, root: str = "cluster") -> dict[str, int]:
    """The 1-based line of every key and list item of a YAML config, by YAML path.

    Paths use the format of :class:`~placement_core.Problem` (``cluster.
    node_groups[1].label``); a document without a top-level ``cluster:`` key is taken as
    the cluster section itself. Returns an empty dict when the text does not parse.
    """
    try:
        document = yaml.compose(text, Loader=_StrictLoader)
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


def file_lines(path: str | None, *, root: str = "cluster") -> dict[str, int]:
    """:func:`yaml_lines` of a config file; empty when it cannot be read (any reason).

    Reads under the same limits as :func:`read_document` (a regular file of bounded size),
    so reporting an error never hangs on the file that caused it.
    """
    if not path:
        return {}
    try:
        text = read_text_file(path, limit=MAX_CONFIG_BYTES, what="a YAML config")
    except (OSError, ValueError):
        return {}
    return yaml_lines(text, root=root)
