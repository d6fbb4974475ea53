#!/usr/bin/env bash
# The daemon's memory with runs in flight: starts a private daemon (its own socket and data dir
# in a temp dir), reads its idle VmRSS, starts N `spillway run` clients whose commands print
# some output and then stay alive, waits until all N are registered as running, reads VmRSS
# and VmHWM from /proc/PID/status, waits for the runs to end, and prints the figures in MiB.
# Each VmRSS is followed by its two parts: RssAnon (the heap, thread stacks: the daemon's own)
# and RssFile (the binary's pages read so far, its token tables among them: shared with every
# spillway process and given back by the kernel under pressure).
# Not a test: it asserts nothing and only prints.
#
#   scripts/daemon-memory.sh [BINARY] [RUNS]     e.g. scripts/daemon-memory.sh target/release/spillway 16
#
# Each run prints 2 MB of 100-byte lines, then sleeps 3 s (so all N are in flight at once);
# SPILLWAY_MEMORY_TTY=1 runs them under a PTY instead of `--no-tty`.
set -euo pipefail
bin=${1:-target/release/spillway}
runs=${2:-16}
work=$(mktemp -d)
daemon_pid=
cleanup() {
    if [ -n "$daemon_pid" ]; then kill "$daemon_pid" 2>/dev/null || true; wait "$daemon_pid" 2>/dev/null || true; fi
    rm -rf "$work"
}
trap cleanup EXIT
export SPILLWAY_SOCKET=$work/s.sock SPILLWAY_DATA_DIR=$work/data
"$bin" daemon --socket "$SPILLWAY_SOCKET" --data-dir "$SPILLWAY_DATA_DIR" 2>"$work/daemon.log" &
daemon_pid=$!
for _ in $(seq 500); do [ -S "$SPILLWAY_SOCKET" ] && break; sleep 0.02; done
[ -S "$SPILLWAY_SOCKET" ] || { echo "the daemon did not listen; its log:" >&2; cat "$work/daemon.log" >&2; exit 1; }
field() { awk -v f="$1:" '$1 == f { printf "%.1f", $2 / 1024 }' "/proc/$daemon_pid/status"; }
rss() { echo "VmRSS $(field VmRSS) MiB (anon $(field RssAnon), file $(field RssFile))"; }
sleep 1 # whatever the daemon does at its start (building tables in the background) settles
echo "daemon pid $daemon_pid: idle $(rss), VmHWM $(field VmHWM) MiB"
tty=(--no-tty)
[ "${SPILLWAY_MEMORY_TTY:-0}" = 1 ] && tty=()
chatty="head -c 2000000 /dev/zero | tr '\\0' x | fold -w 100; sleep 3"
clients=()
for _ in $(seq "$runs"); do
    "$bin" run "${tty[@]}" -- sh -c "$chatty" >/dev/null &
    clients+=($!)
done
for _ in $(seq 500); do
    running=$("$bin" ps 2>/dev/null | grep -c 'sleep 3' || true)
    [ "$running" -ge "$runs" ] && break
    sleep 0.02
done
sleep 0.5 # the runs' output is captured and they sit in `sleep`
echo "$running runs in flight: $(rss), VmHWM $(field VmHWM) MiB, threads $(awk '$1 == "Threads:" { print $2 }' "/proc/$daemon_pid/status")"
wait "${clients[@]}"
echo "after the runs ended: $(rss), VmHWM $(field VmHWM) MiB"
