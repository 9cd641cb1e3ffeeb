#!/bin/sh
# Tests/beside.sh SIDE MAIN: runs the shell command SIDE in a session of its own, its output
# kept in a file, while MAIN runs in the foreground; then waits for SIDE and prints its output.
# `make test` runs the model and permission checks (mostly waits on mounts, servers and fsync)
# beside the XCTest passes this way, so a run takes the longer of the two, not their sum.
#
# Exit status: MAIN's when it failed, else SIDE's. When MAIN fails, or this script is
# interrupted, SIDE's whole session is stopped by its process-group id (TERM, then KILL after
# 30 s): every server it started stops through its own trap (Tests/remote/servers.sh).
set -u
[ $# -eq 2 ] || { echo "usage: $0 SIDE-COMMAND MAIN-COMMAND" >&2; exit 2; }
log=$(mktemp /tmp/docfs-beside.XXXXXX)
setsid sh -c "$1" >"$log" 2>&1 </dev/null &
side=$!

stop_side() {
    # The group exists once setsid has run in the child; before that, the child alone. (dash's
    # kill takes a negative id after the signal, and no "--".)
    kill -TERM "-$side" 2>/dev/null || kill -TERM "$side" 2>/dev/null || return 0
    i=0
    while kill -0 "-$side" 2>/dev/null && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
    kill -KILL "-$side" 2>/dev/null || true
}
show_side() {
    echo "==== beside: $1 ($log) ===="
    cat "$log"
    echo "==== beside: end ===="
    rm -f "$log"
}
trap 'stop_side; show_side "stopped: interrupted"; exit 130' INT TERM

sh -c "$2"
main=$?
if [ $main -ne 0 ]; then
    if kill -0 "$side" 2>/dev/null; then
        stop_side
        wait "$side" 2>/dev/null
        show_side "stopped: the main pass failed ($main)"
    else
        wait "$side"
        show_side "$1 exited $? (the main pass failed: $main)"
    fi
    exit $main
fi
wait "$side"
status=$?
show_side "$1 exited $status"
exit $status
