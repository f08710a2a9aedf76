#!/usr/bin/env bash
# The main job on the bundled sample tasks, with embedded defaults: set up, build, validate and
# digest every task, build the CPU image set from pinned Debian packages and check it against
# lockfiles/cpu.lock, then score the bundled example result set.
set -euo pipefail
cd "$(dirname "$0")/.."
bash ci/setup.sh
cargo build --release --locked -q -p arenactl
arenactl=target/release/arenactl
echo "== validate"; $arenactl task validate tasks
echo "== digest";   $arenactl task digest tasks
echo "== images (store: \${ARENA_STORE:-~/.cache/arena/store})"
export ARENA_DEB_DIR=${ARENA_DEB_DIR:-$HOME/.cache/arena/debs}
bash ci/fetch-debs.sh images/testbase.toml "$ARENA_DEB_DIR"
$arenactl image verify --image-lock lockfiles/cpu.lock
echo "== score (ci/examples/results.json: a hand-assembled example, not a measurement)"
$arenactl score ci/examples/results.json
