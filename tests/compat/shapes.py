"""The two simulated clusters the compat tests run on."""

from __future__ import annotations

from typing import Any

IPS: dict[str, Any] = {
    "nodes": 3,
    "gpus_per_node": (2, 2, 1),
    "cpus_per_node": 4,
    "labelled": False,
    "node_ip": ("127.0.0.1", "127.0.0.10", "127.0.0.9"),
    "timeout_s": 240,
}
"""Unequal nodes whose IPs sort differently as text (.1, .10, .9) and as numbers (.1, .9,
.10). Without node-rank labels the driver's node comes first, then numeric IP order: node
1 is 127.0.0.9, node 2 is 127.0.0.10."""

NODE_IPS = ("127.0.0.1", "127.0.0.9", "127.0.0.10")
"""The IP of node 0, 1, 2 of ``IPS``, in placement-ray's node order."""

SHARED: dict[str, Any] = {"nodes": 2, "gpus_per_node": 2, "cpus_per_node": 4, "timeout_s": 240}
"""Two nodes sharing 127.0.0.1, told apart by their node-rank labels."""
