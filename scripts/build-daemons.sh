# Shared by the timing scripts that run builds against daemons of their own (`source`d, not
# run). `start_daemons BINARY...` makes a temp dir (`work`), keeps the binaries (`builds`) and
# starts a daemon of each build, on a socket and data dir of its own in `work`, by an untimed
# first run; `client J ARGS...` then runs `run ARGS...` of build J against its own daemon. The
# daemons are stopped and `work` removed at exit.
start_daemons() {
    work=$(mktemp -d)
    builds=("$@")
    trap stop_daemons EXIT
    for j in "${!builds[@]}"; do
        client "$j" -- true >/dev/null
    done
}
stop_daemons() {
    for j in "${!builds[@]}"; do
        "${builds[$j]}" daemon stop --socket "$work/s$j" --data-dir "$work/data$j" \
            >/dev/null 2>&1 || true
    done
    rm -rf "$work"
}
client() {
    "${builds[$1]}" run --socket "$work/s$1" --data-dir "$work/data$1" "${@:2}"
}
