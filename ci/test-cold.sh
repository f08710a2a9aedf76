#!/usr/bin/env bash
# ci/test.sh from empty caches: a fresh build directory, no pinned .deb files, wheels or CLI
# tarballs, and empty image stores. The proof that a fresh machine fetches and builds
# everything; run it before a change to Cargo.lock, images/, lockfiles/ or ci/fetch-*.
# Everything it makes goes into one temporary directory, removed at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
cold=$(mktemp -d "${TMPDIR:-/tmp}/arena-cold.XXXXXX")
trap 'rm -rf "$cold"' EXIT
echo "== ci/test-cold.sh: every cache in $cold"
env -u ARENA_DEB_DIR -u ARENA_WHEEL_DIR -u ARENA_TARBALL_DIR -u ARENA_TEST_STORES \
  ARENA_CACHE="$cold" CARGO_TARGET_DIR="$cold/target" bash ci/test.sh
