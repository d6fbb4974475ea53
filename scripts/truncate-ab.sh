#!/usr/bin/env bash
# `cat INPUT > file` against `spillway truncate < INPUT` for one or more spillway builds, on
# an input file you already have (say, 512 MiB of the truncate bench's text, or a real log),
# ROUNDS times, the order rotating each round so no build always runs after another. Prints
# the median and fastest wall time (in ms, from `date +%s%N`) and the median user and system
# CPU of each, from GNU time, and the median over rounds of each one's time over `cat`'s in
# the same round (which the machine's drift cancels out of).
#
#   scripts/truncate-ab.sh INPUT ROUNDS BINARY...   e.g. scripts/truncate-ab.sh in.log 9 \
#       target/release/spillway /tmp/spillway-old
#
# Each build has a data dir of its own (one index, which builds may keep differently), in a
# temp dir; the spills are removed after each run, the rest at the end. A truncate leaves its
# token count to a child process, which would otherwise take CPU from the next run: each run
# is followed by the end of that count (it can take half a second, building the tokenizer),
# then a pause (PAUSE seconds, 0.3 unless set). On a shared machine, compare builds only
# within one run of this script.
set -euo pipefail
[ $# -ge 3 ] || { sed -n '2,16p' "$0"; exit 2; }
input=$1 rounds=$2
shift 2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
commands=(cat "$@")
declare -A wall user sys
for round in $(seq "$rounds"); do
    for k in "${!commands[@]}"; do
        j=$(((k + round) % ${#commands[@]}))
        b=${commands[$j]}
        begun=$(date +%s%N)
        if [ "$b" = cat ]; then
            t=$({ /usr/bin/time -f "%U %S" cat "$input" >"$work/out"; } 2>&1)
        else
            t=$({ /usr/bin/time -f "%U %S" "$b" truncate --data-dir "$work/data$j" \
                <"$input" >/dev/null; } 2>&1 | tail -1)
        fi
        w=$((($(date +%s%N) - begun) / 100000))
        for _ in $(seq 200); do
            pgrep -f -- "count-tokens --data-dir $work/data$j" >/dev/null || break
            sleep 0.05
        done
        rm -rf "$work/out" "$work"/data*/spills
        sleep "${PAUSE:-0.3}"
        read -r u s <<<"$t"
        wall[$b]+="$((w / 10)).$((w % 10)) " user[$b]+="$u " sys[$b]+="$s "
    done
done
source "$(dirname "$0")/medians.sh"
for b in "${commands[@]}"; do
    printf '%-40s wall median %s ms, fastest %s ms; user %s s, sys %s s (medians); %s cat\n' \
        "$b" "$(median "${wall[$b]}")" "$(fastest "${wall[$b]}")" "$(median "${user[$b]}")" \
        "$(median "${sys[$b]}")" "$(ratio_by_round "${wall[cat]}" "${wall[$b]}")"
done
