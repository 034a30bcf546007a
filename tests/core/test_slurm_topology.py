"""``placement slurm-topology``: one Slurm block per NVLink domain, in the formats Slurm's
topology/block plugin documents (topology.yaml(5): a list of topologies, ``topology``
first, ``block.blocks[]`` of ``block`` and ``nodes``; topology.conf(5): ``BlockName=...
Nodes=...`` lines)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from placement_core._cli import main
from placement_core._errors import InventoryError
from placement_core._slurm_topology import render_slurm_topology, slurm_blocks

from .test_snapshot_fabric import OTHER, tray
from .test_sources import snapshot


def node(host: str, cluster: str | None = None, clique: int = 1) -> dict[str, Any]:
    data = tray(2) if cluster is None else tray(2, cluster_uuid=cluster, clique_id=clique)
    data["hostname"] = host
    return data


def racks() -> list[dict[str, Any]]:
    """Two racks (a: gb-01, gb-02; b: gb-03) and an HGX box without a fabric."""
    hgx = snapshot(8)
    hgx["hostname"] = "hgx-01.example.org"
    return [node("gb-01"), node("gb-02"), node("gb-03", OTHER, 7), hgx]


def test_one_block_per_domain_in_first_node_order() -> None:
    blocks, alone = slurm_blocks(racks())
    assert [(b.name, b.nodes) for b in blocks] == [
        ("nvl0", ("gb-01", "gb-02")),
        ("nvl1", ("gb-03",)),
    ]
    assert blocks[1].domain == f"{OTHER}/7"
    assert alone == ["hgx-01"]  # short host name: Slurm's NodeName


def test_topology_yaml_has_slurms_documented_shape() -> None:
    document = yaml.safe_load(render_slurm_topology(racks(), "yaml"))
    (topology,) = document
    assert next(iter(topology)) == "topology"  # "Must be the first attribute"
    assert topology == {
        "topology": "nvlink",
        "cluster_default": True,
        "block": {
            "blocks": [
                {"block": "nvl0", "nodes": "gb-01,gb-02"},
                {"block": "nvl1", "nodes": "gb-03"},
            ]
        },
    }


def test_topology_conf_lines() -> None:
    text = render_slurm_topology(racks(), "conf")
    settings = [line for line in text.splitlines() if not line.startswith("#")]
    assert settings == ["BlockName=nvl0 Nodes=gb-01,gb-02", "BlockName=nvl1 Nodes=gb-03"]
    assert all(re.fullmatch(r"BlockName=[A-Za-z0-9_-]+ Nodes=[\w.,-]+", s) for s in settings)
    assert "# Nodes without an NVLink domain, in no block: hgx-01" in text


def test_no_domain_at_all_is_an_error() -> None:
    with pytest.raises(InventoryError, match="no snapshot reports an NVLink domain"):
        render_slurm_topology([snapshot(8)])


def test_two_snapshots_of_one_host_are_an_error() -> None:
    with pytest.raises(InventoryError, match="both of host 'gb-01'"):
        slurm_blocks([node("gb-01"), node("gb-01.example.org")])


def test_the_cli_writes_the_file(tmp_path: Path) -> None:
    paths = []
    for i, data in enumerate(racks()):
        paths.append(tmp_path / f"node{i}.json")
        paths[-1].write_text(json.dumps(data))
    out = tmp_path / "topology.conf"
    status = main(["slurm-topology", *map(str, paths), "--format", "conf", "-o", str(out)])
    assert status == 0
    assert "BlockName=nvl1 Nodes=gb-03" in out.read_text()


def test_the_cli_reports_a_bad_snapshot(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "node0.json"
    bad.write_text(json.dumps(snapshot(1) | {"cpus": "many"}))
    assert main(["slurm-topology", str(bad)]) != 0
    assert "cpus" in capsys.readouterr().err
