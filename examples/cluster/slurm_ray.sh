#!/usr/bin/env bash
# A Ray cluster for a placement job on a SLURM allocation, then the job itself
# (docs/guides/real-cluster.md walks a first run).
#
#   sbatch --nodes=4 examples/cluster/slurm_ray.sh job.yaml train.py [JOB ARGS...]
#
# Submit from a directory every node shares (the job's directory is made there), in the
# job's Python environment (placement-ray installed; also on a shared filesystem):
# sbatch passes the environment on to every node.
#
# 1. Every node writes its placement-native snapshot, tagged with its node rank (its
#    SLURM node id), and the address Ray will use on it.
# 2. The job's config is planned offline on those snapshots: a config that does not fit
#    the allocation fails here, before Ray starts.
# 3. Node i starts Ray with the `node-rank=i` label (and `placement.io/nvlink-domain`, on
#    nodes of a multi-node NVLink domain) and PLACEMENT_NODE_RANK=i; node 0 is the head.
#    A `ray start` that fails ends the job at once.
# 4. The job runs once every node has joined; then Ray stops on every node, and the job's
#    exit status is the batch script's.
#
# Settings (environment variables, all optional):
#   JOB_DIR         the job's directory, on a shared filesystem (default:
#                   placement-<job id> in the submit directory): snapshots, token, logs
#   RAY_PORT        the head's port (default 6379)
#   RAY_AUTH        token (default: a fresh token in JOB_DIR, given to every node; never
#                   ~/.ray) or disabled
#   RAY_RESOURCES   custom Ray resources of every node, a JSON object, for accelerators Ray
#                   has no manager for: RAY_RESOURCES='{"MUSA": 8}'
#   RAY_EXTRA_ARGS  more `ray start` options for every node, words of the form --name or
#                   --name=value
#   RAY_HEAD_ARGS   the same, for the head only (--include-dashboard=false, --num-cpus=0)
#   NODE_IFACE      the network interface whose IPv4 address Ray uses on every node
#                   (default: the address of the default route, the snapshot's `ip`)
#   RAY_WAIT_S      how long to wait for the head and for every node (default 300)
#   SEGMENT         nodes per segment the allocation must be made of, each segment in one
#                   NVLink domain (slurm_submit.sh sets it; unset: not checked)
#   SEGMENT_SPLIT   fail (default): a job that SEGMENT says Slurm split across NVLink
#                   domains ends before Ray starts; warn: it runs on with a warning
#
# NVLink domains (GB200 NVL72 racks): with Slurm's topology/block plugin configured from
# `placement slurm-topology node*.json` (one block per domain), submit through
# slurm_submit.sh, which runs `sbatch --segment=<nodes per domain>` where sbatch has the
# option (Slurm 24.05 and later) and sets SEGMENT so that this script checks what Slurm
# allocated.
#
#SBATCH --job-name=placement-ray
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=1
#SBATCH --exclusive
#SBATCH --time=04:00:00
#SBATCH --output=%x-%j.out
set -euo pipefail

fail() {
    echo "slurm_ray.sh: error: $*" >&2
    exit 1
}

# The address Ray uses on this node: NODE_IFACE's IPv4 address, else the snapshot's.
node_ip() {
    if [ -n "${NODE_IFACE:-}" ]; then
        local found
        found=$(ip -4 -o addr show dev "${NODE_IFACE}" 2>/dev/null | awk '{print $4}' | head -n 1)
        [ -n "${found}" ] || fail "node ${SLURM_NODEID} ($(hostname)): NODE_IFACE=${NODE_IFACE} has no IPv4 address"
        echo "${found%/*}"
    else
        python -c 'import json, sys; print(json.load(open(sys.argv[1]))["ip"])' "$1"
    fi
}

