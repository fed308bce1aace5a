#!/usr/bin/env bash
# Start an MLflow tracking server on 127.0.0.1 in the background (own process session, pid file,
# log file), wait until /health answers, print MLFLOW_TRACKING_URI=http://127.0.0.1:PORT on stdout.
# Stop it with mlflow-down.sh --port PORT.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/_common.sh"

usage() {
    cat >&2 <<EOF
usage: $(basename "$0") [--port P] [--backend-store-uri URI] [--artifacts DIR] [--workers N]
                 [--state-dir DIR] [--timeout S]
  --port P                port on 127.0.0.1 (default 5000)
  --backend-store-uri URI run/experiment store (default sqlite:///\$PWD/mlflow.db)
  --artifacts DIR         where the server stores artifacts it serves (default \$PWD/mlartifacts)
  --workers N             server worker processes (default 1)
  --state-dir DIR         where the pid and log files go (default /tmp/vitscale-mlflow-\$UID)
  --timeout S             seconds to wait for /health (default 120)
EOF
    exit 2
}

PORT=5000
BACKEND="sqlite:///$PWD/mlflow.db"
ARTIFACTS="$PWD/mlartifacts"
WORKERS=1
STATE_DIR="/tmp/vitscale-mlflow-$(id -u)"
TIMEOUT=120
while [[ $# -gt 0 ]]; do
    case "$1" in
        --port) PORT=${2:?}; require_int "$1" "$2"; shift 2 ;;
        --backend-store-uri) BACKEND=${2:?}; shift 2 ;;
        --artifacts) ARTIFACTS=${2:?}; shift 2 ;;
        --workers) WORKERS=${2:?}; require_int "$1" "$2"; shift 2 ;;
        --state-dir) STATE_DIR=${2:?}; shift 2 ;;
        --timeout) TIMEOUT=${2:?}; require_int "$1" "$2"; shift 2 ;;
        -h | --help) usage ;;
        *) echo "error: unknown argument '$1'" >&2; usage ;;
    esac
done

PY=$(find_bin python)
MLFLOW=$(find_bin mlflow)
URI="http://127.0.0.1:$PORT"
mkdir -p "$STATE_DIR"
PID_FILE="$STATE_DIR/mlflow-$PORT.pid"
LOG_FILE="$STATE_DIR/mlflow-$PORT.log"

if [[ -f "$PID_FILE" ]]; then
    old=$(cat "$PID_FILE")
    if [[ -n "$(session_pids "$old")" ]]; then
        info "MLflow server already running at $URI (pid file $PID_FILE); stop it with mlflow-down.sh --port $PORT"
        echo "MLFLOW_TRACKING_URI=$URI"
        exit 0
    fi
    rm -f "$PID_FILE"
fi
port_is_free "$PORT" || die "--port $PORT is in use on 127.0.0.1; pick another (or stop what holds it)"
if [[ "$BACKEND" == sqlite:///* ]]; then
    db_dir=$(dirname "${BACKEND#sqlite:///}")
    [[ -d "$db_dir" ]] || die "--backend-store-uri: directory $db_dir does not exist"
fi
mkdir -p "$ARTIFACTS"
ARTIFACTS=$(cd "$ARTIFACTS" && pwd -P)

# MLflow 3's job runner (GenAI scorer/optimisation jobs: a runner plus ~7 huey consumer processes)
# is not used by vitscale and costs a lot of CPU and startup time; off unless the caller set it.
export MLFLOW_SERVER_ENABLE_JOB_EXECUTION="${MLFLOW_SERVER_ENABLE_JOB_EXECUTION:-false}"

# Start in a new session (start_new_session) so mlflow-down.sh can stop the server and every
# worker it forks, and nothing else; the printed pid is the session id.
: >"$LOG_FILE"
SID=$("$PY" - "$LOG_FILE" "$MLFLOW" server --host 127.0.0.1 --port "$PORT" \
    --backend-store-uri "$BACKEND" --artifacts-destination "$ARTIFACTS" --serve-artifacts \
    --workers "$WORKERS" <<'EOF'
import subprocess, sys
log = open(sys.argv[1], "ab")
p = subprocess.Popen(sys.argv[2:], stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                     start_new_session=True)
print(p.pid)
EOF
)
echo "$SID" >"$PID_FILE"

fail() {
    stop_processes 5 "$SID" || true
    rm -f "$PID_FILE"
    echo "---- last lines of $LOG_FILE ----" >&2
    tail -n 20 "$LOG_FILE" >&2
    die "$1"
}

healthy() {
    "$PY" -c 'import sys, urllib.request
try:
    sys.exit(0 if urllib.request.urlopen(sys.argv[1], timeout=5).read().startswith(b"OK") else 1)
except Exception:
    sys.exit(1)' "$URI/health"
}

deadline=$((SECONDS + TIMEOUT))
until healthy; do
    [[ -n "$(session_pids "$SID")" ]] || fail "the MLflow server exited during startup (log: $LOG_FILE)"
    [[ $SECONDS -lt $deadline ]] || fail "the MLflow server did not answer $URI/health within ${TIMEOUT}s (log: $LOG_FILE)"
    sleep 0.5
done
info "MLflow server ready at $URI (store $BACKEND, artifacts $ARTIFACTS); stop it with: $(dirname "$0")/mlflow-down.sh --port $PORT"
echo "MLFLOW_TRACKING_URI=$URI"
