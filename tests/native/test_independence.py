"""placement-native stands alone: it never imports placement-core, pydantic or ray."""

from __future__ import annotations

import os
import subprocess
import sys

from .conftest import UseNode


def test_snapshot_and_ports_import_neither_core_nor_pydantic_nor_ray(use_node: UseNode) -> None:
    use_node("dgx-h100")
    code = (
        "import sys, placement_native as p\n"
        "p.snapshot().to_json()\n"
        "with p.reserve_ports(2):\n"
        "    pass\n"
        "foreign = ('placement_core', 'pydantic', 'ray', 'yaml')\n"
        "bad = sorted(m for m in foreign if m in sys.modules)\n"
        "sys.exit(f'imported: {bad}' if bad else 0)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=dict(os.environ)
    )
    assert result.returncode == 0, result.stderr or result.stdout
