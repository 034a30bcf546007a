"""python -m placement_native snapshot [--json] / topo, on fake nodes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from placement_native import _cli

from .conftest import UseNode


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = _cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_snapshot_json_is_the_spec_schema(
    use_node: UseNode, capsys: pytest.CaptureFixture[str]
) -> None:
    use_node("dgx-h100")
    code, out, _ = _run(capsys, "snapshot", "--json")
    data = json.loads(out)
    assert code == 0
    assert data["schema"] == 1
    assert len(data["accelerators"]) == 8
    assert data["links"][0] == [0, 1, "NV18"]
    assert data["nvml_error"] is None


def test_snapshot_report_lists_gpus_and_mig_instances(
    use_node: UseNode, capsys: pytest.CaptureFixture[str]
) -> None:
    use_node("mig")
    code, out, _ = _run(capsys, "snapshot")
    assert code == 0
    lines = out.splitlines()
    header = "GPU MODEL UUID PCI BUS ID MEMORY USED NUMA CPU AFFINITY CC MIG"
    assert " ".join(lines[2].split()) == header
    assert "NVIDIA A100-SXM4-40GB" in lines[3]
    assert lines[3].endswith("on")
    assert "MIG-11111111-aaaa-bbbb-cccc-000000000000" in lines[4]
    assert "(GI 1, CI 0)" in lines[4]


def test_snapshot_report_shows_device_errors(
    use_node: UseNode, capsys: pytest.CaptureFixture[str]
) -> None:
    use_node("no-permission")
    _, out, _ = _run(capsys, "snapshot")
    assert "error: nvmlDeviceGetHandleByIndex_v2 failed: NVML_ERROR_NO_PERMISSION [4]" in out


def test_strict_snapshot_fails_with_exit_1(
    use_node: UseNode, capsys: pytest.CaptureFixture[str]
) -> None:
    use_node("no-driver")
    code, out, err = _run(capsys, "snapshot", "--strict")
    assert code == 1
    assert out == ""
    assert err.startswith("error: nvmlInit failed: NVML_ERROR_DRIVER_NOT_LOADED [9]")


def test_without_nvml_the_report_says_why(
    use_node: UseNode, capsys: pytest.CaptureFixture[str]
) -> None:
    use_node("no-driver")
    code, out, _ = _run(capsys, "snapshot")
    assert code == 0
    assert "no accelerators: nvmlInit failed: NVML_ERROR_DRIVER_NOT_LOADED [9]" in out
    code, out, _ = _run(capsys, "topo")
    assert out.startswith("no accelerators: nvmlInit failed")


def test_topo_matrix_like_nvidia_smi(use_node: UseNode, capsys: pytest.CaptureFixture[str]) -> None:
    use_node("pcie-2-switches")
    code, out, _ = _run(capsys, "topo")
    rows = [line.split() for line in out.splitlines()[:9]]
    assert code == 0
    gpus = [f"GPU{i}" for i in range(8)]
    assert rows[0] == [*gpus, "CPU", "Affinity", "NUMA", "Affinity", "Memory", "Used", "Processes"]
    idle = ["0.0", "GiB", "-"]
    first = ["GPU0", "X", "PIX", "NODE", "NODE", "SYS", "SYS", "SYS", "SYS", "0-31", "0"]
    last = ["GPU7", "SYS", "SYS", "SYS", "SYS", "NODE", "NODE", "PIX", "X", "32-63", "1"]
    assert rows[1] == [*first, *idle]
    assert rows[8] == [*last, *idle]
    assert "NV#  = Connection traversing a bonded set of # NVLinks" in out


def test_topo_marks_unreadable_pairs(use_node: UseNode, capsys: pytest.CaptureFixture[str]) -> None:
    use_node("no-permission")
    _, out, _ = _run(capsys, "topo")
    assert out.splitlines()[2].split()[:5] == ["GPU1", "-", "X", "-", "-"]


def test_a_command_is_required(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        _cli.main([])
    assert info.value.code == 2
    assert "snapshot" in capsys.readouterr().err


def test_python_dash_m_runs_the_cli(use_node: UseNode) -> None:
    use_node("dgx-h100")
    result = subprocess.run(
        [sys.executable, "-m", "placement_native", "topo"],
        capture_output=True,
        text=True,
        env=dict(os.environ),
        check=True,
    )
    assert result.stdout.splitlines()[1].split()[:3] == ["GPU0", "X", "NV18"]


@pytest.mark.parametrize("machine", ["dgx-h100", "mig", "gb200-nvl72-tray"])
def test_snapshot_json_is_what_placement_plan_inventory_reads(
    use_node: UseNode, tmp_path: Path, machine: str
) -> None:
    from placement_core import node_from_snapshot  # both native sessions install core

    use_node(machine)
    result = subprocess.run(
        [sys.executable, "-m", "placement_native", "snapshot", "--json"],
        capture_output=True,
        text=True,
        env=dict(os.environ),
        check=True,
    )
    path = tmp_path / "node.json"
    path.write_text(result.stdout)
    node = node_from_snapshot(path, rank=0)
    written = json.loads(result.stdout)
    assert [a.index for a in node.accelerators] == [a["index"] for a in written["accelerators"]]
    assert [a.uuid for a in node.accelerators] == [a["uuid"] for a in written["accelerators"]]
    fabrics = [a["fabric"] for a in written["accelerators"]]
    assert [a.fabric and a.fabric.cluster_uuid for a in node.accelerators] == [
        f and f["cluster_uuid"] for f in fabrics
    ]


def test_placement_refuses_the_accelerators_a_snapshot_marks_faulty(
    use_node: UseNode, tmp_path: Path
) -> None:
    from placement_core import node_from_snapshot
    from placement_core._errors import InventoryError

    use_node("no-permission")  # GPU 1: no permission for its handle; GPU 3: lost
    result = subprocess.run(
        [sys.executable, "-m", "placement_native", "snapshot", "--json"],
        capture_output=True,
        text=True,
        env=dict(os.environ),
        check=True,
    )
    path = tmp_path / "node.json"
    path.write_text(result.stdout)
    with pytest.raises(InventoryError, match="node 0: accelerator 1 failed a query") as caught:
        node_from_snapshot(path, rank=0)
    assert "NO_PERMISSION" in caught.value.reason
