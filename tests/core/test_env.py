"""The environment of a worker and the per-vendor visibility table.

See docs/concepts/worker-environment.md.
"""

from __future__ import annotations

import dataclasses

import pytest

from placement_core._env import (
    RESERVED_ENV_VARS,
    VISIBILITY_ENV_VARS,
    check_user_env,
    visibility_env,
    worker_env,
)
from placement_core._errors import PlacementRuleError
from placement_core._records import Placement

ISOLATED = Placement(
    rank=5,
    node_rank=1,
    node_id="node-1",
    placement_node_rank=1,
    local_rank=1,
    local_world_size=4,
    hardware_ranks=(2, 3),
    visible_accelerators=(2, 3),
    local_accelerator_rank=2,
    accelerator_type="nvidia",
    node_group="cluster",
    isolate_accelerator=True,
)


@pytest.mark.parametrize(
    ("vendor", "variable", "noset"),
    [
        ("nvidia", "CUDA_VISIBLE_DEVICES", "RAY_EXPERIMENTAL_NOSET_CUDA_VISIBLE_DEVICES"),
        ("kunlun", "CUDA_VISIBLE_DEVICES", "RAY_EXPERIMENTAL_NOSET_CUDA_VISIBLE_DEVICES"),
        ("amd", "HIP_VISIBLE_DEVICES", "RAY_EXPERIMENTAL_NOSET_HIP_VISIBLE_DEVICES"),
        ("ascend", "ASCEND_RT_VISIBLE_DEVICES",
         "RAY_EXPERIMENTAL_NOSET_ASCEND_RT_VISIBLE_DEVICES"),
        ("intel", "ONEAPI_DEVICE_SELECTOR", "RAY_EXPERIMENTAL_NOSET_ONEAPI_DEVICE_SELECTOR"),
        ("musa", "MUSA_VISIBLE_DEVICES", "RAY_EXPERIMENTAL_NOSET_MUSA_VISIBLE_DEVICES"),
        ("gaudi", "HABANA_VISIBLE_MODULES", "RAY_EXPERIMENTAL_NOSET_HABANA_VISIBLE_MODULES"),
    ],
)  # fmt: skip
def test_visibility_table(vendor: str, variable: str, noset: str) -> None:
    visibility = VISIBILITY_ENV_VARS[vendor]
    assert visibility.env_var == variable
    assert noset in visibility.noset_env_vars
    env = visibility_env(vendor, (0, 3))
    assert env[noset] == "1"
    assert env[variable].endswith("0,3")


def test_intel_uses_the_level_zero_selector_and_both_ray_opt_outs() -> None:
    assert visibility_env("intel", (1, 2)) == {
        "ONEAPI_DEVICE_SELECTOR": "level_zero:1,2",
        "RAY_EXPERIMENTAL_NOSET_ONEAPI_DEVICE_SELECTOR": "1",
        "RAY_EXPERIMENTAL_NOSET_ZE_AFFINITY_MASK": "1",
    }


def test_no_accelerator_type_means_no_visibility_variable() -> None:
    assert visibility_env(None, ()) == {}


def test_unknown_accelerator_type_is_an_error() -> None:
    with pytest.raises(
        PlacementRuleError, match="no visibility variable is known for accelerator type 'tpu'"
    ):
        visibility_env("tpu", (0,))


def test_worker_env_of_an_isolated_placement() -> None:
    env = worker_env(ISOLATED, world_size=8, master_addr="10.0.0.1", master_port=29500)
    assert env == {
        "RANK": "5",
        "WORLD_SIZE": "8",
        "LOCAL_RANK": "0",
        "LOCAL_WORLD_SIZE": "4",
        "NODE_RANK": "1",
        "MASTER_ADDR": "10.0.0.1",
        "MASTER_PORT": "29500",
        "CUDA_VISIBLE_DEVICES": "2,3",
        "RAY_EXPERIMENTAL_NOSET_CUDA_VISIBLE_DEVICES": "1",
    }


def test_local_rank_is_the_first_gpu_without_isolation() -> None:
    # Deliberately unlike RLinf (docs/guides/coming-from-rlinf.md): RLinf gives LOCAL_RANK 0 to
    # every process when isolation is off.
    shared = dataclasses.replace(
        ISOLATED, visible_accelerators=tuple(range(8)), isolate_accelerator=False
    )
    env = worker_env(shared, world_size=8, master_addr="h")
    assert env["LOCAL_RANK"] == "2"
    assert env["CUDA_VISIBLE_DEVICES"] == "0,1,2,3,4,5,6,7"


def test_local_rank_on_a_node_without_accelerators() -> None:
    cpu = dataclasses.replace(
        ISOLATED,
        hardware_ranks=(),
        visible_accelerators=(),
        local_accelerator_rank=-1,
        accelerator_type=None,
        isolate_accelerator=False,
    )
    env = worker_env(cpu, world_size=1, master_addr="h")
    assert env["LOCAL_RANK"] == "-1"
    assert "CUDA_VISIBLE_DEVICES" not in env


def test_master_port_appears_only_when_given() -> None:
    assert "MASTER_PORT" not in worker_env(ISOLATED, world_size=8, master_addr="h")


def test_user_env_is_merged() -> None:
    env = worker_env(
        ISOLATED, world_size=8, master_addr="h", user_env={"GLOO_SOCKET_IFNAME": "eth0"}
    )
    assert env["GLOO_SOCKET_IFNAME"] == "eth0"


@pytest.mark.parametrize(
    "name", ["RANK", "LOCAL_RANK", "MASTER_ADDR", "CUDA_VISIBLE_DEVICES",
             "RAY_EXPERIMENTAL_NOSET_HIP_VISIBLE_DEVICES", "ONEAPI_DEVICE_SELECTOR"],
)  # fmt: skip
def test_reserved_variables_cannot_be_overridden(name: str) -> None:
    assert name in RESERVED_ENV_VARS
    with pytest.raises(PlacementRuleError, match=f"env_vars may not set {name}") as info:
        worker_env(ISOLATED, world_size=8, master_addr="h", user_env={name: "x"}, path="p")
    assert info.value.path == "p"


def test_check_user_env_names_every_clash() -> None:
    with pytest.raises(PlacementRuleError, match="may not set RANK, WORLD_SIZE"):
        check_user_env({"WORLD_SIZE": "1", "RANK": "0", "OK": "1"})
    check_user_env({"OK": "1"})


@pytest.mark.parametrize(
    ("vendor", "variable", "hidden"),
    [
        ("nvidia", "CUDA_VISIBLE_DEVICES", ""),
        ("amd", "HIP_VISIBLE_DEVICES", ""),
        ("ascend", "ASCEND_RT_VISIBLE_DEVICES", ""),
        ("intel", "ONEAPI_DEVICE_SELECTOR", "!level_zero:*"),
    ],
)
def test_an_empty_visibility_list_hides_every_device(
    vendor: str, variable: str, hidden: str
) -> None:
    # Unset, the variable would show every device: a real CUDA process saw the GPU.
    nothing = dataclasses.replace(ISOLATED, accelerator_type=vendor, visible_accelerators=())
    env = worker_env(nothing, world_size=8, master_addr="10.0.0.1")
    assert env[variable] == hidden


def test_a_placement_without_accelerator_type_sets_no_visibility_variable() -> None:
    cpu_only = dataclasses.replace(ISOLATED, accelerator_type=None, visible_accelerators=())
    env = worker_env(cpu_only, world_size=8, master_addr="10.0.0.1")
    assert not {v.env_var for v in VISIBILITY_ENV_VARS.values()} & set(env)
