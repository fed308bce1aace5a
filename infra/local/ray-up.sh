#!/usr/bin/env bash
# Start a local multi-node Ray cluster on 127.0.0.1: one head node plus N worker nodes, each its own
# raylet (distinct node id) on this machine. Waits until every node is ALIVE and the job server
# answers, then prints KEY=VALUE lines on stdout (human messages go to stderr):
#   RAY_ADDRESS=127.0.0.1:PORT              GCS address: ray.init(address=...), --address
#   RAY_DASHBOARD_URL=http://127.0.0.1:D    dashboard / job server: vitscale study submit --address
#   RAY_TEMP_DIR=DIR                        pass to ray-down.sh --temp-dir
#   RAY_NODES=N+1
#   RAY_AUTH_MODE=disabled|token
#   RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0     what a plain Ray client needs to reach a loopback cluster
#
# Loopback by default: every server of the cluster (GCS, raylets, agents, workers, dashboard, job
# server) listens on 127.0.0.1 only, so nothing on the network reaches it. Ray on Linux would swap a
# loopback node address for the host's routable IP and listen on all interfaces; its single-machine
# switch RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0, set for every node, keeps 127.0.0.1 (_ray_start.py lets
# worker nodes start under it). A Ray client outside vitscale needs the same variable, or Ray
# rewrites 127.0.0.1 in its --address too and finds nothing there; vitscale sets it itself.
# To open the cluster deliberately (clients on other machines): --open, which takes this host's
# routable IP for every node, listens on all interfaces and requires token authentication.
#
# Every node is started with `setsid`, so all of its processes (and the workers its raylet spawns)
# share one session id. The session ids go into DIR/vitscale-cluster.env; ray-down.sh stops exactly
# those sessions and never touches other Ray instances on the machine (unlike `ray stop`).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/_common.sh"

usage() {
    cat >&2 <<EOF
usage: $(basename "$0") [--workers N] [--cpus-per-node C] [--gpus-per-node G] [--port P] [--dashboard-port D]
                 [--temp-dir DIR] [--object-store-mb MB] [--auth MODE] [--open] [--timeout S]
  --workers N          worker nodes besides the head (default 1)
  --cpus-per-node C    logical CPUs each node advertises (default 1)
  --gpus-per-node G    logical GPUs each node advertises (default: Ray's detection); e.g. 2 on a
                       CPU-only machine tests fractional-GPU placement (torch then sees no CUDA)
  --port P             GCS port of the head (default 6379)
  --dashboard-port D   dashboard and job server port (default 8265)
  --temp-dir DIR       Ray's temp dir; keep it short, socket paths are limited to 107 chars
                       (default /tmp/vitscale-ray-\$UID)
  --object-store-mb MB object store size per node (default: Ray's choice)
  --auth MODE          Ray token authentication: disabled or token (default: disabled, token with
                       --open). With token, the key is Ray's token file (~/.ray/auth_token, created
                       if missing) and clients (ray.init, the job API, vitscale) need
                       RAY_AUTH_MODE=token in their env
  --open               reachable from other machines, deliberately: nodes register with this host's
                       routable IP and every server listens on all interfaces; token authentication
                       is required (--auth disabled is refused). Default: 127.0.0.1 only
  --timeout S          seconds to wait for the nodes and the job server (default 180)
EOF
    exit 2
}

WORKERS=1
CPUS=1
GPUS=""
PORT=6379
DASH_PORT=8265
TEMP_DIR="/tmp/vitscale-ray-$(id -u)"
OBJ_MB=""
AUTH=""
OPEN=0
TIMEOUT=180
while [[ $# -gt 0 ]]; do
    case "$1" in
        --workers) WORKERS=${2:?}; require_int "$1" "$2"; shift 2 ;;
        --cpus-per-node) CPUS=${2:?}; require_int "$1" "$2"; shift 2 ;;
        --gpus-per-node) GPUS=${2:?}; require_int "$1" "$2"; shift 2 ;;
        --port) PORT=${2:?}; require_int "$1" "$2"; shift 2 ;;
        --dashboard-port) DASH_PORT=${2:?}; require_int "$1" "$2"; shift 2 ;;
        --temp-dir) TEMP_DIR=${2:?}; shift 2 ;;
        --object-store-mb) OBJ_MB=${2:?}; require_int "$1" "$2"; shift 2 ;;
        --auth) AUTH=${2:?}; shift 2 ;;
        --open) OPEN=1; shift ;;
        --timeout) TIMEOUT=${2:?}; require_int "$1" "$2"; shift 2 ;;
        -h | --help) usage ;;
        *) echo "error: unknown argument '$1'" >&2; usage ;;
    esac
