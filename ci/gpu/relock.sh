#!/usr/bin/env bash
# On a GPU host: the cost of a lock there, and whether an unchanged re-lock and a
# verify stay O(1) per task: ci/bench/relock.sh on the cuda-host set (the host's own Python,
# gcc and PyTorch trees as the base) with the first N of real task folders.
# usage: ci/gpu/relock.sh BIN_DIR TASKS_DIR [COUNTS]
#   BIN_DIR: a release `arenactl`; TASKS_DIR: task folders directly below it (for example
#   `arenactl task materialize`'s triton2triton/vllm); COUNTS default "8 32 118".
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
bin=$(cd "$1" && pwd)
tasks=$(cd "$2" && pwd)
counts=${3:-8 32 118}
work=${ARENA_GPU_WORK:-/tmp/arena-relock}
rm -rf "$work"
t=$(date +%s.%N)
ARENA_HOST_ROOT=/ "$bin/arenactl" image build "$root/images/cuda-host.toml" --store "$work/store" >/dev/null
echo "TIME base build $(python3 -c "import sys,time; print(f'{time.time()-float(sys.argv[1]):.1f}')" "$t") s"
t=$(date +%s.%N)
ARENA_HOST_ROOT=/ "$bin/arenactl" image build "$root/images/cuda-host.toml" --store "$work/store" >/dev/null
echo "TIME base unchanged $(python3 -c "import sys,time; print(f'{time.time()-float(sys.argv[1]):.1f}')" "$t") s"
ARENACTL=$bin/arenactl ARENA_HOST_ROOT=/ ARENA_BENCH_RECIPE=$root/images/cuda-host.toml \
  ARENA_BENCH_TASKS=$tasks ARENA_BENCH_TYPE=triton2triton \
  bash "$root/ci/bench/relock.sh" "$work" "$counts"
