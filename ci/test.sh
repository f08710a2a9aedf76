#!/usr/bin/env bash
# The test command, run on every push (.ci/run): formatting, lints, module cycles, and every
# unit and integration test of what arena does (gates, refusals, containment, resume, crash
# points, egress, offline kit, Slurm, browser). No test here asserts a tight speed ratio or
# wall-clock margin: those are ci/test-timing.sh's, and a fresh machine's full build is
# ci/test-cold.sh's (README, "Developing arena").
set -euo pipefail
cd "$(dirname "$0")/.."
# Caches kept between runs, as a fresh clone finds them on a machine that ran this before:
# the build (dependencies built once; this clone's own crates again), pinned .deb files,
# wheels and CLI tarballs (each fetched once), and image stores keyed by what they are built
# from (crates/arenactl/tests/suite/common/mod.rs, cached_store). Each can be pointed elsewhere.
cache=${ARENA_CACHE:-$HOME/.cache/arena}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$cache/target}
export ARENA_DEB_DIR=${ARENA_DEB_DIR:-$cache/debs}
export ARENA_WHEEL_DIR=${ARENA_WHEEL_DIR:-$cache/wheels}
export ARENA_TARBALL_DIR=${ARENA_TARBALL_DIR:-$cache/tarballs}
export ARENA_TEST_STORES=${ARENA_TEST_STORES:-$cache/stores}
# One build, kept whole: incremental caches would only take disk and time; line tables are
# enough for a test's backtrace and link in a fraction of full debug info's time.
export CARGO_INCREMENTAL=${CARGO_INCREMENTAL:-0}
export CARGO_PROFILE_DEV_DEBUG=${CARGO_PROFILE_DEV_DEBUG:-line-tables-only}
# Each step's start, with the seconds since this script's: where the time goes, in the log.
step() { echo "== ci/test.sh: $1 (at ${SECONDS} s)"; }
step setup
bash ci/setup-tests.sh
step format
cargo fmt --all -- --check
python3 ci/module-cycles.py   # no cycles between the modules of a crate
python3 ci/check-docs.py      # no dead paths in the docs, no words of the project's own history
step clippy
cargo clippy --workspace --all-targets --locked -q -- -D warnings
step tests
# nextest runs every test in a process of its own, side by side (ci/nextest.toml); `cargo
# test` where it is not installed. The one doc test (arena-client's example) is not nextest's.
if cargo nextest --version >/dev/null 2>&1; then
  cargo nextest run --workspace --locked --config-file ci/nextest.toml
else
  cargo test --workspace --locked --no-fail-fast
fi
cargo test --locked --doc -p arena-client
step "done"
