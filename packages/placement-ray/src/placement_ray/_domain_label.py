"""The NVLink domain as a Ray node label, ``placement.io/nvlink-domain``.

A node started with ``ray start --labels="$(python -m placement_ray labels)"`` carries its
rank and its NVLink domain (core's ``Node.nvlink_domain`` from the node's snapshot:
``<cluster_uuid>/<clique_id>``, written ``<cluster_uuid>.<clique_id>`` because a label
value may not hold a ``/``), so Ray's label selectors can keep work inside one domain:
a bundle that ``launch`` pins to a labelled node asks for that node's domain label too.
Ray 2.60's own ``ray.io/gpu-domain`` (its placement groups' ``topology_strategy``) is
in the ``ray.io/`` prefix that Ray reserves for the labels it sets itself, so placement
does not set it. Discovery checks a node's label against its snapshot.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from placement_core import node_from_snapshot

from ._node_order import NODE_RANK_LABEL
from .errors import ClusterError

DOMAIN_LABEL = "placement.io/nvlink-domain"
_LABEL_VALUE = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")


def domain_label_value(domain: str) -> str:
    """``domain`` as a Ray (Kubernetes-syntax) label value: ``/`` becomes ``.``.

    Raises:
        ClusterError: The domain makes no valid label value (over 63 characters, or
            characters other than letters, digits, ``-``, ``_`` and ``.``).
    """
    value = domain.replace("/", ".")
    if len(value) > 63 or not _LABEL_VALUE.fullmatch(value):
        raise ClusterError(
            f"NVLink domain {domain!r} makes no Ray label value ({value!r}): expected at "
            "most 63 letters, digits, '-', '_' or '.', starting and ending with a letter "
            "or digit"
        )
    return value


def snapshot_labels(snapshot: Mapping[str, Any]) -> dict[str, str]:
    """The labels for ``ray start`` on the node of ``snapshot``: its ``node-rank`` (when
    the snapshot carries one) and its NVLink domain (when it has one)."""
    node = node_from_snapshot(dict(snapshot), rank=0, accept_partial=True)
    labels = {}
    if snapshot.get("node_rank") is not None:
        labels[NODE_RANK_LABEL] = str(snapshot["node_rank"])
    if node.nvlink_domain is not None:
        labels[DOMAIN_LABEL] = domain_label_value(node.nvlink_domain)
    return labels


def domain_selector(labels: Mapping[str, str]) -> dict[str, str]:
    """The part of a bundle's label selector that keeps it in its node's NVLink domain:
    ``{placement.io/nvlink-domain: <value>}`` where the node carries the label, else
    nothing. A pinned bundle then needs both its node and that node's domain."""
    value = labels.get(DOMAIN_LABEL)
    return {} if value is None else {DOMAIN_LABEL: value}


def check_domain_label(
    rank: int, node_id: str, labels: Mapping[str, str], domain: str | None
) -> None:
    """Refuse a node whose ``placement.io/nvlink-domain`` label contradicts its snapshot.

    Raises:
        ClusterError: The label is there and names another domain than the snapshot's
            (or the snapshot has none).
    """
    label = labels.get(DOMAIN_LABEL)
    if label is None:
        return
    expected = None if domain is None else domain.replace("/", ".")
    if label != expected:
        found = "no NVLink domain" if domain is None else f"domain {domain!r}"
        raise ClusterError(
            f"node {rank} ({node_id}) carries the label {DOMAIN_LABEL}={label} but its "
            f"snapshot reports {found}: start the node with the labels `python -m "
            "placement_ray labels` prints there"
        )