# Step 1 on one node: its snapshot, and "<host> <ip> <ray labels>" in the job's directory.
on_node_snapshot() {
    local snapshot="${JOB_DIR}/snapshots/node${SLURM_NODEID}.json"
    PLACEMENT_NODE_RANK=${SLURM_NODEID} python -m placement_native snapshot --json >"${snapshot}"
    local ip labels # its Ray labels: node-rank, and its NVLink domain where it has one
    ip=$(node_ip "${snapshot}")
    labels=$(python -m placement_ray labels "${snapshot}")
    echo "$(hostname) ${ip} ${labels}" >"${JOB_DIR}/nodes/${SLURM_NODEID}"
}

# The processes under PID (children, theirs, ...), separated by spaces.
descendants() {
    ps -e -o pid=,ppid= | awk -v root="$1" '
        { parent[$1] = $2 }
        END {
            found[root] = 1
            for (changed = 1; changed;) {
                changed = 0
                for (p in parent) if (!(p in found) && (parent[p] in found)) { found[p] = 1; changed = 1 }
            }
            for (p in found) if (p != root) printf "%s ", p
        }'
}

# Stop this node's Ray: SIGTERM to `ray start --block` (Ray's own graceful stop, for its
# processes on this node only, unlike `ray stop`), then to whatever it started that is
# still there (agents outlive their raylet for a while), SIGKILL after 20 s.
stop_node_ray() {
    local pid=$1 left=() waited=0
    read -ra left <<<"$(descendants "${pid}")"
    kill -TERM "${pid}" 2>/dev/null || true
    wait "${pid}" 2>/dev/null || true
    while [ "${waited}" -lt 20 ] && any_alive "${left[@]}"; do
        [ "${waited}" -ne 5 ] || kill -TERM "${left[@]}" 2>/dev/null || true
        sleep 1
        waited=$((waited + 1))
    done
    [ "${#left[@]}" -eq 0 ] || kill -KILL "${left[@]}" 2>/dev/null || true
}

any_alive() {
    local pid
    for pid in "$@"; do
        kill -0 "${pid}" 2>/dev/null && return 0
    done
    return 1
}

# Step 3 on one node: Ray until the batch script writes JOB_DIR/stop, then a clean stop.
on_node_ray() {
    export PLACEMENT_NODE_RANK=${SLURM_NODEID}
    local ip labels extra=() start=()
    read -r _ ip labels <"${JOB_DIR}/nodes/${SLURM_NODEID}"
    read -ra extra <<<"${RAY_EXTRA_ARGS:-}"
    [ -z "${RAY_RESOURCES:-}" ] || extra+=("--resources=${RAY_RESOURCES}")
    local log="${JOB_DIR}/logs/ray-node${SLURM_NODEID}.log"
    if [ "${SLURM_NODEID}" -eq 0 ]; then
        local head=()
        read -ra head <<<"${RAY_HEAD_ARGS:-}"
        start=(--head --port="${RAY_PORT}" "${head[@]}")
    else
        # The head is up once its `ray start` says so (JOB_DIR/head-up), and reachable
        # from here once `ray health-check` answers.
        local waited=0
        until [ -e "${JOB_DIR}/head-up" ] && ray health-check --address="${HEAD_ADDRESS}" >/dev/null 2>&1; do
            [ -e "${JOB_DIR}/stop" ] && return 0
            waited=$((waited + 2))
            [ "${waited}" -lt "${RAY_WAIT_S}" ] ||
                fail "node ${SLURM_NODEID} ($(hostname), ${ip}) cannot reach the head at ${HEAD_ADDRESS} after ${RAY_WAIT_S} s"
            sleep 2
        done
        start=(--address="${HEAD_ADDRESS}")
    fi
    local ray_pid tries=1
    ray start "${start[@]}" --node-ip-address="${ip}" --labels="${labels}" \
        --block "${extra[@]}" >"${log}" 2>&1 &
    ray_pid=$!
    # SLURM ends a failed step's other tasks with SIGTERM: Ray goes with them.
    trap 'stop_node_ray "${ray_pid}"; exit 1' TERM INT
    while [ ! -e "${JOB_DIR}/stop" ]; do
        if [ "${SLURM_NODEID}" -eq 0 ] && [ ! -e "${JOB_DIR}/head-up" ] &&
            grep -q "Ray runtime started" "${log}"; then
            touch "${JOB_DIR}/head-up"
        fi
        if ! kill -0 "${ray_pid}" 2>/dev/null; then
            local status=0
            wait "${ray_pid}" || status=$?
            # Ray 2.60 gives a starting node 30 s to register, which an overloaded node
            # can miss: one more try, then the failure.
            if [ "${tries}" -lt 2 ] && grep -q "timed out during startup" "${log}"; then
                echo "slurm_ray.sh: node ${SLURM_NODEID}: Ray did not register within its 30 s; starting it again" >&2
                tries=$((tries + 1))
                ray start "${start[@]}" --node-ip-address="${ip}" --labels="${labels}" \
                    --block "${extra[@]}" >"${log}" 2>&1 &
                ray_pid=$!
                continue
            fi
            tail -n 20 "${log}" >&2
            # Also in the job's directory: the batch script prints it if SLURM ends the
            # step before this task's output reaches the job's log.
            local why
            why="node ${SLURM_NODEID} ($(hostname)): ray start exited (status ${status}); its log: ${log}"
            echo "slurm_ray.sh: error: ${why}" >"${JOB_DIR}/logs/node${SLURM_NODEID}.error"
            fail "${why}"
        fi
        sleep 1
    done
    stop_node_ray "${ray_pid}"
}

