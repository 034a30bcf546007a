#!/usr/bin/env bash
# A Ray cluster for a placement job on a SLURM allocation, then the job itself.
#
#   sbatch --nodes=4 examples/cluster/slurm_ray.sh job.yaml train.py
#
# 1. Every node writes its placement-native snapshot, tagged with its node rank.
# 2. The job's config is planned offline on those snapshots: a config that does not fit
#    the allocation fails here, before Ray starts.
# 3. Node i of the allocation (SLURM's node id, SLURM_NODEID) starts Ray with the
#    `node-rank=i` label and PLACEMENT_NODE_RANK=i; node 0 is the head and runs the job.
# 4. The job runs once every node has joined; Ray stops when it ends.
#
# Ray detects each node's GPUs (NVIDIA, AMD, Intel), Ascend NPUs or Gaudi HPUs itself;
# nodes of accelerators Ray has no manager for (MUSA, Kunlun) add theirs with
# RAY_EXTRA_ARGS='--resources={"MUSA": 8}'. Run it in the environment the job uses
# (placement-ray installed; activate it in the lines marked below).
#
#SBATCH --job-name=placement-ray
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=1
#SBATCH --exclusive
#SBATCH --time=04:00:00
#SBATCH --output=%x-%j.out
set -euo pipefail

CONFIG=${1:?usage: sbatch slurm_ray.sh CONFIG.yaml JOB.py [JOB ARGS...]}
JOB=${2:?usage: sbatch slurm_ray.sh CONFIG.yaml JOB.py [JOB ARGS...]}
shift 2
RAY_PORT=${RAY_PORT:-6379}
RAY_EXTRA_ARGS=${RAY_EXTRA_ARGS:-}
SNAPSHOTS=${SNAPSHOTS:-snapshots-${SLURM_JOB_ID}}
NUM_NODES=${SLURM_JOB_NUM_NODES}
# source /path/to/venv/bin/activate      # the job's environment, on the batch node

mapfile -t HOSTS < <(scontrol show hostnames "${SLURM_JOB_NODELIST}")
HEAD_HOST=${HOSTS[0]}
HEAD_IP=$(srun --nodes=1 --ntasks=1 -w "${HEAD_HOST}" hostname --ip-address | awk '{print $1}')
export HEAD_IP RAY_PORT RAY_EXTRA_ARGS SNAPSHOTS
mkdir -p "${SNAPSHOTS}"

# 1. One snapshot per node, named and tagged by the node's rank (its SLURM node id).
# shellcheck disable=SC2016  # expanded on each node, by the srun task
srun --nodes="${NUM_NODES}" --ntasks-per-node=1 bash -c '
    PLACEMENT_NODE_RANK=${SLURM_NODEID} python -m placement_native snapshot --json \
        > "${SNAPSHOTS}/node${SLURM_NODEID}.json"
'

# 2. Plan offline on the snapshots: fails before anything starts if the job does not fit.
placement validate "${CONFIG}" --inventory "${SNAPSHOTS}"/node*.json
placement plan "${CONFIG}" --inventory "${SNAPSHOTS}"/node*.json --format table

# 3. Ray on every node, node-rank label = SLURM node id; node 0 is the head.
# shellcheck disable=SC2016  # expanded on each node, by the srun task
srun --nodes="${NUM_NODES}" --ntasks-per-node=1 --kill-on-bad-exit=1 bash -c '
    export PLACEMENT_NODE_RANK=${SLURM_NODEID}
    if [ "${SLURM_NODEID}" -eq 0 ]; then
        exec ray start --head --node-ip-address="${HEAD_IP}" --port="${RAY_PORT}" \
            --labels="node-rank=${SLURM_NODEID}" --block ${RAY_EXTRA_ARGS}
    fi
    until ray health-check --address="${HEAD_IP}:${RAY_PORT}" >/dev/null 2>&1; do
        sleep 2
    done
    exec ray start --address="${HEAD_IP}:${RAY_PORT}" \
        --labels="node-rank=${SLURM_NODEID}" --block ${RAY_EXTRA_ARGS}
' &
RAY_STEP=$!
trap 'kill "${RAY_STEP}" 2>/dev/null || true' EXIT

# 4. Wait for every node (ranks 0..n-1), then run the job against this cluster.
export RAY_ADDRESS="${HEAD_IP}:${RAY_PORT}"
python - "${NUM_NODES}" <<'PY'
import sys

from placement_ray import Cluster

cluster = Cluster(int(sys.argv[1]), timeout_s=600)
for node in cluster.inventory.nodes:
    print(f"node {node.rank}: {node.hostname} {node.ip} "
          f"{len(node.accelerators)}x {node.accelerator_type or 'no accelerators'}")
PY
python "${JOB}" "${CONFIG}" "$@"
