"""Property tests: any input gives a config or a ConfigError, never another exception."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from placement_core._config import load_config
from placement_core._errors import ConfigError, Problem

KEYS = [
    "num_nodes", "component_placement", "node_groups", "inventory", "label", "node_ranks",
    "env_configs", "env_vars", "python_interpreter_path", "hardware", "type", "configs",
    "node_rank", "robot_ip", "node_group", "placement", "stride", "accelerators", "count",
    "actor", "Franka", "nvidia", "cluster", "node",
]  # fmt: skip

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 20),
    st.floats(allow_nan=False, width=16),
    st.sampled_from(["", "0-3", "all", "a800", "0-1:0-3", "10.0.0.1", "x", "3-1", "Franka"]),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(st.sampled_from(KEYS), inner, max_size=4),
    ),
    max_leaves=20,
)


def problems_of(source: Any) -> tuple[Problem, ...] | None:
    """The problems load_config reports, or None when it accepts the source."""
    try:
        load_config(source)
    except ConfigError as error:
        return error.problems
    return None


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.sampled_from(KEYS), values, max_size=5))
def test_any_mapping_gives_a_config_or_a_config_error(section: dict[str, Any]) -> None:
    problems = problems_of({"cluster": section})
    if problems is not None:
        assert problems
        for problem in problems:
            assert problem.path.startswith("cluster")
            assert "Input should" not in problem.message


@settings(max_examples=100, deadline=None)
@given(st.text(max_size=80))
def test_any_text_gives_a_config_or_a_config_error(text: str) -> None:
    problems = problems_of(text + "\n")
    assert problems is None or len(problems) > 0