if [ "${1:-}" = "--on-node" ]; then
    case "${2:-}" in
    snapshot) on_node_snapshot ;;
    ray) on_node_ray ;;
    *) fail "--on-node: ${2@Q} is not one of snapshot, ray" ;;
    esac
    exit 0
fi

USAGE="usage: sbatch slurm_ray.sh CONFIG.yaml JOB.py [JOB ARGS...]"
CONFIG=${1:?${USAGE}}
JOB=${2:?${USAGE}}
shift 2
: "${SLURM_JOB_ID:?not inside a SLURM job: submit with sbatch (${USAGE})}"
RAY_PORT=${RAY_PORT:-6379}
RAY_AUTH=${RAY_AUTH:-token}
RAY_WAIT_S=${RAY_WAIT_S:-300}
JOB_DIR=$(realpath -m "${JOB_DIR:-placement-${SLURM_JOB_ID}}")
NUM_NODES=${SLURM_JOB_NUM_NODES}
# source /path/to/venv/bin/activate      # or submit from the activated environment

# Settings are checked before anything runs on the nodes.
check_words() { # NAME VALUE: ray start options as words the script can pass on as they are
    local word words=()
    read -ra words <<<"$2"
    for word in "${words[@]}"; do
        [[ "${word}" =~ ^--[a-z][a-z0-9-]*(=[^\"\'{}[:space:]]*)?$ ]] ||
            fail "$1: ${word@Q} is not a --name or --name=value word (no quotes, braces or JSON: custom resources go in RAY_RESOURCES='{\"MUSA\": 8}')"
        case "${word}" in --head | --address=* | --port=* | --labels=* | --node-ip-address=* | --block | --resources=*)
            fail "$1: ${word} is set by the script (RAY_PORT, NODE_IFACE, RAY_RESOURCES set those that vary)"
            ;;
        esac
    done
}
check_words RAY_EXTRA_ARGS "${RAY_EXTRA_ARGS:-}"
check_words RAY_HEAD_ARGS "${RAY_HEAD_ARGS:-}"
if [ -n "${RAY_RESOURCES:-}" ]; then
    python - "${RAY_RESOURCES}" <<'PY' || fail "RAY_RESOURCES: ${RAY_RESOURCES@Q} is not a JSON object of resource names to numbers >= 0, like '{\"MUSA\": 8}'"
import json, sys

value = json.loads(sys.argv[1])
ok = isinstance(value, dict) and all(
    isinstance(k, str) and k and type(v) in (int, float) and v >= 0 for k, v in value.items()
)
sys.exit(0 if ok and value else 1)
PY
fi
[[ "${RAY_PORT}" =~ ^[0-9]+$ ]] && [ "${RAY_PORT}" -ge 1 ] && [ "${RAY_PORT}" -le 65535 ] ||
    fail "RAY_PORT: ${RAY_PORT@Q} is not a port number from 1 to 65535"
case "${RAY_AUTH}" in token | disabled) ;; *) fail "RAY_AUTH: ${RAY_AUTH@Q} is not one of token, disabled" ;; esac
[[ "${RAY_WAIT_S}" =~ ^[0-9]+$ ]] || fail "RAY_WAIT_S: ${RAY_WAIT_S@Q} is not a number of seconds"
[[ "${SEGMENT:-1}" =~ ^[1-9][0-9]*$ ]] || fail "SEGMENT: ${SEGMENT@Q} is not a node count (1 or more)"
case "${SEGMENT_SPLIT:=fail}" in fail | warn) ;; *) fail "SEGMENT_SPLIT: ${SEGMENT_SPLIT@Q} is not one of fail, warn" ;; esac
[ -r "${CONFIG}" ] || fail "CONFIG: ${CONFIG@Q} is not a readable file (paths are relative to $(pwd))"
[ -r "${JOB}" ] || fail "JOB: ${JOB@Q} is not a readable file (paths are relative to $(pwd))"

