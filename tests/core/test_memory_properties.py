"""Invariants of the memory check, and outputs unchanged without a memory: section."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from placement_core import Inventory, plan
from placement_core._cli import main
from placement_core._memory import check_memory

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
GOLDEN = Path(__file__).parent / "golden"
GPUS = 4
CAPACITY = 80 << 30

NAMES = ("a", "b", "c")


def _inventory() -> Inventory:
    inventory = Inventory.uniform(1, GPUS)
    node = inventory.nodes[0]
    gpus = tuple(type(a)(index=a.index, memory_bytes=CAPACITY) for a in node.accelerators)
    return inventory.replace_nodes([type(node)(rank=0, node_id=node.node_id, accelerators=gpus)])


entries = st.one_of(
    st.builds(lambda size: {"estimator": "fixed", "bytes": size}, st.integers(0, 60 << 30)),
    st.builds(
        lambda f: {"estimator": "sglang", "mem_fraction_static": f},
        st.floats(0.05, 0.9, allow_nan=False),
    ),
)
rules = st.sampled_from(["0", "1", "0-1", "2-3", "all", "0-3:0-1", "1-2"])


@st.composite
def jobs(draw: st.DrawFn) -> tuple[dict[str, Any], dict[str, Any]]:
    count = draw(st.integers(1, 3))
    names = NAMES[:count]
    cluster = {"num_nodes": 1, "component_placement": {n: draw(rules) for n in names}}
    memory = {n: {**draw(entries), "offload": draw(st.booleans())} for n in names}
    if count > 1 and draw(st.booleans()):
        memory["phases"] = {"together": list(draw(st.permutations(names))[:2])}
    return {"cluster": cluster}, memory


def _peaks(document: dict[str, Any], memory: dict[str, Any]) -> dict[tuple[int, int], int]:
    result = plan(document, _inventory())
    report = check_memory(result, memory)
    return {(gpu.node_rank, gpu.accelerator): gpu.group.peak.total_bytes for gpu in report.gpus()}


@settings(max_examples=60, deadline=None)
@given(jobs(), st.data())
def test_offload_never_raises_a_gpus_peak(
    job: tuple[dict[str, Any], dict[str, Any]], data: st.DataObject
) -> None:
    document, memory = job
    name = data.draw(st.sampled_from([n for n in memory if n != "phases"]))
    before = _peaks(document, memory)
    memory[name] = {**memory[name], "offload": True}
    after = _peaks(document, memory)
    assert after.keys() == before.keys()
    assert all(after[gpu] <= before[gpu] for gpu in before)


MODEL = {
    "estimator": "megatron",
    "num_layers": 4,
    "hidden_size": 256,
    "ffn_hidden_size": 1024,
    "num_attention_heads": 8,
    "group_query_attention": True,
    "num_query_groups": 8,
    "seq_length": 512,
}


@settings(max_examples=25, deadline=None)
@given(
    vocab=st.integers(1000, 60_000),
    distributed=st.booleans(),
    untied=st.booleans(),
    tp=st.sampled_from([1, 2]),
)
def test_more_tensor_parallelism_never_raises_weights_per_gpu(
    vocab: int, distributed: bool, untied: bool, tp: int
) -> None:
    document = {"cluster": {"num_nodes": 1, "component_placement": {"actor": "all"}}}
    model = {
        **MODEL,
        "vocab_size": vocab,
        "use_distributed_optimizer": distributed,
        "untie_embeddings_and_output_weights": untied,
    }

    def weights(size: int) -> int:
        memory = {"actor": {**model, "tensor_model_parallel_size": size}}
        report = check_memory(plan(document, _inventory()), memory)
        [group] = report.groups
        return group.phases[0].components["actor"].weights_and_optimizer

    assert weights(tp * 2) <= weights(tp)


@pytest.mark.parametrize(
    ("example", "fmt", "golden"),
    [
        ("colocated_strided.yaml", "table", "colocated_strided.table.txt"),
        ("colocated_strided.yaml", "map", "colocated_strided.map.txt"),
        ("colocated_strided.yaml", "json", "colocated_strided.json"),
        ("colocated_strided.yaml", "svg", "colocated_strided.svg"),
        ("heterogeneous.yaml", "svg", "heterogeneous.svg"),
        ("disaggregated.yaml", "table", "disaggregated.table.txt"),
    ],
)
def test_without_a_memory_section_outputs_are_byte_identical(
    capsys: pytest.CaptureFixture[str], example: str, fmt: str, golden: str
) -> None:
    for extra in ([], ["--memory-headroom", "10%"]):
        status = main(["plan", str(EXAMPLES / example), "--format", fmt, *extra])
        captured = capsys.readouterr()
        assert status == 0
        assert captured.out == (GOLDEN / golden).read_text(encoding="utf-8")
        assert "memory" not in captured.out.lower() or fmt == "json"
        if extra:
            assert captured.err == (
                "placement: note: --memory-headroom has nothing to check: the config has no "
                "memory: section\n"
            )
        else:
            assert captured.err == ""
