#!/usr/bin/env bash
# The instructions the daemon executes for one short run (`spillway run -- true`), counted by
# valgrind's callgrind, which gives nearly the same count run after run (within about 2 %) on
# a noisy machine where wall times of a few milliseconds do not. For each build: a daemon under callgrind (its own socket
# and data dir in a temp dir) serves FEW runs, another serves MANY; the difference of their
# totals, divided by MANY - FEW, is what one more run costs (start-up, shutdown and the first
# run's one-time work cancel out). Counts the daemon's threads, not the client nor the command.
# Not a test: it asserts nothing and only prints.
#
#   scripts/daemon-instructions.sh BINARY...     e.g. scripts/daemon-instructions.sh \
#       target/release/spillway /tmp/spillway-old
#
# FEW and MANY default to 10 and 40. Each daemon takes a few seconds to start under callgrind.
# valgrind has no `clone3`, so under it the daemon starts commands the fork way it falls back
# to (`std::process::Command`, about 0.09 M instructions more a run than `clone3`).
set -euo pipefail
[ $# -ge 1 ] || { sed -n '2,15p' "$0"; exit 2; }
few=${FEW:-10}
many=${MANY:-40}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# Total instructions of a daemon of build $1 that served $2 runs.
instructions() {
    local bin=$1 runs=$2 dir
    dir=$(mktemp -d -p "$work")
    valgrind --tool=callgrind --callgrind-out-file="$dir/out" \
        "$bin" daemon --socket "$dir/s" --data-dir "$dir/d" >"$dir/log" 2>&1 &
    local valgrind_pid=$!
    for _ in $(seq 300); do
        [ -S "$dir/s" ] && break
        sleep 0.1
    done
    for _ in $(seq "$runs"); do
        "$bin" run --socket "$dir/s" --data-dir "$dir/d" -- true >/dev/null
    done
    "$bin" daemon stop --socket "$dir/s" --data-dir "$dir/d" >/dev/null 2>&1
    wait "$valgrind_pid" || true
    awk '/^summary:/ {print $2}' "$dir/out"
}

printf '%-44s %16s\n' build "instructions/run"
for bin in "$@"; do
    a=$(instructions "$bin" "$few")
    b=$(instructions "$bin" "$many")
    printf '%-44s %16d\n' "$bin" $(((b - a) / (many - few)))
done
