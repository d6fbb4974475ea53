#!/usr/bin/env bash
# `cat INPUT > file` against `spillway truncate < INPUT` for one or more spillway builds, on
# an input file you already have (say, 512 MiB of the truncate bench's text, or a real log),
# ROUNDS times, the order rotating each round so no build always runs after another. Prints
# the median and fastest wall time and the median user and system CPU of each, from GNU time.
#
#   scripts/truncate-ab.sh INPUT ROUNDS BINARY...   e.g. scripts/truncate-ab.sh in.log 9 \
#       target/release/spillway /tmp/spillway-old
#
# The builds' spills go to a temp dir, removed after each run and at the end. On a shared
# machine, compare builds only within one run of this script.
set -euo pipefail
[ $# -ge 3 ] || { sed -n '2,9p' "$0"; exit 2; }
input=$1 rounds=$2
shift 2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
commands=(cat "$@")
declare -A wall user sys
for round in $(seq "$rounds"); do
    for k in "${!commands[@]}"; do
        b=${commands[$(((k + round) % ${#commands[@]}))]}
        if [ "$b" = cat ]; then
            t=$({ /usr/bin/time -f "%e %U %S" cat "$input" >"$work/out"; } 2>&1)
        else
            t=$({ /usr/bin/time -f "%e %U %S" "$b" truncate --data-dir "$work/data" \
                <"$input" >/dev/null; } 2>&1 | tail -1)
        fi
        rm -rf "$work/out" "$work/data/spills"
        read -r w u s <<<"$t"
        wall[$b]+="$w " user[$b]+="$u " sys[$b]+="$s "
    done
done
median() { tr ' ' '\n' <<<"$1" | grep . | sort -n | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'; }
fastest() { tr ' ' '\n' <<<"$1" | grep . | sort -n | head -1; }
for b in "${commands[@]}"; do
    printf '%-40s wall median %s s, fastest %s s; user %s s, sys %s s (medians)\n' "$b" \
        "$(median "${wall[$b]}")" "$(fastest "${wall[$b]}")" "$(median "${user[$b]}")" \
        "$(median "${sys[$b]}")"
done
