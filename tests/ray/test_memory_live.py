"""The memory check live, on a simulated node whose fake NVML machine is a DGX H100
(8 x 80 GB, 2 TiB of host memory): slime's drop-in refuses a job that will not fit before
any placement group exists (through slime's own call site, ``create_placement_groups
(args)``), and a launch sets its estimate beside each GPU's memory in use.
"""

from __future__ import annotations

from argparse import Namespace
from typing import Any

import pytest
from ray.util.placement_group import placement_group_table

from placement_core import DoesNotFitError
from placement_ray import launch
from placement_ray._cluster import Cluster
from placement_ray.compat.slime import create_placement_groups
from placement_ray.demo.workers import DemoWorker

from .conftest import DGX_PAIR

pytestmark = pytest.mark.placement_cluster(**DGX_PAIR)  # the job's node 0 is the DGX

#: Qwen2.5-7B as slime's scripts/models/qwen2.5-7B.sh passes it (MODEL_ARGS), with TP 2.
QWEN25_7B = {
    "num_layers": 28,
    "hidden_size": 3584,
    "ffn_hidden_size": 18944,
    "num_attention_heads": 28,
    "group_query_attention": True,
    "num_query_groups": 4,
    "vocab_size": 152064,
    "untie_embeddings_and_output_weights": True,
    "swiglu": True,
    "normalization": "RMSNorm",
    "add_bias_linear": False,
    "seq_length": 4096,
    "tensor_model_parallel_size": 2,
    "use_distributed_optimizer": True,
    "sequence_parallel": True,
    "recompute_granularity": "selective",
    "micro_batch_size": 1,
}


def slime_args(**overrides: Any) -> Namespace:
    values: dict[str, Any] = {
        "actor_num_nodes": 1,
        "actor_num_gpus_per_node": 8,
        "rollout_num_gpus": 8,
        "rollout_num_gpus_per_engine": 2,
        "colocate": True,
        "debug_train_only": False,
        "debug_rollout_only": False,
        "rollout_external": False,
        "use_critic": False,
        "sglang_mem_fraction_static": 0.7,
        "offload_train": False,
        "offload_rollout": False,
        **QWEN25_7B,
    }
    values.update(overrides)
    return Namespace(**values)


def test_colocated_without_offload_is_refused_before_any_group(placement_cluster: Cluster) -> None:
    before = len(placement_group_table())
    with pytest.raises(DoesNotFitError) as refused:
        create_placement_groups(slime_args(), cluster=placement_cluster)
    assert len(placement_group_table()) == before
    message = str(refused.value)
    assert "will not fit: 8 GPUs over capacity" in message
    assert "offload rollout while actor runs (memory.rollout.offload: true)" in message


def test_slimes_offload_flags_make_it_fit(placement_cluster: Cluster) -> None:
    args = slime_args(offload_train=True, offload_rollout=True)
    groups = create_placement_groups(args, cluster=placement_cluster)
    assert len(groups["actor"][1]) == 8


def test_a_launch_sets_its_estimate_beside_each_gpus_memory_in_use(
    placement_cluster: Cluster,
) -> None:
    config = {"cluster": {"num_nodes": 2, "component_placement": {"actor": "0-7"}}}  # the DGX
    memory = {"actor": {"estimator": "fixed", "bytes": "20GiB"}}
    with launch(config, {"actor": DemoWorker}, placement_cluster, timeout_s=120) as launched:
        in_use = launched.memory_report(memory)
    assert in_use.report.fits
    assert [(row.node_rank, row.accelerator) for row in in_use.gpus] == [(0, i) for i in range(8)]
    row = in_use.gpus[0]
    assert (row.capacity_bytes, row.estimate_bytes, row.phase) == (
        85_520_809_984,
        21 << 30,
        "actor",
    )
    assert row.used_bytes == 0  # the fake machine's GPUs hold nothing
    assert next(in_use.lines()).startswith("NODE  GPU  ESTIMATE (PHASE)")
