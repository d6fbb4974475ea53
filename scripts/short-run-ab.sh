#!/usr/bin/env bash
# `sh -c true` against `spillway run -- true` for one or more spillway builds, ROUNDS times,
# the order rotating each round so no build always runs after another. Prints the median and
# fastest wall time of each (in ms, from bash's `EPOCHREALTIME`, which counts the shell's own
# fork too, the same for every command), and each build's median minus `sh -c true`'s. With
# COMMAND set (say `seq 2000`), that command instead of `true`: `sh -c COMMAND` against
# `spillway run -c COMMAND`.
#
#   scripts/short-run-ab.sh ROUNDS BINARY...   e.g. scripts/short-run-ab.sh 400 \
#       target/release/spillway /tmp/spillway-old
#
# Each build runs against a daemon of its own build (started by its first, untimed, run, on a
# socket and data dir of its own in a temp dir, and stopped at the end), so a client and its
# daemon always match. On a shared machine, compare builds only within one run of this script.
set -euo pipefail
[ $# -ge 2 ] || { sed -n '2,13p' "$0"; exit 2; }
command=${COMMAND:-true}
if [ -n "${COMMAND:-}" ]; then how=(-c "$COMMAND"); else how=(-- true); fi
rounds=$1
shift
source "$(dirname "$0")/build-daemons.sh"
start_daemons "$@"
commands=(sh "${!builds[@]}")
declare -A wall
for round in $(seq "$rounds"); do
    for k in "${!commands[@]}"; do
        c=${commands[$(((k + round) % ${#commands[@]}))]}
        begun=${EPOCHREALTIME/./}
        if [ "$c" = sh ]; then
            sh -c "$command" >/dev/null
        else
            client "$c" "${how[@]}" >/dev/null
        fi
        ended=${EPOCHREALTIME/./}
        wall[$c]+="$((ended - begun)) "
    done
done
source "$(dirname "$0")/medians.sh"
ms() { awk -v us="$1" 'BEGIN {printf "%.2f", us / 1000}'; }
base=$(median "${wall[sh]}")
printf '%-44s %10s %10s %10s\n' command "median ms" "fastest" "added ms"
printf '%-44s %10s %10s %10s\n' "sh -c '$command'" "$(ms "$base")" "$(ms "$(fastest "${wall[sh]}")")" -
for j in "${!builds[@]}"; do
    m=$(median "${wall[$j]}")
    printf '%-44s %10s %10s %10s\n' "${builds[$j]} run ${how[*]}" "$(ms "$m")" \
        "$(ms "$(fastest "${wall[$j]}")")" "$(ms $((m - base)))"
done
