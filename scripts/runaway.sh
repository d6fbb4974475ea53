#!/usr/bin/env bash
# Runaway output: `yes` left running under a PTY through a fresh daemon, for SECS seconds
# (default 60), with the daemon's default spill cap (1 GiB) or CAP. Prints the daemon's RSS
# every 5 s, then the spill's size, the data dir's size and the run's `spill_capped`.
#
#   scripts/runaway.sh [SECS] [CAP] [RUN FLAGS...]   e.g. scripts/runaway.sh 60 1GiB --no-tty
#
# Builds the release binary first; everything lives in a temp dir removed at the end.
set -euo pipefail
secs=${1:-60}
cap=${2:-1GiB}
shift $(($# < 2 ? $# : 2))
cd "$(dirname "$0")/.."
cargo build --release --quiet
bin=$PWD/target/release/spillway
work=$(mktemp -d)
trap 'kill "$daemon" 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$work"' EXIT
export SPILLWAY_SOCKET=$work/spillway.sock SPILLWAY_DATA_DIR=$work/data
"$bin" daemon --max-spill "$cap" 2>"$work/daemon.log" &
daemon=$!
for _ in $(seq 50); do [ -S "$SPILLWAY_SOCKET" ] && break; sleep 0.1; done
rss() { awk '/^VmRSS/ {print $2 " kB"}' "/proc/$daemon/status"; }
echo "daemon pid $daemon, RSS at start: $(rss)"
"$bin" run --json --timeout "${secs}s" "$@" -- yes >"$work/exit.json" &
run=$!
start=$SECONDS
while kill -0 "$run" 2>/dev/null; do
    sleep 5
    echo "t=$((SECONDS - start))s daemon RSS $(rss), data dir $(du -sh "$work/data" | cut -f1)"
done
wait "$run" || true
python3 - "$work/exit.json" <<'PY'
import json, os, sys
e = json.load(open(sys.argv[1]))
size = os.path.getsize(e["spill_path"])
print(f"status {e['status']}, {e['total_bytes']} bytes / {e['total_lines']} lines of output, "
      f"spill file {size} bytes, spill_capped {e.get('spill_capped')}")
PY
echo "daemon peak RSS: $(awk '/^VmHWM/ {print $2 " kB"}' "/proc/$daemon/status")"
