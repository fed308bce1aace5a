#!/usr/bin/env bash
# Stop the MLflow server that mlflow-up.sh started on --port: every process of its session (the pid
# file holds the session id), SIGTERM then SIGKILL. A no-op when it is not running.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/_common.sh"

usage() {
    cat >&2 <<EOF
usage: $(basename "$0") [--port P] [--state-dir DIR] [--grace S]
  --port P         the port given to mlflow-up.sh (default 5000)
  --state-dir DIR  the --state-dir given to mlflow-up.sh (default /tmp/vitscale-mlflow-\$UID)
  --grace S        seconds between SIGTERM and SIGKILL (default 5)
EOF
    exit 2
}

PORT=5000
STATE_DIR="/tmp/vitscale-mlflow-$(id -u)"
GRACE=5
while [[ $# -gt 0 ]]; do
    case "$1" in
        --port) PORT=${2:?}; require_int "$1" "$2"; shift 2 ;;
        --state-dir) STATE_DIR=${2:?}; shift 2 ;;
        --grace) GRACE=${2:?}; require_int "$1" "$2"; shift 2 ;;
        -h | --help) usage ;;
        *) echo "error: unknown argument '$1'" >&2; usage ;;
    esac
done

PID_FILE="$STATE_DIR/mlflow-$PORT.pid"
if [[ ! -f "$PID_FILE" ]]; then
    info "no MLflow server started by mlflow-up.sh on port $PORT (no $PID_FILE); nothing to stop"
    exit 0
fi
SID=$(cat "$PID_FILE")
[[ "$SID" =~ ^[0-9]+$ ]] || die "$PID_FILE does not hold a pid; remove it by hand"
if [[ -n "$(session_pids "$SID")" ]]; then
    stop_processes "$GRACE" "$SID" || die "some MLflow processes of port $PORT survived SIGKILL"
    info "MLflow server on port $PORT stopped"
else
    info "MLflow server on port $PORT was not running"
fi
rm -f "$PID_FILE"
