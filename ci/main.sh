#!/usr/bin/env bash
# The main job on the bundled sample tasks, with embedded defaults: set up, build, validate and
# digest every task, then score the bundled example result set.
set -euo pipefail
cd "$(dirname "$0")/.."
bash ci/setup.sh
cargo build --release --locked -q -p arenactl
arenactl=target/release/arenactl
echo "== validate"; $arenactl task validate tasks
echo "== digest";   $arenactl task digest tasks
echo "== score (ci/examples/results.json: a hand-assembled example, not a measurement)"
$arenactl score ci/examples/results.json
