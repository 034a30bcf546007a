"""The config fields of NVLink domains: ``nvlink_domain``, ``nvlink_group``.

See docs/concepts/nvlink-domains.md. The planning side lives in
:mod:`placement_core._nvlink`.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BeforeValidator, WithJsonSchema

from ._problems import issue
from ._scalars import is_int

__all__ = ["DomainName", "NvlinkGroup"]


def _domain_name(value: object) -> object:
    if is_int(value):
        return str(value)  # `nvlink_domain: 1` is an int in YAML
    if not isinstance(value, str) or not value.strip() or value != value.strip():
        raise issue(
            "expected an NVLink domain name such as rack-a (a non-empty string without "
            "leading or trailing spaces)",
            value,
        )
    return value


DomainName = Annotated[
    str,
    BeforeValidator(_domain_name),
    WithJsonSchema({"description": "NVLink domain name", "type": ["string", "integer"]}),
]


def _group_size(value: object) -> object:
    if value == "all" or (is_int(value) and value >= 1):
        return value
    raise issue(
        "expected a group size (an int >= 1: every N consecutive processes share one "
        "NVLink domain) or 'all' (every process of the component)",
        value,
    )


NvlinkGroup = Annotated[
    int | Literal["all"],
    BeforeValidator(_group_size),
    WithJsonSchema(
        {
            "description": "processes per NVLink domain group: an int >= 1, or 'all'",
            "anyOf": [{"type": "integer", "minimum": 1}, {"const": "all"}],
        }
    ),
]
