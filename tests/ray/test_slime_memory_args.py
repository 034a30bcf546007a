"""slime's args read by the drop-in's memory check, offline (no Ray)."""

from __future__ import annotations

from argparse import Namespace
from typing import Any

import pytest

from placement_core import Accelerator, DoesNotFitError, Inventory, Node
from placement_ray import ArgumentError
from placement_ray._slime.memory import check_slime_memory, slime_memory_section

from .test_memory_live import slime_args


def h100s(nodes: int = 1, *, host: int | None = 2 << 40) -> Inventory:
    gpus = tuple(Accelerator(index=i, memory_bytes=80 << 30) for i in range(8))
    return Inventory(
        tuple(
            Node(rank=r, node_id=f"node-{r}", accelerators=gpus, host_memory_bytes=host)
            for r in range(nodes)
        )
    )


def check(args: Namespace, inventory: Inventory | None = None, **layout: Any) -> Any:
    shape: dict[str, Any] = {"actors": (1, 8), "rollout_gpus": 8, "colocate": True, **layout}
    return check_slime_memory(args, inventory or h100s(2), **shape)


def test_without_model_args_nothing_is_checked() -> None:
    assert slime_memory_section(Namespace(actor_num_nodes=1)) is None


def test_megatrons_add_bias_linear_is_read_as_disable_bias_linear() -> None:
    section = slime_memory_section(slime_args())
    assert section is not None
    assert section["actor"]["disable_bias_linear"] is True
    assert section["rollout"] == {
        "estimator": "sglang",
        "mem_fraction_static": 0.7,
        "offload": False,
    }


def test_colocated_without_offload_is_refused() -> None:
    with pytest.raises(DoesNotFitError, match="phase actor"):
        check(slime_args())


def test_offload_flags_fit() -> None:
    report = check(slime_args(offload_train=True, offload_rollout=True))
    assert report.fits


def test_release_train_frees_the_trainer_while_the_engines_run() -> None:
    with pytest.raises(DoesNotFitError) as refused:
        check(slime_args(release_train=True))
    assert "phase rollout" not in str(refused.value)


def test_engines_on_their_own_gpus_run_at_once_and_fit() -> None:
    report = check(slime_args(), colocate=False)
    assert report.fits
    assert {group.nodes for group in report.groups} == {(0,), (1,)}


def test_a_too_high_fraction_is_refused_on_separate_gpus() -> None:
    with pytest.raises(DoesNotFitError, match="a lower mem_fraction_static for rollout"):
        check(slime_args(sglang_mem_fraction_static=1.0), colocate=False)


def test_a_host_shortfall_is_refused() -> None:
    args = slime_args(offload_train=True, offload_rollout=True)
    with pytest.raises(DoesNotFitError, match="node 0 host memory"):
        check(args, h100s(2, host=64 << 30))


def test_a_bad_megatron_argument_is_named_as_args() -> None:
    with pytest.raises(ArgumentError, match=r"^args\.tensor_model_parallel_size: expected"):
        check(slime_args(tensor_model_parallel_size=0))


def test_sizes_that_do_not_divide_the_gpus_are_refused() -> None:
    with pytest.raises(ArgumentError, match=r"^args: the component's 8 GPUs are not a multiple"):
        check(slime_args(tensor_model_parallel_size=3))


def test_gpus_of_unknown_size_are_not_checked(caplog: pytest.LogCaptureFixture) -> None:
    inventory = Inventory.uniform(2, 8)
    assert check(slime_args(), inventory) is None
    assert "memory not checked" in caplog.text


def test_a_cluster_too_small_is_left_to_the_reservation() -> None:
    assert check(slime_args(), h100s(1), colocate=False) is None
