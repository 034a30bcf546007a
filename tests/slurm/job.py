"""The job the SLURM tests submit: every worker says where it runs, as Ray sees it.

``python job.py CONFIG`` launches one ``Probe`` per placement of ``agent`` and prints a
line per worker: its rank, its node's ``node-rank`` label, its ``PLACEMENT_NODE_RANK``
and the accelerators it sees.
"""

from __future__ import annotations

import os
import sys

import ray

from placement_ray import Cluster, launch


class Probe:
    def where(self) -> str:
        labels = ray.get_runtime_context().get_node_labels()
        return (
            f"worker {os.environ['RANK']}: label node-rank={labels.get('node-rank')} "
            f"env PLACEMENT_NODE_RANK={os.environ.get('PLACEMENT_NODE_RANK')} "
            f"MUSA_VISIBLE_DEVICES={os.environ.get('MUSA_VISIBLE_DEVICES')}"
        )


def main(config: str) -> None:
    cluster = Cluster()
    with launch(config, {"agent": Probe}, cluster) as job:
        for line in job["agent"].execute("where"):
            print(line, flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
