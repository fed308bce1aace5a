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

# port_is_free PORT: true when nothing is bound to PORT (on 127.0.0.1 or on all interfaces).
port_is_free() {
    "$PY" -c 'import socket, sys
s = socket.socket()
try:
    s.bind(("127.0.0.1", int(sys.argv[1])))
except OSError:
    sys.exit(1)' "$1"
}

require_int() {  # require_int FLAG VALUE
    [[ "$2" =~ ^[0-9]+$ ]] || die "$1 expects a non-negative integer, got '$2'"
}

# session_members SID... : "PID SID" of every live process in the given sessions plus all
# descendants of those processes (a child that called setsid() itself, like a Ray job's entrypoint,
# leaves the session but not the tree). Never lists this shell, its session or its ancestors, so a
# caller cannot kill itself. Zombies are skipped (already dead; their parent or init reaps them).
session_members() {
    local own_sid
    own_sid=$(ps -o sid= -p $$ | tr -d ' ')
    ps -eo pid=,ppid=,sid=,stat= | awk -v sids="$*" -v own_sid="$own_sid" -v self="$$" '
        BEGIN { n = split(sids, a, " "); for (i = 1; i <= n; i++) if (a[i] != own_sid && a[i] > 1) S[a[i]] = 1 }
        $4 ~ /^Z/ { next }
        { k++; pid[k] = $1; parent[$1] = $2; sid[$1] = $3; if ($3 in S) mark[$1] = 1 }
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
            for (p in mark) if (sid[p] != own_sid) print p, sid[p]
        }'
}

# session_pids SID... : the PIDs of session_members.
session_pids() {
    session_members "$@" | awk '{ print $1 }'
}

# _collect_targets: refresh $_pids from the sessions in $_sids, adding the sessions of descendants
# to $_sids (once their parent dies they are re-parented, and only their session ties them to us).
_collect_targets() {
    local members s
    # shellcheck disable=SC2086
    members=$(session_members $_sids)
    for s in $(awk '{ print $2 }' <<<"$members" | sort -u); do
        [[ "$_sids" == *" $s "* ]] || _sids="$_sids$s "
    done
    _pids=$(awk '{ print $1 }' <<<"$members")
}

# stop_sessions GRACE_SECONDS SID... : SIGTERM every process of the sessions (and of sessions their
# descendants created) until they are gone or GRACE_SECONDS pass, then SIGKILL for up to 10 s more.
stop_sessions() {
    local grace=$1 deadline
    shift
    _sids=" $* "
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

# cluster_sids DIR: session ids of the Ray processes that run from DIR. Ray passes its session dir as
# `--flag=DIR/session_...` (gcs_server, raylet, dashboard, monitors), which is what is matched, so
# e.g. a `tail DIR/session_latest/...` in someone's terminal does not count.
cluster_sids() {
    # The pattern goes through the environment: in awk's own arguments it would match awk itself.
    ps -eo sid=,args= | VITSCALE_PAT="=$1/session_" awk 'index($0, ENVIRON["VITSCALE_PAT"]) { print $1 }' | sort -u
}
