#!/usr/bin/env bash
# The test command: formatting, lints, and every test of the workspace.
set -euo pipefail
cd "$(dirname "$0")/.."
# A clean clone builds once: incremental caches would only take disk (gigabytes) and time.
export CARGO_INCREMENTAL=${CARGO_INCREMENTAL:-0}
# Pinned .deb files in the user's cache (arenactl's default too): a clean clone's tests would
# otherwise fetch them again into target/ (168 MB) on every run.
export ARENA_DEB_DIR=${ARENA_DEB_DIR:-$HOME/.cache/arena/debs}
# Each step's start, with the seconds since this script's: where CI's time goes, in its log.
step() { echo "== ci/test.sh: $1 (at ${SECONDS} s)"; }
step setup
bash ci/setup.sh
step format
cargo fmt --all -- --check
python3 ci/module-cycles.py   # no cycles between the modules of a crate
step clippy
cargo clippy --workspace --all-targets --locked -q -- -D warnings
step tests
# nextest runs the binaries' tests side by side (ci/nextest.toml says which run alone, and
# why); `cargo test` where it is not installed. Doc tests are not nextest's: run apart.
if cargo nextest --version >/dev/null 2>&1; then
  cargo nextest run --workspace --locked --config-file ci/nextest.toml
  cargo test --workspace --locked --doc
else
  cargo test --workspace --locked --no-fail-fast
fi
step "done"
