# Shared helpers for the infra/local scripts. Sourced, not executed.
# shellcheck shell=bash

REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)

die() {
    echo "error: $*" >&2
    exit 2
}

info() {
    echo "$*" >&2
}

# find_bin NAME: the active venv's NAME, else the repo's .venv/bin/NAME, else NAME on PATH.
find_bin() {
    local name=$1 candidate
    for candidate in "${VIRTUAL_ENV:+$VIRTUAL_ENV/bin/$name}" "$REPO_ROOT/.venv/bin/$name"; do
        if [[ -n "$candidate" && -x "$candidate" ]]; then
            echo "$candidate"
            return 0
        fi
    done
    if command -v "$name" >/dev/null 2>&1; then
        command -v "$name"
        return 0
    fi
    die "'$name' not found in \$VIRTUAL_ENV, $REPO_ROOT/.venv/bin or PATH; run 'make setup' first"
}

# free_port: an unused TCP port on 127.0.0.1 (the kernel's choice).
free_port() {
    "$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# port_is_free PORT: true when a server could listen on PORT (on 127.0.0.1) now. The test binds with
# SO_REUSEADDR, as the servers themselves do (uvicorn/gunicorn for MLflow, aiohttp and gRPC for Ray):
# connections a stopped server left in TIME_WAIT (up to 60 s on Linux) then do not count, while a
# listening socket (on 127.0.0.1 or on all interfaces) still does.
port_is_free() {
    "$PY" -c 'import socket, sys
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
try:
    s.bind(("127.0.0.1", int(sys.argv[1])))
    s.listen(1)
except OSError:
    sys.exit(1)' "$1"
}

require_int() {  # require_int FLAG VALUE
    [[ "$2" =~ ^[0-9]+$ ]] || die "$1 expects a non-negative integer, got '$2'"
}

# process_targets "SIDS" ["PIDS"]: "PID SID" of every live process in the sessions SIDS or listed in
# PIDS, plus all descendants of those (a child that called setsid() itself, like a Ray job's
# entrypoint, leaves the session but not the tree). Never lists this shell or its ancestors, and
# never takes this shell's own session as a whole (only PIDS listed from it), so a caller cannot
# kill itself. Zombies are skipped (already dead; their parent or init reaps them).
process_targets() {
    local own_sid
    own_sid=$(ps -o sid= -p $$ | tr -d ' ')
    ps -eo pid=,ppid=,sid=,stat= | awk -v sids="$1" -v pids="${2:-}" -v own_sid="$own_sid" -v self="$$" '
        BEGIN {
            n = split(sids, a, " "); for (i = 1; i <= n; i++) if (a[i] != own_sid && a[i] > 1) S[a[i]] = 1
            n = split(pids, a, " "); for (i = 1; i <= n; i++) P[a[i]] = 1
        }
        $4 ~ /^Z/ { next }
        { k++; pid[k] = $1; parent[$1] = $2; sid[$1] = $3; if (($3 in S) || ($1 in P)) mark[$1] = 1 }
        END {
            changed = 1
            while (changed) {
                changed = 0
                for (i = 1; i <= k; i++) {
                    p = pid[i]
                    if (!(p in mark) && (parent[p] in mark)) { mark[p] = 1; changed = 1 }
                }
            }
            p = self
            while (p > 1 && (p in parent)) { delete mark[p]; p = parent[p] }
            for (p in mark) print p, sid[p]
        }'
}

# session_pids SID... : the PIDs of process_targets for these sessions.
session_pids() {
    process_targets "$*" | awk '{ print $1 }'
}

# _collect_targets: refresh $_pids from the sessions in $_sids and the processes of the Ray cluster
# at $_dir (if set), adding the sessions of all targets to $_sids: once a parent dies its children
# are re-parented, and only their session ties them to us.
_collect_targets() {
    local targets s extra=""
    [[ -z "$_dir" ]] || extra=$(cluster_pids "$_dir")
    targets=$(process_targets "$_sids" "$extra")
    for s in $(awk '{ print $2 }' <<<"$targets" | sort -u); do
        [[ "$_sids" == *" $s "* ]] || _sids="$_sids$s "
    done
    _pids=$(awk '{ print $1 }' <<<"$targets")
}

# stop_processes GRACE_SECONDS "SIDS" [RAY_TEMP_DIR]: SIGTERM every target (see _collect_targets)
# until all are gone or GRACE_SECONDS pass, then SIGKILL for up to 10 s more.
stop_processes() {
    local grace=$1 deadline
    _sids=" $2 "
    _dir=${3:-}
    deadline=$((SECONDS + grace))
    while :; do
        _collect_targets
        [[ -n "$_pids" ]] || return 0
        [[ $SECONDS -lt $deadline ]] || break
        # shellcheck disable=SC2086
        kill -TERM $_pids 2>/dev/null || true
        sleep 0.5
    done
    deadline=$((SECONDS + 10))
    while :; do
        _collect_targets
        [[ -n "$_pids" ]] || return 0
        [[ $SECONDS -lt $deadline ]] || break
        # shellcheck disable=SC2086
        kill -KILL $_pids 2>/dev/null || true
        sleep 0.5
    done
    info "warning: processes still alive after SIGKILL: $(echo "$_pids" | tr '\n' ' ')"
    return 1
}

# cluster_pids DIR / cluster_sids DIR: the processes (session ids) of the Ray cluster whose temp dir
# is DIR (worker nodes use DIR/wN). Ray passes its session dir as `--flag=DIR/session_...` or
# `--flag=DIR/wN/session_...` (gcs_server, raylet, dashboard, monitors), which is what is matched
# (a `=DIR/` prefix), so e.g. a `tail DIR/session_latest/...` does not count.
# The pattern goes through the environment: in awk's own arguments it would match awk itself.
cluster_pids() {
    ps -eo pid=,args= | VITSCALE_PAT="=$1/" awk 'index($0, ENVIRON["VITSCALE_PAT"]) { print $1 }'
}
cluster_sids() {
    ps -eo sid=,args= | VITSCALE_PAT="=$1/" awk 'index($0, ENVIRON["VITSCALE_PAT"]) { print $1 }' | sort -u
}
