#!/usr/bin/env bash
# Submit slurm_ray.sh so that the job gets whole NVLink domains (GB200 NVL72 racks):
# `sbatch --segment=<nodes per domain>`, which Slurm's topology/block plugin (Slurm 24.05
# and later, its blocks written by `placement slurm-topology`) answers with segments of
# that many nodes, each inside one block. SEGMENT is passed on to the job, whose batch
# script checks what Slurm allocated (docs/guides/real-cluster.md).
#
#   SEGMENT=18 examples/cluster/slurm_submit.sh --nodes=36 -- job.yaml train.py [JOB ARGS...]
#   SNAPSHOTS='/shared/snapshots/*.json' examples/cluster/slurm_submit.sh --nodes=36 -- job.yaml train.py
#
# Words before `--` are sbatch's options; after it, slurm_ray.sh's arguments.
#
# Settings (environment variables):
#   SEGMENT     nodes per segment: the nodes of an NVLink domain
#   SNAPSHOTS   else, the node snapshots the topology was written from (a quoted glob):
#               the segment is what `placement slurm-topology --segment` prints for them
#   SBATCH      the sbatch command (default: sbatch)
#
# An sbatch without --segment (Slurm before 24.05) cannot keep a job in whole domains:
# the script says so and submits nothing. Every other setting of slurm_ray.sh passes
# through sbatch as usual.
set -euo pipefail

fail() {
    echo "slurm_submit.sh: error: $*" >&2
    exit 1
}

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
USAGE="usage: SEGMENT=N slurm_submit.sh [SBATCH OPTIONS...] -- CONFIG.yaml JOB.py [JOB ARGS...]"
SBATCH=${SBATCH:-sbatch}
OPTIONS=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
    OPTIONS+=("$1")
    shift
done
[ $# -ge 3 ] || fail "${USAGE}"
shift

if [ -n "${SEGMENT:-}" ]; then
    [[ "${SEGMENT}" =~ ^[1-9][0-9]*$ ]] || fail "SEGMENT: ${SEGMENT@Q} is not a node count (1 or more)"
elif [ -n "${SNAPSHOTS:-}" ]; then
    # shellcheck disable=SC2206 # SNAPSHOTS is a glob, to expand here
    FILES=(${SNAPSHOTS})
    [ -e "${FILES[0]}" ] || fail "SNAPSHOTS: ${SNAPSHOTS@Q} names no file"
    SEGMENT=$(placement slurm-topology --segment "${FILES[@]}") ||
        fail "SNAPSHOTS: no segment size from ${SNAPSHOTS@Q} (the lines above say why)"
else
    fail "set SEGMENT=<nodes per NVLink domain>, or SNAPSHOTS='<dir>/*.json' to read it from the nodes' snapshots (${USAGE})"
fi

# The node count: sbatch's options, else the batch script's own #SBATCH line.
NODES=""
for ((i = 0; i < ${#OPTIONS[@]}; i++)); do
    case "${OPTIONS[i]}" in
    --nodes=*) NODES=${OPTIONS[i]#--nodes=} ;;
    --nodes | -N) NODES=${OPTIONS[i + 1]:-} ;;
    -N*) NODES=${OPTIONS[i]#-N} ;;
    --segment | --segment=*) fail "${OPTIONS[i]}: the segment is set by SEGMENT (or SNAPSHOTS)" ;;
    esac
done
[ -n "${NODES}" ] || NODES=$(sed -n 's/^#SBATCH --nodes=//p' "${HERE}/slurm_ray.sh" | head -n 1)
# Slurm refuses a node count above the segment that is not a multiple of it.
if [[ "${NODES}" =~ ^[0-9]+$ ]] && [ "${NODES}" -gt "${SEGMENT}" ] && [ $((NODES % SEGMENT)) -ne 0 ]; then
    fail "--nodes=${NODES} is not a multiple of the segment, ${SEGMENT} nodes: ask for $((NODES / SEGMENT * SEGMENT)) or $(((NODES / SEGMENT + 1) * SEGMENT)) nodes"
fi

HELP=$("${SBATCH}" --help 2>&1) || fail "${SBATCH} --help failed, so its options are unknown: ${HELP}"
if ! grep -q -- "--segment" <<<"${HELP}"; then
    VERSION=$("${SBATCH}" --version 2>/dev/null || echo "${SBATCH}")
    fail "${VERSION} has no --segment option (Slurm 24.05 and later, with TopologyPlugin=topology/block): it cannot keep the job in whole NVLink domains, so nothing was submitted. Submit with sbatch itself instead; SEGMENT=${SEGMENT} sbatch ... slurm_ray.sh still checks the allocation (SEGMENT_SPLIT=warn to run a split job anyway)"
fi
export SEGMENT
echo "slurm_submit.sh: ${SBATCH} ${OPTIONS[*]} --segment=${SEGMENT} ${HERE}/slurm_ray.sh $*" >&2
exec "${SBATCH}" "${OPTIONS[@]}" --segment="${SEGMENT}" "${HERE}/slurm_ray.sh" "$@"
