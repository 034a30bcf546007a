"""Nothing partial passes as whole: snapshots taken where NVML could not be read, or that
left a GPU out, planned through placement-core's API and CLI, on both native backends."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from placement_native import _snapshot
from placement_native.testing import topology

from .conftest import UseNode

CONFIG = """\
cluster:
  num_nodes: 2
  component_placement:
    actor: "all"
"""

DECLARED = """\
cluster:
  num_nodes: 2
  component_placement:
    actor: "0-15"
  inventory:
    - {node_ranks: 0-1, accelerators: {type: nvidia, count: 8}}
"""


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture
def no_driver_snapshot(
    nvml_backend: str, sysfs: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Path:
    """node0.json: a snapshot taken where the NVML library is missing (a path to nowhere)."""
    monkeypatch.setenv("PLACEMENT_NVML_LIBRARY", str(tmp_path / "nowhere" / "libnvidia-ml.so.1"))
    monkeypatch.setenv("PLACEMENT_NODE_RANK", "0")
    snap = _snapshot.take(nvml_backend)
    assert snap.accelerators == ()
    assert snap.nvml_error is not None
    return _write(tmp_path, "node0.json", snap.to_json())


@pytest.fixture
def whole_snapshot(nvml_backend: str, use_node: UseNode, tmp_path: Path) -> Path:
    """node1.json: node 1, four GPUs, all read."""
    fake = use_node("pcie-4x-nvlink-bridges")
    snap = _snapshot.take(nvml_backend)
    assert len(snap.accelerators) == len(fake.topology.gpus) == 4
    data = snap.to_dict()
    data["node_rank"] = 1
    return _write(tmp_path, "node1.json", json.dumps(data))


def test_api_refuses_a_snapshot_that_could_not_read_its_accelerators(
    no_driver_snapshot: Path, whole_snapshot: Path
) -> None:
    from placement_core import inventory_for, load_config
    from placement_core._errors import InventoryError

    with pytest.raises(InventoryError) as caught:
        inventory_for(load_config(CONFIG), snapshots=[no_driver_snapshot, whole_snapshot])
    message = str(caught.value)
    assert str(no_driver_snapshot) in message
    assert "node 0" in message
    assert "NVML_ERROR_LIBRARY_NOT_FOUND" in message
    assert "--accept-partial" in message


def test_api_accepts_it_knowingly_with_a_warning_in_the_plan(
    no_driver_snapshot: Path, whole_snapshot: Path
) -> None:
    from placement_core import inventory_for, load_config, plan

    config = load_config(CONFIG)
    inventory = inventory_for(
        config, snapshots=[no_driver_snapshot, whole_snapshot], accept_partial=True
    )
    assert [len(n.accelerators) for n in inventory.nodes] == [0, 4]
    result = plan(config, inventory)
    [warning] = [w for w in result.warnings if "planned without accelerators" in w]
    assert str(no_driver_snapshot) in warning
    assert "node 0" in warning
    assert "NVML_ERROR_LIBRARY_NOT_FOUND" in warning


def test_cli_plan_fails_naming_the_file_the_node_and_the_error(
    no_driver_snapshot: Path,
    whole_snapshot: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from placement_core._cli import main

    config = _write(tmp_path, "job.yaml", CONFIG)
    status = main(
        ["plan", str(config), "--inventory", str(no_driver_snapshot), str(whole_snapshot)]
    )
    err = capsys.readouterr().err
    assert status == 1
    assert str(no_driver_snapshot) in err
    assert "node 0: the snapshot could not read the node's accelerators" in err
    assert "NVML_ERROR_LIBRARY_NOT_FOUND" in err


def test_cli_validate_fails_too(
    no_driver_snapshot: Path,
    whole_snapshot: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from placement_core._cli import main

    config = _write(tmp_path, "job.yaml", CONFIG)
    inventory = [str(no_driver_snapshot), str(whole_snapshot)]
    assert main(["validate", str(config), "--inventory", *inventory]) == 1
    assert "could not read the node's accelerators" in capsys.readouterr().err


def test_cli_accept_partial_plans_and_warns_in_json(
    no_driver_snapshot: Path,
    whole_snapshot: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from placement_core._cli import main

    config = _write(tmp_path, "job.yaml", CONFIG)
    inventory = [str(no_driver_snapshot), str(whole_snapshot)]
    assert (
        main(["plan", str(config), "-i", *inventory, "--accept-partial", "--format", "json"]) == 0
    )
    warnings = json.loads(capsys.readouterr().out)["warnings"]
    assert any("node 0: planned without accelerators" in w for w in warnings)


def test_a_gpu_entry_with_an_error_is_left_out_only_when_accepted(
    nvml_backend: str, use_node: UseNode, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from placement_core._cli import main

    use_node("no-permission")  # GPU 1: no permission for its handle; GPU 3: lost
    node0 = _write(tmp_path, "node0.json", _snapshot.take(nvml_backend).to_json())
    config = _write(tmp_path, "job.yaml", CONFIG.replace("num_nodes: 2", "num_nodes: 1"))
    assert main(["plan", str(config), "-i", str(node0)]) == 1
    assert "accelerator 1 failed a query" in capsys.readouterr().err
    assert main(["plan", str(config), "-i", str(node0), "--accept-partial", "-f", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    left_out = [w for w in data["warnings"] if "left out" in w]
    assert [w.split("accelerator ")[1].split(" ")[0] for w in left_out] == ["1", "3"]
    assert len(data["components"]["actor"]) == 6


def test_fewer_gpus_than_the_config_declares_is_a_warning_and_explains_a_rule(
    nvml_backend: str, use_node: UseNode, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from placement_core._cli import main

    use_node(topology("pcie-4x-nvlink-bridges"))  # 4 GPUs where the config declares 8
    node0 = _write(tmp_path, "node0.json", _snapshot.take(nvml_backend).to_json())
    config = _write(tmp_path, "job.yaml", DECLARED)
    assert main(["plan", str(config), "-i", str(node0)]) == 1
    err = capsys.readouterr().err
    assert "node 0: the config's inventory: section declares 8 nvidia accelerator(s), its " in err
    assert "snapshot holds 4" in err
    fits = _write(tmp_path, "fits.yaml", DECLARED.replace('"0-15"', '"0-11"'))
    assert main(["validate", str(fits), "-i", str(node0)]) == 0
    assert "warning: node 0: the config's inventory: section declares 8" in capsys.readouterr().err


def test_fewer_snapshots_than_nodes_allowed_is_still_a_warning(
    whole_snapshot: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from placement_core._cli import main

    data = json.loads(whole_snapshot.read_text())
    data["node_rank"] = 0
    node0 = _write(tmp_path, "only.json", json.dumps(data))
    config = _write(tmp_path, "job.yaml", CONFIG)
    args = ["plan", str(config), "-i", str(node0), "--allow-missing-snapshots", "-f", "json"]
    assert main(args) == 0
    warnings = json.loads(capsys.readouterr().out)["warnings"]
    assert any("node(s) 1 have no snapshot" in w for w in warnings)
