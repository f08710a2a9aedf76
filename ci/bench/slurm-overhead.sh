#!/usr/bin/env bash
# Benchmark: scheduling overhead per task run of `arenactl run --backend slurm` against the
# local backend, side by side on the same tasks, lockfile, store and containerd. Both run one
# task run at a time (local --gpus cpu:1; a single-node Slurm with one gres GPU), with an agent
# that does nothing, so the difference is what Slurm adds: sbatch, scheduling, job start, the
# one-shot runner's own start-up and checks, and the head's polling. Needs root.
# usage: ci/bench/slurm-overhead.sh [RUNS]   (task runs = 2 sample tasks x RUNS)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
runs=${1:-3}
work=$(mktemp -d /tmp/arena-slurm-bench-XXXX)
cd "$root"
bash ci/setup-tests.sh
cargo build --release --locked -q -p arenactl
arenactl=$root/target/release/arenactl
export ARENA_DEB_DIR=${ARENA_DEB_DIR:-$root/target/arena-debs}
bash ci/fetch-debs.sh images/testbase.toml "$ARENA_DEB_DIR"
store=$work/store
$arenactl image verify --image-lock lockfiles/cpu.lock --store "$store" >/dev/null
sock=$(bash ci/containerd.sh start "$work/ctd")
export SLURM_CONF=$(bash ci/slurm.sh start "$work/slurm" 1)
# ARENA_SLURM_SCHED_PARAMS= (empty) runs the cluster with Slurm's default scheduler settings.
cleanup() {
  bash "$root/ci/slurm.sh" stop "$work/slurm" || true
  bash "$root/ci/containerd.sh" stop "$work/ctd" || true
  rm -rf "$work"
}
trap cleanup EXIT
cat > "$work/noop.toml" <<'TOML'
name = "noop"
description = "does nothing: the benchmark measures everything around the agent"
command = ["true"]
timeout_s = 60
TOML
common=(--image-lock lockfiles/cpu.lock --agent "$work/noop.toml"
        --containerd "$sock" --store "$store" --gpus cpu:1 --json)
# Warm-up: the images get into containerd and the page cache before anything is timed.
$arenactl run "${common[@]}" --runs 1 --out "$work/warm" >/dev/null
t() { local s e; s=$(date +%s.%N); "$@" >/dev/null; e=$(date +%s.%N); echo "$e - $s" | bc; }
local_s=$(t $arenactl run "${common[@]}" --runs "$runs" --out "$work/local")
slurm_s=$(t $arenactl run "${common[@]}" --runs "$runs" --out "$work/slurm-run" --backend slurm)
n=$((2 * runs))
per=$(echo "scale=3; ($slurm_s - $local_s) / $n" | bc)
echo "local backend: $n task runs in $(printf %.2f "$local_s") s ($(echo "scale=2; $local_s / $n" | bc) s each)"
echo "slurm backend: $n task runs in $(printf %.2f "$slurm_s") s ($(echo "scale=2; $slurm_s / $n" | bc) s each)"
echo "slurm / local: $(echo "scale=2; $slurm_s / $local_s" | bc)x; added per task run: ${per} s   (target < 1 s)"