done

PY=$(find_bin python)
RAY=$(find_bin ray)
# Jobs submitted to this cluster (`vitscale study submit`) run their entrypoint with the
# raylet's PATH: put this venv first so `vitscale` and `python` are the ones Ray runs from.
export PATH="$(dirname "$RAY"):$PATH"
command -v setsid >/dev/null || die "'setsid' (util-linux) is required to start Ray in its own session"
[[ -n "$AUTH" ]] || { [[ $OPEN -eq 1 ]] && AUTH=token || AUTH=disabled; }
[[ $AUTH == disabled || $AUTH == token ]] || die "--auth expects 'disabled' or 'token', got '$AUTH'"
[[ $OPEN -eq 0 || $AUTH == token ]] || die "--open with --auth disabled: anyone who reaches an open cluster runs code on it; drop --auth disabled (--open uses token authentication)"

# Where the servers listen (see the header): 127.0.0.1, or with --open the host's routable IP (the
# address Ray itself picks: the source address of a route to the internet; no packet is sent).
if [[ $OPEN -eq 1 ]]; then
    export RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=1
    NODE_IP=$("$PY" -c 'import socket
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.connect(("8.8.8.8", 80))
print(s.getsockname()[0])') || die "--open: this host has no routable IPv4 address"
    DASH_HOST=0.0.0.0
else
    export RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0
    NODE_IP=127.0.0.1
    DASH_HOST=127.0.0.1
fi

# Ray 2.x turns token authentication on by itself when ~/.ray/auth_token exists (e.g. after any
# in-process ray.init() on this machine), per process: nodes started at different moments could
# disagree. The mode is therefore explicit, and inherited by every process of the cluster.
export RAY_AUTH_MODE=$AUTH
AUTH_TOKEN=""
if [[ $AUTH == token ]]; then
    AUTH_TOKEN=$("$RAY" get-auth-token --generate 2>/dev/null | tail -n 1) || true
    [[ -n "$AUTH_TOKEN" ]] || die "--auth token: 'ray get-auth-token --generate' gave no token"
fi

mkdir -p "$TEMP_DIR"
TEMP_DIR=$(cd "$TEMP_DIR" && pwd -P)
[[ ${#TEMP_DIR} -le 40 ]] || die "--temp-dir '$TEMP_DIR' is too long (${#TEMP_DIR} chars, max 40): Ray's socket paths under it must stay below 107 chars"
STATE="$TEMP_DIR/vitscale-cluster.env"
UP_LOG="$TEMP_DIR/ray-up.log"

old_sids=""
if [[ -f "$STATE" ]]; then
    # shellcheck disable=SC1090
    old_sids=$(source "$STATE" && echo "${VITSCALE_RAY_SIDS:-}")
fi
if [[ -n "$(process_targets "$old_sids" "$(cluster_pids "$TEMP_DIR")")" ]]; then
    die "a cluster started from $TEMP_DIR is still running; stop it with: $(dirname "$0")/ray-down.sh --temp-dir $TEMP_DIR"
fi
rm -f "$STATE"
port_is_free "$PORT" || die "--port $PORT is in use on 127.0.0.1; pick another (or stop what holds it)"
port_is_free "$DASH_PORT" || die "--dashboard-port $DASH_PORT is in use on 127.0.0.1; pick another"

GCS_ADDRESS="$NODE_IP:$PORT"
DASHBOARD_URL="http://$NODE_IP:$DASH_PORT"
SIDS=""
: >"$UP_LOG"

write_state() {
    cat >"$STATE" <<EOF
VITSCALE_RAY_TEMP_DIR="$TEMP_DIR"
VITSCALE_RAY_GCS_ADDRESS="$GCS_ADDRESS"
VITSCALE_RAY_DASHBOARD_URL="$DASHBOARD_URL"
VITSCALE_RAY_NODES=$((WORKERS + 1))
VITSCALE_RAY_AUTH_MODE=$AUTH
VITSCALE_RAY_OPEN=$OPEN
VITSCALE_RAY_SIDS="$SIDS"
EOF
}

# On any failure: stop what this run started, show the end of the log, exit non-zero.
STARTED_OK=0
on_exit() {
    local rc=$?
    if [[ $STARTED_OK -ne 1 ]]; then
        stop_processes 5 "$SIDS" "$TEMP_DIR" || true
        rm -f "$STATE"
        if [[ -s "$UP_LOG" ]]; then
            echo "---- last lines of $UP_LOG ----" >&2
            tail -n 20 "$UP_LOG" >&2
        fi
        [[ $rc -ne 0 ]] || rc=1
        exit "$rc"
    fi
}
trap on_exit EXIT

# start_node NAME ARGS...: `ray start ARGS` in a new session (bounded by --timeout); records the
# session ids of every process whose arguments name this cluster's session dir.
start_node() {
    local name=$1 pid sid
    shift
    info "starting Ray $name ..."
    echo "==== ray start ($name)" >>"$UP_LOG"
    # `setsid -w` makes `timeout` (and so `ray start` and all it spawns) the leader of a new
    # session, forking first only if needed, and returns the exit status.
    setsid -w timeout "$TIMEOUT" "$PY" "$(dirname "${BASH_SOURCE[0]}")/_ray_start.py" start "$@" \
        --temp-dir "$NODE_TEMP_DIR" --node-ip-address "$NODE_IP" \
        --num-cpus "$CPUS" ${GPUS:+--num-gpus "$GPUS"} --disable-usage-stats ${OBJ_MB:+--object-store-memory $((OBJ_MB * 1024 * 1024))} \
        </dev/null >>"$UP_LOG" 2>&1 &
    pid=$!
    SIDS="$SIDS $pid"
    write_state
    wait "$pid" || die "'ray start' for the $name failed or took over ${TIMEOUT}s (log: $UP_LOG)"
    for sid in $(cluster_sids "$TEMP_DIR"); do
        [[ " $SIDS " == *" $sid "* ]] || SIDS="$SIDS $sid"
    done
    write_state
}

# Node IPs: NODE_IP for every node (see the header); the Ray client server follows it.
RAY_CLIENT_PORT=$(free_port)
NODE_TEMP_DIR=$TEMP_DIR
start_node head --head --port "$PORT" --dashboard-host "$DASH_HOST" --dashboard-port "$DASH_PORT" \
    --include-dashboard true --ray-client-server-port "$RAY_CLIENT_PORT" --dashboard-agent-listen-port 0
for ((i = 1; i <= WORKERS; i++)); do
    # Ports of a worker node (node manager, object manager, agents, metrics) are left to Ray (0 =
    # any free port), so several raylets coexist on this host; only the agent's HTTP port has a
    # fixed default (52365) in `ray start`, hence 0 here.
    # Each worker node gets its own temp dir, as separate machines would: nodes sharing one would
    # also share runtime_resources/, and a worker node unpacking a job's working_dir there replaces
    # the folder the job's driver (on the head) runs in.
    NODE_TEMP_DIR=$TEMP_DIR/w$i
    start_node "worker $i" --address "$GCS_ADDRESS" --dashboard-agent-listen-port 0
done

info "waiting for $((WORKERS + 1)) alive nodes and the job server at $DASHBOARD_URL ..."
VITSCALE_TOKEN=$AUTH_TOKEN "$PY" - "$DASHBOARD_URL" "$((WORKERS + 1))" "$TIMEOUT" <<'EOF' || die "the cluster did not become ready within ${TIMEOUT}s (logs: $TEMP_DIR/session_latest/logs)"
import json, os, sys, time, urllib.request

url, want, timeout = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
token = os.environ.get("VITSCALE_TOKEN")
headers = {"Authorization": f"Bearer {token}"} if token else {}
deadline = time.monotonic() + timeout
alive = -1
while time.monotonic() < deadline:
    try:
        with urllib.request.urlopen(urllib.request.Request(f"{url}/api/v0/nodes?limit=1000", headers=headers), timeout=10) as r:
            nodes = json.load(r)["data"]["result"]["result"]
        alive = sum(1 for n in nodes if n.get("state") == "ALIVE")
        if alive >= want:
            with urllib.request.urlopen(urllib.request.Request(f"{url}/api/jobs/", headers=headers), timeout=10) as r:
                json.load(r)
            sys.exit(0)
    except Exception:
        pass
    time.sleep(1)
print(f"alive nodes: {max(alive, 0)} of {want}", file=sys.stderr)
sys.exit(1)
EOF

STARTED_OK=1
[[ $AUTH != token ]] || info "token authentication is on: clients need RAY_AUTH_MODE=token"
[[ $OPEN -eq 0 ]] || info "open cluster: Ray listens on all interfaces of this host ($NODE_IP), token authentication on"
info "Ray cluster ready: $((WORKERS + 1)) nodes; stop it with: $(dirname "$0")/ray-down.sh --temp-dir $TEMP_DIR"
echo "RAY_ADDRESS=$GCS_ADDRESS"
echo "RAY_DASHBOARD_URL=$DASHBOARD_URL"
echo "RAY_TEMP_DIR=$TEMP_DIR"
echo "RAY_NODES=$((WORKERS + 1))"
echo "RAY_AUTH_MODE=$AUTH"
echo "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=$RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"