mkdir -p "${JOB_DIR}"
chmod 700 "${JOB_DIR}"
mkdir -p "${JOB_DIR}/snapshots" "${JOB_DIR}/nodes" "${JOB_DIR}/logs"
rm -f "${JOB_DIR}/stop" "${JOB_DIR}/head-up" "${JOB_DIR}"/nodes/* "${JOB_DIR}"/snapshots/*
# The copy every node runs its steps from (SLURM keeps the batch script on this node only).
cp "${BASH_SOURCE[0]}" "${JOB_DIR}/slurm_ray.sh"

# Ray's token authentication: one fresh token for this job, read from JOB_DIR by every
# node and every driver, and RAY_AUTH_MODE set, so ~/.ray never decides. The token path is
# set with RAY_AUTH=disabled too: Ray 2.60 with RAY_AUTH_MODE=disabled still reads a
# ~/.ray/auth_token left by an earlier ray.init(), and the head then fails to start.
unset RAY_AUTH_TOKEN
(umask 077 && python -c 'import secrets; print(secrets.token_hex(32))' >"${JOB_DIR}/ray_auth_token")
export RAY_AUTH_MODE="${RAY_AUTH}" RAY_AUTH_TOKEN_PATH="${JOB_DIR}/ray_auth_token"
export JOB_DIR RAY_PORT RAY_WAIT_S RAY_EXTRA_ARGS RAY_HEAD_ARGS RAY_RESOURCES NODE_IFACE
# How long Ray's GCS waits for a starting node to register (Ray's default makes a busy
# node miss its start; the error itself says to raise this setting).
export RAY_raylet_start_wait_time_s=${RAY_raylet_start_wait_time_s:-120}

# 1. One snapshot per node, named and tagged by the node's rank (its SLURM node id).
srun --nodes="${NUM_NODES}" --ntasks-per-node=1 --kill-on-bad-exit=1 \
    bash "${JOB_DIR}/slurm_ray.sh" --on-node snapshot
HOSTNAMES=() ADDRESSES=()
for ((i = 0; i < NUM_NODES; i++)); do
    [ -s "${JOB_DIR}/nodes/${i}" ] ||
        fail "node ${i} wrote no snapshot into ${JOB_DIR}: it must be on a filesystem every node shares (set JOB_DIR and submit from there)"
    read -r "HOSTNAMES[i]" "ADDRESSES[i]" _ <"${JOB_DIR}/nodes/${i}"
done
# A multi-node job needs addresses the other nodes reach: no loopback address unless
# every node runs on this one host.
if [ "${NUM_NODES}" -gt 1 ]; then
    for ((i = 0; i < NUM_NODES; i++)); do
        case "${ADDRESSES[i]}" in 127.* | ::1 | localhost)
            [ "$(printf '%s\n' "${HOSTNAMES[@]}" | sort -u | wc -l)" -eq 1 ] ||
                fail "node ${i} (${HOSTNAMES[i]}) would use the loopback address ${ADDRESSES[i]}, which other hosts cannot reach: set NODE_IFACE to the interface the nodes talk over"
            ;;
        esac
    done
fi
HEAD_ADDRESS="${ADDRESSES[0]}:${RAY_PORT}"
export HEAD_ADDRESS

# With SEGMENT: the allocation must be whole segments, each in one NVLink domain (what
# `sbatch --segment` asks of the topology/block plugin), by the nodes' snapshots.
if [ -n "${SEGMENT:-}" ]; then
    if WHOLE=$(placement slurm-topology --check-segment "${SEGMENT}" "${JOB_DIR}"/snapshots/node*.json 2>&1); then
        echo "slurm_ray.sh: ${WHOLE}"
    elif [ "${SEGMENT_SPLIT}" = warn ]; then
        echo "slurm_ray.sh: warning: ${WHOLE#placement: error: segment: } (SEGMENT_SPLIT=warn: running anyway)" >&2
    else
        fail "${WHOLE#placement: error: segment: } (SEGMENT_SPLIT=warn runs a split job anyway)"
    fi
fi

# 2. Plan offline on the snapshots: fails before anything starts if the job does not fit.
placement validate "${CONFIG}" --inventory "${JOB_DIR}"/snapshots/node*.json
placement plan "${CONFIG}" --inventory "${JOB_DIR}"/snapshots/node*.json --format table

# 3. Ray on every node with the labels of step 1 (node-rank = SLURM node id); node 0 is
#    the head.
srun --nodes="${NUM_NODES}" --ntasks-per-node=1 --kill-on-bad-exit=1 \
    bash "${JOB_DIR}/slurm_ray.sh" --on-node ray &
RAY_STEP=$!
stop_ray() {
    touch "${JOB_DIR}/stop"
    local waited=0
    while kill -0 "${RAY_STEP}" 2>/dev/null && [ "${waited}" -lt 60 ]; do
        sleep 1
        waited=$((waited + 1))
    done
    kill "${RAY_STEP}" 2>/dev/null || true
    wait "${RAY_STEP}" 2>/dev/null || true
}
trap stop_ray EXIT

# 4. Wait for the head, then for every node (ranks 0..n-1), failing fast if Ray's step
#    ends; then run the job.
ray_step_alive() {
    kill -0 "${RAY_STEP}" 2>/dev/null && return 0
    local error
    for error in "${JOB_DIR}"/logs/node*.error; do
        [ ! -e "${error}" ] || cat "${error}" >&2
    done
    fail "Ray did not start on every node (its step ended; the lines above say why)"
}
WAITED=0
until [ -e "${JOB_DIR}/head-up" ]; do
    ray_step_alive
    [ "${WAITED}" -lt "${RAY_WAIT_S}" ] || fail "the head did not start Ray within ${RAY_WAIT_S} s"
    sleep 1
    WAITED=$((WAITED + 1))
done
export RAY_ADDRESS="${HEAD_ADDRESS}"
python - "${NUM_NODES}" "${RAY_WAIT_S}" <<'PY' &
import sys

from placement_ray import Cluster

cluster = Cluster(int(sys.argv[1]), timeout_s=float(sys.argv[2]))
for node in cluster.inventory.nodes:
    print(f"node {node.rank}: {node.hostname} {node.ip} "
          f"{len(node.accelerators)}x {node.accelerator_type or 'no accelerators'}")
PY
WAITER=$!
while kill -0 "${WAITER}" 2>/dev/null; do
    kill -0 "${RAY_STEP}" 2>/dev/null || kill "${WAITER}" 2>/dev/null || true
    ray_step_alive
    sleep 1
done
wait "${WAITER}" || fail "not every node joined the Ray cluster within ${RAY_WAIT_S} s"
STATUS=0
python "${JOB}" "${CONFIG}" "$@" || STATUS=$?
stop_ray
trap - EXIT
echo "slurm_ray.sh: the job exited with status ${STATUS}; Ray stopped on ${NUM_NODES} node(s)"
exit "${STATUS}"
