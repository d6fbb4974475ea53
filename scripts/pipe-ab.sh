#!/usr/bin/env bash
# `cat INPUT | cat > file` against `spillway run --no-tty -- cat INPUT` for one or more spillway
# builds, ROUNDS times, the order rotating each round so no build always runs after another.
# Prints the median and fastest wall time of each (in ms, from bash's `EPOCHREALTIME`), and
# `cat INPUT | cat > /dev/null` beside them; and the median over rounds of each one's time over
# the pipe into a file's in the same round (`x file`), which the machine's drift cancels out of.
#
#   scripts/pipe-ab.sh INPUT ROUNDS BINARY...   e.g. scripts/pipe-ab.sh in.log 9 \
#       target/release/spillway /tmp/spillway-old
#
# Each build runs against a daemon of its own build, on a socket and data dir of its own in a
# temp dir (started by an untimed first run, stopped at the end). The file and the spills are
# in that temp dir (set TMPDIR to move it) and are removed after each run; each run is
# preceded by a `sync` and a pause (PAUSE seconds, 0.5 unless set), so that one run's
# writeback does not fall into the next. On a shared machine, compare builds only within one
# run of this script.
set -euo pipefail
[ $# -ge 3 ] || { sed -n '2,16p' "$0"; exit 2; }
input=$1 rounds=$2
shift 2
source "$(dirname "$0")/build-daemons.sh"
start_daemons "$@"
commands=(file null "${!builds[@]}")
declare -A wall
for round in $(seq "$rounds"); do
    for k in "${!commands[@]}"; do
        c=${commands[$(((k + round) % ${#commands[@]}))]}
        sync
        sleep "${PAUSE:-0.5}"
        begun=${EPOCHREALTIME/./}
        case $c in
            file) cat "$input" | cat >"$work/out" ;;
            null) cat "$input" | cat >/dev/null ;;
            *) client "$c" --no-tty -- cat "$input" >/dev/null ;;
        esac
        ended=${EPOCHREALTIME/./}
        wall[$c]+="$((ended - begun)) "
        rm -f "$work/out" "$work"/data*/spills/*
    done
done
source "$(dirname "$0")/medians.sh"
ms() { awk -v us="$1" 'BEGIN {printf "%.1f", us / 1000}'; }
printf '%-52s %10s %10s %10s\n' command "median ms" "fastest" "x file"
for c in "${commands[@]}"; do
    case $c in
        file) name="cat INPUT | cat > file" ;;
        null) name="cat INPUT | cat > /dev/null" ;;
        *) name="${builds[$c]} run --no-tty -- cat INPUT" ;;
    esac
    printf '%-52s %10s %10s %10s\n' "$name" "$(ms "$(median "${wall[$c]}")")" \
        "$(ms "$(fastest "${wall[$c]}")")" "$(ratio_by_round "${wall[file]}" "${wall[$c]}")"
done
