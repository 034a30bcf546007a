"""The SLURM cluster of the tests in this folder (see slurm_cluster.py)."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from .slurm_cluster import DAEMONS, SlurmCluster, interfaces, unavailable


@pytest.fixture(scope="session")
def slurm() -> Iterator[SlurmCluster]:
    missing = [tool for tool in DAEMONS if shutil.which(tool) is None]
    if missing:
        unavailable(
            f"needs Debian's slurm-wlm and munge (missing {', '.join(missing)}): "
            "nox -s slurm installs them"
        )
    if interfaces() != ["lo"]:
        unavailable(
            "the SLURM tests run in a network namespace with only the loopback interface "
            f"(this one has {', '.join(interfaces())}): run them with nox -s slurm"
        )
    root = Path(tempfile.mkdtemp(prefix="placement-slurm-"))
    root.chmod(0o755)
    cluster = SlurmCluster(root)
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()
