#!/usr/bin/env bash
# The test command: formatting, lints, and every test of the workspace.
set -euo pipefail
cd "$(dirname "$0")/.."
# A clean clone builds once: incremental caches would only take disk (gigabytes) and time.
export CARGO_INCREMENTAL=${CARGO_INCREMENTAL:-0}
bash ci/setup.sh
cargo fmt --all -- --check
python3 ci/module-cycles.py   # no cycles between the modules of a crate
cargo clippy --workspace --all-targets --locked -q -- -D warnings
cargo test --workspace --locked --no-fail-fast
