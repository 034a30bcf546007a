"""Which live Ray nodes are the job's nodes: every node but those that offer nothing.

A Ray head started only to run the cluster runs none of the job's work: KubeRay's
recommended head has ``num-cpus: 0`` and no GPUs, and a SLURM or hand-made cluster starts
it with ``ray start --head --num-cpus 0``. Such a node is not one of the job's nodes. The
rule: a node is left out when it offers nothing to schedule on (0 CPUs and none of the
accelerator resources: ``GPU``, ``NPU``, ``HPU`` or any registered vendor's, as Ray
counts them) **and** carries no node rank (no ``node-rank`` label and no
``PLACEMENT_NODE_RANK`` / ``RLINF_NODE_RANK`` in its environment). A node given a rank is
always the job's, whatever it offers (a labelled CPU-less head is rank 0 of its job).

Discovery logs each node it leaves out (``node_id (ip) is not a node of the job: ...``) and
``Cluster.left_out`` lists them. While waiting for nodes only Ray's node table is known,
not each node's environment, so a node that offers nothing counts there only when it
carries the ``node-rank`` label. See docs/concepts/node-order.md.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from placement_core import RAY_RESOURCES
from placement_native import NODE_RANK_ENVS

from ._node_order import NODE_RANK_LABEL, NodeFacts

__all__ = [
    "counts_while_waiting",
    "job_nodes",
    "left_out_line",
    "offers_nothing",
]


def offers_nothing(resources: Mapping[str, float]) -> bool:
    """Whether a node's Ray resources hold no CPU and no accelerator of any vendor."""
    kinds = {"CPU", *RAY_RESOURCES.values()}
    return not any(float(resources.get(kind, 0.0) or 0.0) > 0 for kind in kinds)


def _has_rank(labels: Mapping[str, str], env: Mapping[str, str]) -> bool:
    return NODE_RANK_LABEL in labels or any(var in env for var in NODE_RANK_ENVS)


def job_nodes(nodes: Sequence[NodeFacts]) -> tuple[list[NodeFacts], list[NodeFacts]]:
    """Split discovered nodes into the job's nodes and those left out (see the module).

    Returns:
        ``(kept, left_out)``, each in the given order.
    """
    kept: list[NodeFacts] = []
    left_out: list[NodeFacts] = []
    for node in nodes:
        empty = offers_nothing(node.resources) and not _has_rank(node.labels, node.env)
        (left_out if empty else kept).append(node)
    return kept, left_out


def left_out_line(node: NodeFacts) -> str:
    """The line that names a node left out of the job, and why."""
    return (
        f"node {node.node_id} ({node.ip or 'no IP'}) is not a node of the job: it offers "
        f"nothing to schedule on (0 CPUs, no accelerators) and has no node rank "
        f"(label {NODE_RANK_LABEL!r} or {' / '.join(NODE_RANK_ENVS)}); a Ray head started "
        "with --num-cpus 0 looks like this"
    )


def counts_while_waiting(entry: Mapping[str, Any]) -> bool:
    """Whether a live node of Ray's node table counts toward the nodes a job waits for:
    it offers something, or carries the ``node-rank`` label (its environment is not known
    before discovery)."""
    labels = entry.get("Labels") or {}
    return NODE_RANK_LABEL in labels or not offers_nothing(entry.get("Resources") or {})
