"""Model-parallel jobs: what RLinf's ModelParallelComponentPlacement launches, rank by rank.

The job documents are RLinf-shaped (written for these tests). Each expectation table was
derived by hand from RLinf's code: ``rlinf/utils/placement.py`` picks the mode and builds
``PackedPlacementStrategy(first, last, num_hardware_per_process, stride)`` per component,
and that strategy (``rlinf/scheduler/placement/packed.py``) gives each process the
``num_hardware_per_process`` ranks ``start, start + stride, ...``, starting every process at
the lowest rank not yet used.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from placement_core import Inventory, Plan
from placement_core._errors import ConfigError, PlacementRuleError
from placement_core._model_parallel import (
    derive_model_parallel,
    load_job,
    looks_model_parallel,
    plan_model_parallel,
)

Layout = list[tuple[int, tuple[int, ...]]]


def job(placement: dict[str, Any], nodes: int = 1, **sections: Any) -> dict[str, Any]:
    cluster = {"num_nodes": nodes, "component_placement": placement}
    cluster.update(sections.pop("cluster", {}))
    return {"cluster": cluster, **sections}


def sizes(actor_tp: int = 1, rollout_tp: int = 1, **extra: Any) -> dict[str, Any]:
    return {
        "actor": {"model": {"tensor_model_parallel_size": actor_tp}},
        "rollout": {"tensor_parallel_size": rollout_tp},
        **extra,
    }


def layout(result: Plan, component: str) -> Layout:
    return [(p.node_rank, p.hardware_ranks) for p in result.components[component]]


def one_each(node: int, gpus: range) -> Layout:
    return [(node, (g,)) for g in gpus]


# --- collocated -----------------------------------------------------------------------------


def test_collocated_strides_rollout_inside_each_actor_group() -> None:
    # actor TP 4, rollout TP 2 -> stride 4 // 2 = 2 (RLinf: "strided manner ... cudaIPC").
    document = job({"actor,rollout,reward": "all"}, **sizes(4, 2))
    result = plan_model_parallel(document, Inventory.uniform(1, 8))
    assert layout(result, "actor") == one_each(0, range(8))
    assert layout(result, "rollout") == [
        (0, (0, 2)),
        (0, (1, 3)),
        (0, (4, 6)),
        (0, (5, 7)),
    ]
    assert layout(result, "reward") == one_each(0, range(8))


def test_a_32b_reasoning_job_runs_64_rollout_engines_of_4_gpus_with_stride_2() -> None:
    # 32 nodes x 8 GPUs, actor TP 8, rollout TP 4: not 256 one-GPU rollout processes.
    document = job({"actor,rollout,reward": "all"}, nodes=32, **sizes(8, 4))
    result = plan_model_parallel(document, Inventory.uniform(32, 8))
    rollout = layout(result, "rollout")
    assert len(rollout) == 64
    assert rollout[:5] == [
        (0, (0, 2, 4, 6)),
        (0, (1, 3, 5, 7)),
        (1, (0, 2, 4, 6)),
        (1, (1, 3, 5, 7)),
        (2, (0, 2, 4, 6)),
    ]
    assert rollout == [(r // 2, tuple(range(r % 2, 8, 2))) for r in range(64)]
    assert len(result.components["actor"]) == 256
    assert result.warnings == ()


def test_collocated_rollout_wider_than_the_actor_packs_without_stride() -> None:
    result = plan_model_parallel(
        job({"actor,rollout,reward": "all"}, **sizes(2, 4)), Inventory.uniform(1, 8)
    )
    assert layout(result, "rollout") == [(0, (0, 1, 2, 3)), (0, (4, 5, 6, 7))]


def test_collocated_places_a_critic_one_process_per_gpu() -> None:
    document = job({"actor,rollout,reward,critic": "0-3"}, **sizes(2, 2))
    result = plan_model_parallel(document, Inventory.uniform(1, 4))
    assert layout(result, "critic") == one_each(0, range(4))
    assert layout(result, "rollout") == [(0, (0, 1)), (0, (2, 3))]


def test_other_components_keep_their_written_rules() -> None:
    document = job(
        {"actor,rollout,reward": "0-3", "agent": {"node_group": "node", "placement": "0:0-3"}},
        **sizes(2, 2),
    )
    derived = derive_model_parallel(document, Inventory.uniform(1, 4))
    assert derived.derived == ("actor", "rollout", "reward")
    assert derived.config.components()["agent"].placement == "0:0-3"
    assert list(derived.config.components()) == ["actor", "rollout", "reward", "agent"]


def test_derived_rules_keep_the_written_topology() -> None:
    written = {"node_group": "cluster", "placement": "all", "topology": "nvlink"}
    document = job({"actor,rollout,reward": written}, **sizes(4, 2))
    components = derive_model_parallel(document, Inventory.uniform(1, 8)).config.components()
    assert {name: rule.topology for name, rule in components.items()} == {
        "actor": "nvlink",
        "rollout": "nvlink",
        "reward": "nvlink",
    }
    assert components["rollout"].stride == 2


def test_topology_best_is_kept_where_rlinf_packs_without_stride() -> None:
    written = {"node_group": "cluster", "placement": "all", "topology": "best"}
    document = job({"actor,rollout,reward": written}, **sizes(2, 4))
    components = derive_model_parallel(document, Inventory.uniform(1, 8)).config.components()
    assert components["rollout"].topology == "best"
    assert components["rollout"].stride == 1


def test_topology_best_on_a_rollout_rlinf_strides_is_an_error() -> None:
    written = {"node_group": "cluster", "placement": "all", "topology": "best"}
    document = job({"actor,rollout,reward": written}, **sizes(4, 2))
    with pytest.raises(ConfigError) as caught:
        derive_model_parallel(document, Inventory.uniform(1, 8))
    problem = caught.value.problems[0]
    assert problem.path == "cluster.component_placement.actor,rollout,reward.topology"
    assert "cannot apply to rollout" in problem.message
    assert "stride 2" in problem.message


def test_derived_rules_keep_a_written_numa_node_and_its_error() -> None:
    written = {"node_group": "cluster", "placement": "all", "numa_node": 1}
    document = job({"actor,rollout,reward": written}, **sizes(2, 2))
    components = derive_model_parallel(document, Inventory.uniform(1, 8)).config.components()
    assert components["actor"].numa_node == 1
    with pytest.raises(PlacementRuleError, match="numa_node is for node and hardware"):
        plan_model_parallel(document, Inventory.uniform(1, 8))


# --- disaggregated ----------------------------------------------------------------------------


def test_disaggregated_rollout_processes_hold_len_over_dp_gpus() -> None:
    # rollout 8-13 (6 GPUs), TP 2 -> dp 3 -> 2 GPUs each; inference and actor 1 each.
    # (inference's TP defaults to the actor's 2, within its 2 GPUs.)
    document = job(
        {"actor": "0-7", "rollout": "8-13", "inference": "14-15", "reward": "0-7"},
        nodes=2,
        **sizes(2, 2, algorithm={"recompute_logprobs": True}),
    )
    result = plan_model_parallel(document, Inventory.uniform(2, 8))
    assert derive_model_parallel(document, Inventory.uniform(2, 8)).mode == "disaggregated"
    assert layout(result, "rollout") == [(1, (0, 1)), (1, (2, 3)), (1, (4, 5))]
    assert layout(result, "inference") == one_each(1, range(6, 8))
    assert layout(result, "actor") == one_each(0, range(8))
    assert layout(result, "reward") == one_each(0, range(8))


def test_disaggregated_rollout_that_tp_does_not_divide_becomes_one_wide_engine() -> None:
    # 6 GPUs, TP 4: dp = 6 // 4 = 1, so RLinf runs one engine on all 6.
    document = job({"actor": "0-1", "rollout": "2-7", "reward": "0-1"}, **sizes(1, 4))
    result = plan_model_parallel(document, Inventory.uniform(1, 8))
    assert layout(result, "rollout") == [(0, (2, 3, 4, 5, 6, 7))]


def test_disaggregated_pipeline_parallel_rollout_spans_tp_times_pp() -> None:
    document = job(
        {"actor": "0-3", "rollout": "4-7", "reward": "0-3"},
        **sizes(1, 2, rollout={"tensor_parallel_size": 2, "pipeline_parallel_size": 2}),
    )
    result = plan_model_parallel(document, Inventory.uniform(1, 8))
    assert layout(result, "rollout") == [(0, (4, 5, 6, 7))]


def test_a_critic_inference_renames_inference_to_actor_inference() -> None:
    document = job(
        {
            "actor": "0-1",
            "critic": "2-3",
            "rollout": "4-5",
            "actor_inference": "6",
            "critic_inference": "7",
            "reward": "0-1",
        },
        **sizes(
            algorithm={"recompute_logprobs": True},
            critic={"model": {"tensor_model_parallel_size": 1}},
        ),
    )
    result = plan_model_parallel(document, Inventory.uniform(1, 8))
    assert layout(result, "actor_inference") == [(0, (6,))]
    assert layout(result, "critic_inference") == [(0, (7,))]
    assert layout(result, "critic") == one_each(0, range(2, 4))


def test_inference_alone_keeps_its_name() -> None:
    document = job(
        {"actor": "0-3", "rollout": "4-5", "actor_inference": "6-7", "reward": "0-3"},
        **sizes(algorithm={"recompute_logprobs": True}),
    )
    result = plan_model_parallel(document, Inventory.uniform(1, 8))
    assert layout(result, "inference") == one_each(0, range(6, 8))
    assert "actor_inference" not in result.components


# --- auto ---------------------------------------------------------------------------------------


def auto_job(**cluster: Any) -> dict[str, Any]:
    return job(
        {"actor": "0-1", "rollout": "2-5", "inference": "6-7", "reward": "0-1"},
        cluster={"auto_scheduler": True, **cluster},
        **sizes(2, 2, algorithm={"recompute_logprobs": True}),
    )


def test_auto_mode_puts_the_actor_on_every_gpu() -> None:
    result = plan_model_parallel(auto_job(), Inventory.uniform(1, 8))
    assert derive_model_parallel(auto_job(), Inventory.uniform(1, 8)).mode == "auto"
    assert layout(result, "actor") == one_each(0, range(8))
    assert layout(result, "rollout") == [(0, (2, 3)), (0, (4, 5))]
    assert layout(result, "inference") == one_each(0, range(6, 8))
    assert layout(result, "reward") == one_each(0, range(2))
    assert result.warnings == ()


def test_auto_pre_process_policy_adds_the_actor_gpus_to_rollout() -> None:
    result = plan_model_parallel(auto_job(use_pre_process_policy=True), Inventory.uniform(1, 8))
    assert layout(result, "rollout") == [(0, (0, 1)), (0, (2, 3)), (0, (4, 5))]


def test_auto_scheduler_with_a_critic_falls_back_to_disaggregated() -> None:
    document = job(
        {"actor": "0-1", "critic": "2-3", "rollout": "4-7", "reward": "0-1"},
        cluster={"auto_scheduler": True},
        **sizes(critic={"model": {}}),
    )
    assert derive_model_parallel(document, Inventory.uniform(1, 8)).mode == "disaggregated"


# --- reasoning_eval (RLinf's ModelParallelEvalComponentPlacement) -------------------------------


def eval_job(placement: dict[str, str], tp: int) -> dict[str, Any]:
    return job(
        placement, runner={"task_type": "reasoning_eval"}, rollout={"tensor_parallel_size": tp}
    )


def test_eval_jobs_pack_rollout_engines_without_stride() -> None:
    result = plan_model_parallel(eval_job({"rollout,reward": "all"}, 2), Inventory.uniform(1, 8))
    assert layout(result, "rollout") == [(0, (0, 1)), (0, (2, 3)), (0, (4, 5)), (0, (6, 7))]
    assert layout(result, "reward") == one_each(0, range(8))
    assert (
        derive_model_parallel(eval_job({"rollout,reward": "all"}, 2), Inventory.uniform(1, 8)).mode
        == "eval"
    )


def test_eval_jobs_need_a_reward() -> None:
    assert error(eval_job({"rollout": "all"}, 1)) == (
        "cluster.component_placement: a reasoning_eval job needs a 'reward' component; none "
        "is placed"
    )


def test_eval_rollout_tp_cannot_exceed_its_gpus() -> None:
    assert error(eval_job({"rollout,reward": "0-1"}, 4)).startswith(
        "rollout.tensor_parallel_size: rollout's tensor parallel size exceeds its 2"
    )


# --- reading the job ---------------------------------------------------------------------------


def test_references_are_resolved_with_their_type() -> None:
    document = job(
        {"actor,rollout,reward": "all"},
        actor={"model": {"tensor_model_parallel_size": "${parallel.actor}"}},
        rollout={"tensor_parallel_size": "${parallel.rollout}"},
        parallel={"actor": 4, "rollout": 2},
    )
    derived = derive_model_parallel(document, Inventory.uniform(1, 8))
    assert derived.config.components()["rollout"].stride == 2


def test_yaml_text_plans_like_the_mapping() -> None:
    text = (
        "cluster:\n  num_nodes: 1\n  component_placement:\n    actor,rollout,reward: all\n"
        "actor: {model: {tensor_model_parallel_size: 4}}\nrollout: {tensor_parallel_size: 2}\n"
    )
    result = plan_model_parallel(text, Inventory.uniform(1, 8))
    assert layout(result, "rollout")[1] == (0, (1, 3))


def test_a_missing_reference_is_an_error() -> None:
    document = job({"actor,rollout,reward": "all"}, **sizes(rollout_tp=1))
    document["rollout"]["tensor_parallel_size"] = "${sizes.rollout}"
    with pytest.raises(ConfigError) as caught:
        derive_model_parallel(document, Inventory.uniform(1, 8))
    assert str(caught.value) == (
        "rollout.tensor_parallel_size: cannot resolve '${sizes.rollout}': the job document "
        "has no key sizes.rollout"
    )


def test_a_resolver_reference_is_an_error() -> None:
    document = job({"actor,rollout,reward": "all"}, **sizes())
    document["actor"]["model"]["tensor_model_parallel_size"] = "${oc.env:TP}"
    with pytest.raises(ConfigError, match="only absolute references such as"):
        derive_model_parallel(document, Inventory.uniform(1, 8))


def test_a_circular_reference_is_an_error() -> None:
    document = job({"actor,rollout,reward": "all"}, **sizes(), a="${b}", b="${a}")
    document["rollout"]["tensor_parallel_size"] = "${a}"
    with pytest.raises(ConfigError, match=r"circular \(a -> b -> a\)"):
        derive_model_parallel(document, Inventory.uniform(1, 8))


def test_an_unused_unresolvable_reference_is_ignored() -> None:
    document = job({"actor,rollout,reward": "all"}, **sizes(), runner={"dir": "${oc.env:HOME}"})
    assert derive_model_parallel(document, Inventory.uniform(1, 8)).mode == "collocated"


@pytest.mark.parametrize("source", [42, None, b"cluster: {}", ["cluster"]])
def test_a_job_of_another_type_is_an_error_naming_it(source: object) -> None:
    with pytest.raises(ConfigError) as caught:
        load_job(source)  # type: ignore[arg-type]
    message = str(caught.value)
    assert "expected a path, YAML text, a mapping or a JobDocument" in message
    assert type(source).__name__ in message


def test_a_document_without_cluster_is_an_error() -> None:
    with pytest.raises(ConfigError, match="whole job document with a top-level cluster"):
        load_job({"actor": {}})


def test_looks_model_parallel() -> None:
    assert looks_model_parallel(job({"actor,rollout,reward": "all"}, **sizes()))
    assert not looks_model_parallel(job({"actor,rollout": "all"}))
    assert not looks_model_parallel(job({"actor": "all"}, **sizes()))


def test_an_embodied_job_does_not_look_model_parallel() -> None:
    assert not looks_model_parallel(job({"actor,rollout": "0-3", "env": "4-7"}, **sizes()))


@pytest.mark.parametrize(
    ("task", "expected"),
    [
        ("reasoning", True),
        ("coding_online_rl", True),
        ("reasoning_eval", True),
        ("embodied", False),
        ("sft", False),
    ],
)
def test_rlinfs_task_type_decides(task: str, expected: bool) -> None:
    document = job({"actor,rollout,reward": "all"}, **sizes(runner={"task_type": task}))
    assert looks_model_parallel(document) is expected


# --- every check ---------------------------------------------------------------------------------


def error(document: dict[str, Any], gpus: int = 8) -> str:
    with pytest.raises(ConfigError) as caught:
        derive_model_parallel(document, Inventory.uniform(1, gpus))
    return str(caught.value)


@pytest.mark.parametrize(
    ("placement", "missing"),
    [
        ({"rollout,reward": "all"}, "an 'actor'"),
        ({"actor,reward": "all"}, "a 'rollout'"),
    ],
)
def test_actor_and_rollout_are_required(placement: dict[str, str], missing: str) -> None:
    assert error(job(placement, **sizes())) == (
        f"cluster.component_placement: a model-parallel job needs {missing} component; "
        "none is placed"
    )


def test_reward_is_required() -> None:
    assert "needs a 'reward' component" in error(job({"actor,rollout": "all"}, **sizes()))


def test_gpus_must_be_contiguous() -> None:
    assert error(job({"actor,rollout,reward": "0-2,4-7"}, **sizes())) == (
        "cluster.component_placement.actor,rollout,reward: actor's accelerators must form one "
        "contiguous range in a model-parallel job (got '0-2,4-7')"
    )


def test_partly_overlapping_actor_and_rollout_match_no_mode() -> None:
    message = error(job({"actor": "0-3", "rollout": "2-5", "reward": "0-3"}, **sizes()))
    assert message.startswith("cluster.component_placement: matches neither collocated mode")
    assert message.endswith("got actor 0-3, rollout 2-5")


def test_inference_in_collocated_mode_is_an_error() -> None:
    message = error(job({"actor,rollout,reward": "0-5", "inference": "6-7"}, **sizes()))
    assert message.startswith(
        "cluster.component_placement.inference: inference must not be placed in collocated mode"
    )


def test_critic_inference_in_collocated_mode_is_an_error() -> None:
    message = error(job({"actor,rollout,reward": "0-5", "critic_inference": "6-7"}, **sizes()))
    assert "critic_inference must not be placed in collocated mode" in message


def disaggregated(**extra: Any) -> dict[str, Any]:
    placement = {"actor": "0-3", "rollout": "4-5", "inference": "6-7", "reward": "0-3"}
    return job(placement, **sizes(**extra))


def test_inference_needs_recompute_logprobs() -> None:
    assert error(disaggregated(algorithm={"recompute_logprobs": False})) == (
        "algorithm.recompute_logprobs: is false, which disables inference; remove the "
        "inference placement or set it to true"
    )


def test_recompute_logprobs_must_be_given_with_inference() -> None:
    assert error(disaggregated()) == (
        "algorithm.recompute_logprobs: required when inference is placed in disaggregated mode"
    )


def test_recompute_logprobs_must_be_a_boolean() -> None:
    assert error(disaggregated(algorithm={"recompute_logprobs": "yes"})) == (
        "algorithm.recompute_logprobs: expected true or false (got 'yes')"
    )


def test_inference_tp_cannot_exceed_its_gpus() -> None:
    document = disaggregated(
        algorithm={"recompute_logprobs": True},
        inference={"model": {"tensor_model_parallel_size": 4}},
    )
    assert error(document) == (
        "inference.model.tensor_model_parallel_size: inference's tensor parallel size exceeds "
        "its 2 accelerator(s) (got 4)"
    )


def test_inference_tp_defaults_to_the_actors() -> None:
    document = disaggregated(algorithm={"recompute_logprobs": True})
    document["actor"]["model"]["tensor_model_parallel_size"] = 4
    assert error(document).startswith("actor.model.tensor_model_parallel_size: inference's")


def test_an_inference_section_needs_a_model() -> None:
    document = disaggregated(algorithm={"recompute_logprobs": True}, inference={})
    assert error(document).startswith("inference.model: required")


def test_critic_inference_tp_cannot_exceed_its_gpus() -> None:
    document = job(
        {"actor": "0-1", "critic": "2-3", "rollout": "4-5", "critic_inference": "6", "reward": "0"},
        **sizes(critic={"model": {"tensor_model_parallel_size": 2}}),
    )
    assert error(document) == (
        "critic.model.tensor_model_parallel_size: critic_inference's tensor parallel size "
        "exceeds its 1 accelerator(s) (got 2)"
    )


def test_actor_tp_cannot_exceed_its_gpus() -> None:
    assert error(job({"actor,rollout,reward": "0-3"}, **sizes(8, 1))) == (
        "actor.model.tensor_model_parallel_size: actor's tensor parallel size exceeds its 4 "
        "accelerator(s) (got 8)"
    )


def test_rollout_tp_cannot_exceed_its_gpus() -> None:
    document = job({"actor": "0-3", "rollout": "4-5", "reward": "0-3"}, **sizes(1, 4))
    assert error(document) == (
        "rollout.tensor_parallel_size: rollout's tensor parallel size exceeds its 2 "
        "accelerator(s) (got 4)"
    )


def test_collocated_rollout_tp_must_divide_the_actors() -> None:
    assert error(job({"actor,rollout,reward": "0-5"}, **sizes(6, 4))) == (
        "rollout.tensor_parallel_size: must divide actor.model.tensor_model_parallel_size (6) "
        "in collocated mode: each rollout engine is strided inside one actor tensor-parallel "
        "group (got 4)"
    )


def test_collocated_gpus_must_fill_whole_rollout_blocks() -> None:
    assert error(job({"actor,rollout,reward": "0-5"}, **sizes(1, 4))) == (
        "cluster.component_placement.actor,rollout,reward: rollout's 6 accelerators are not a "
        "multiple of 4 per process x stride 1 = 4"
    )


def test_rollout_needs_tp_times_pp_gpus() -> None:
    document = job(
        {"actor": "0-4", "rollout": "5-7", "reward": "0"},
        **sizes(rollout={"tensor_parallel_size": 2, "pipeline_parallel_size": 2}),
    )
    assert error(document) == (
        "rollout.tensor_parallel_size: rollout needs at least tensor_parallel_size x "
        "pipeline_parallel_size = 4 accelerators; it has 3"
    )


def test_a_rollout_engine_cannot_span_nodes() -> None:
    document = job({"actor": "0-3", "rollout": "4-11", "reward": "0"}, nodes=2, **sizes(1, 8))
    with pytest.raises(PlacementRuleError, match=r"cluster\.component_placement\.rollout"):
        plan_model_parallel(document, Inventory.uniform(2, 8))


@pytest.mark.parametrize("value", [0, -2, "4", True, 1.5])
def test_parallel_sizes_must_be_positive_integers(value: object) -> None:
    document = job({"actor,rollout,reward": "all"}, **sizes())
    document["rollout"]["tensor_parallel_size"] = value
    assert error(document) == (
        f"rollout.tensor_parallel_size: expected an integer >= 1 (got {value!r})"
    )


def test_auto_mode_needs_disjoint_components() -> None:
    document = job(
        {"actor": "0-3", "rollout": "0-3", "reward": "0"},
        cluster={"auto_scheduler": True},
        **sizes(),
    )
    assert error(document) == (
        "cluster.auto_scheduler: auto mode refines disaggregated mode: actor, rollout and "
        "inference must use disjoint accelerators (got actor 0-3, rollout 0-3)"
    )


def test_auto_mode_needs_actor_rollout_inference_in_order() -> None:
    document = job(
        {"actor": "2-3", "rollout": "4-5", "inference": "6-7", "reward": "0"},
        cluster={"auto_scheduler": True},
        **sizes(algorithm={"recompute_logprobs": True}),
    )
    assert error(document) == (
        "cluster.component_placement: auto mode needs actor -> rollout -> inference placed in "
        "this order on consecutive accelerators from 0 to 7 (got actor 2-3, rollout 4-5, "
        "inference 6-7)"
    )


def test_pre_process_policy_needs_actor_gpus_in_whole_rollout_engines() -> None:
    document = job(
        {"actor": "0-2", "rollout": "3-7", "reward": "0"},
        cluster={"auto_scheduler": True, "use_pre_process_policy": True},
        **sizes(1, 2),
    )
    assert error(document).startswith(
        "cluster.use_pre_process_policy: needs the actor's 3 accelerators to be a multiple of "
        "rollout.tensor_parallel_size (2)"
    )


def test_auto_scheduler_must_be_a_boolean() -> None:
    document = job({"actor,rollout,reward": "all"}, cluster={"auto_scheduler": "on"}, **sizes())
    assert error(document) == "cluster.auto_scheduler: expected true or false (got 'on')"


def test_the_actor_needs_a_model_section() -> None:
    document = job({"actor,rollout,reward": "all"}, actor={}, rollout={})
    assert error(document) == (
        "actor.model: required: the actor section has no model mapping to read its "
        "tensor_model_parallel_size from"
    )


def test_the_job_needs_a_rollout_section() -> None:
    document = job({"actor,rollout,reward": "all"}, actor={"model": {}})
    assert error(document).startswith("rollout: required: a model-parallel job reads")


def test_the_shipped_example_plans_what_rlinf_launches(examples: Path) -> None:
    result = plan_model_parallel(examples / "rlinf_reasoning_32b.yaml")
    assert [len(result.components[c]) for c in ("actor", "rollout", "reward")] == [256, 64, 256]
    assert layout(result, "rollout")[:3] == [
        (0, (0, 2, 4, 6)),
        (0, (1, 3, 5, 7)),
        (1, (0, 2, 4, 6)),
    ]
