#!/usr/bin/env bash
# Every test of the workspace and the tiers it runs in, as a markdown table on stdout:
# `ci/test.sh` runs every one (on every push), `ci/test-timing.sh` those of
# ci/timing-tests.filter again at their tight bars, `ci/test-cold.sh` what ci/test.sh runs, from
# empty caches. Needs cargo-nextest (ci/setup-tests.sh installs it) and builds the tests.
# usage: bash ci/test-tiers.sh > docs/test-tiers.md
set -euo pipefail
cd "$(dirname "$0")/.."
cache=${ARENA_CACHE:-$HOME/.cache/arena}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$cache/target}
export CARGO_INCREMENTAL=${CARGO_INCREMENTAL:-0}
export CARGO_PROFILE_DEV_DEBUG=${CARGO_PROFILE_DEV_DEBUG:-line-tables-only}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
list() { cargo nextest list --workspace --locked --config-file ci/nextest.toml --message-format json "$@"; }
list >"$tmp/all.json" 2>"$tmp/err" || { cat "$tmp/err" >&2; exit 1; }
list -E "$(grep -v '^#' ci/timing-tests.filter)" >"$tmp/timing.json" 2>"$tmp/err" || { cat "$tmp/err" >&2; exit 1; }
python3 - "$tmp/all.json" "$tmp/timing.json" <<'PY'
import json, sys

def tests(path):
    out = {}
    for binary, suite in json.load(open(path))["rust-suites"].items():
        for name, case in suite["testcases"].items():
            if case.get("ignored"):
                continue
            out[(binary, name)] = case["filter-match"]["status"] == "matches"
    return out

every, timing = tests(sys.argv[1]), tests(sys.argv[2])
rows = sorted(every)
print("# Tests and their tiers\n")
print("Written by `bash ci/test-tiers.sh > docs/test-tiers.md`. Every test runs in `ci/test.sh` (every")
print("push, and `ci/test-cold.sh` from empty caches); those marked *timing* run again in")
print("`ci/test-timing.sh` at their tight bars (`ci/timing-tests.filter`). The one doc test,")
print("arena-client's example, runs in `ci/test.sh` by `cargo test --doc`.\n")
print(f"{len(rows)} tests in {len({b for b, _ in rows})} binaries; {sum(timing.get(r, False) for r in rows)} in the timing tier.\n")
print("| binary | test | tiers |")
print("|---|---|---|")
for b, n in rows:
    tiers = "per push, timing" if timing.get((b, n)) else "per push"
    print(f"| `{b}` | `{n}` | {tiers} |")
PY
