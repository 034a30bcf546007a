"""The curated top level: every export resolves, every error is exported, importing is cheap."""

from __future__ import annotations

import inspect
import subprocess
import sys

import placement_ray
from placement_ray import errors


def test_every_exported_name_resolves() -> None:
    missing = [name for name in placement_ray.__all__ if not hasattr(placement_ray, name)]
    assert missing == []


def test_every_error_class_is_exported_at_the_top() -> None:
    classes = {
        name
        for name, cls in inspect.getmembers(errors, inspect.isclass)
        if issubclass(cls, errors.PlacementRayError)
    }
    assert classes <= set(placement_ray.__all__)


def test_the_launch_layer_is_exported() -> None:
    assert {
        "allocate",
        "check_interpreters",
        "wait_started",
        "Worker",
        "launch",
        "Launch",
        "WorkerGroup",
        "create_train_group",
        "TrainGroup",
        "create_rollout_engines",
        "RolloutEngines",
        "RolloutEngine",
        "hand_over_master_port",
        "hand_over_ports",
    } <= set(placement_ray.__all__)


def test_import_connects_to_nothing() -> None:
    code = "import placement_ray, ray\nassert not ray.is_initialized()\n"
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
