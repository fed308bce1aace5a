#!/usr/bin/env bash
# Stop the local Ray cluster that ray-up.sh started from --temp-dir, and nothing else.
#
# `ray stop --force` would kill every Ray process on the machine (it matches process names), which
# breaks other Ray instances running next to this one. Instead this script stops the process
# sessions recorded in DIR/vitscale-cluster.env (each node was started with setsid), plus any
# process whose arguments name DIR/session_*, plus all their descendants: SIGTERM, a grace period,
# then SIGKILL. Running it again, or on a cluster that is already gone, is a no-op.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/_common.sh"

usage() {
    cat >&2 <<EOF
usage: $(basename "$0") [--temp-dir DIR] [--clean] [--grace S]
  --temp-dir DIR  the --temp-dir given to ray-up.sh (default /tmp/vitscale-ray-\$UID)
  --clean         also delete DIR (Ray's logs and the state file)
  --grace S       seconds between SIGTERM and SIGKILL (default 5)
EOF
    exit 2
}

TEMP_DIR="/tmp/vitscale-ray-$(id -u)"
CLEAN=0
GRACE=5
while [[ $# -gt 0 ]]; do
    case "$1" in
        --temp-dir) TEMP_DIR=${2:?}; shift 2 ;;
        --clean) CLEAN=1; shift ;;
        --grace) GRACE=${2:?}; require_int "$1" "$2"; shift 2 ;;
        -h | --help) usage ;;
        *) echo "error: unknown argument '$1'" >&2; usage ;;
    esac
done

# (A missing DIR is fine: its processes may outlive it, and are found by their arguments.)
[[ ! -d "$TEMP_DIR" ]] || TEMP_DIR=$(cd "$TEMP_DIR" && pwd -P)
STATE="$TEMP_DIR/vitscale-cluster.env"

SIDS=""
if [[ -f "$STATE" ]]; then
    # shellcheck disable=SC1090
    SIDS=$(source "$STATE" && echo "${VITSCALE_RAY_SIDS:-}")
fi
# Also catches processes of this cluster that are not (or no longer) recorded, by their session dir.
if [[ -n "$(process_targets "$SIDS" "$(cluster_pids "$TEMP_DIR")")" ]]; then
    info "stopping the Ray cluster at $TEMP_DIR ..."
    stop_processes "$GRACE" "$SIDS" "$TEMP_DIR" || die "some Ray processes of $TEMP_DIR survived SIGKILL"
    info "stopped"
else
    info "no Ray processes running for $TEMP_DIR (nothing to stop)"
fi
rm -f "$STATE"
if [[ $CLEAN -eq 1 ]]; then
    rm -rf "$TEMP_DIR"
fi
