#!/usr/bin/env bash
# The main job, a real benchmark run on the bundled CPU sample tasks: set up; validate and digest
# every task; import the KernelBench slice as tasks and validate them (running them needs a
# GPU); build the CPU image set from pinned Debian packages and check it against
# lockfiles/cpu.lock; start a private containerd unless one answers at $ARENA_CONTAINERD
# (default /run/containerd/containerd.sock); seal a hidden unseen-configuration set; run the
# sample tasks with the scripted agent that installs the reference solutions, through
# `arenactl run --image-lock` (baseline, agent and evaluator containers, unseen evaluations);
# the same for the simulated c2rv32 tasks (lockfiles/rv32.lock); print the aggregate and
# generalization tables. Runs as root (containerd).
set -euo pipefail
cd "$(dirname "$0")/.."
bash ci/setup.sh
cargo build --release --locked -q -p arenactl
arenactl=target/release/arenactl
echo "== validate"; $arenactl task validate tasks
echo "== digest";   $arenactl task digest tasks
echo "== KernelBench problems as tasks (ci/fixtures/kernelbench-slice)"
rm -rf runs/kernelbench-tasks
$arenactl task import kernelbench ci/fixtures/kernelbench-slice --out runs/kernelbench-tasks | tail -1
$arenactl task validate runs/kernelbench-tasks | tail -1
echo "== images (store: \${ARENA_STORE:-~/.cache/arena/store})"
export ARENA_DEB_DIR=${ARENA_DEB_DIR:-$HOME/.cache/arena/debs}
bash ci/fetch-debs.sh images/testbase.toml "$ARENA_DEB_DIR"
$arenactl image verify --image-lock lockfiles/cpu.lock

echo "== containerd"
sock=${ARENA_CONTAINERD:-/run/containerd/containerd.sock}
if ! ctr --address "$sock" version >/dev/null 2>&1; then
  ctd_dir=${ARENA_CONTAINERD_DIR:-$HOME/.cache/arena/containerd}
  sock=$(bash ci/containerd.sh start "$ctd_dir")
  trap 'bash ci/containerd.sh stop "$ctd_dir"' EXIT
  echo "private containerd at $sock"
fi

echo "== hidden unseen configurations (seed 1)"
hidden=runs/hidden-seed1
if [ -f "$hidden/manifest.json" ]; then
  $arenactl unseen digest "$hidden"
else
  $arenactl unseen generate --tasks tasks --seed 1 --out "$hidden"
fi

echo "== run: CPU sample tasks, scripted agent ci/agents/optimize.toml"
$arenactl run --image-lock lockfiles/cpu.lock --agent ci/agents/optimize.toml \
  --gpus cpu:1 --containerd "$sock" --unseen "$hidden" --out runs/cpu-ci-optimize

echo "== run: simulated tasks (c2rv32: C kernels for PicoRV32 under Verilator, timed in cycles)"
# The rv32sim image builds its simulator with Verilator from the vendored core (about 20 s);
# `image verify` rebuilds it and checks every digest lockfiles/rv32.lock pins.
bash ci/fetch-debs.sh images/rv32sim.toml "$ARENA_DEB_DIR"
bash ci/fetch-debs.sh images/rv32sim-builder.toml "$ARENA_DEB_DIR"
$arenactl image verify --image-lock lockfiles/rv32.lock
$arenactl run --image-lock lockfiles/rv32.lock --agent ci/agents/optimize.toml \
  --gpus cpu:1 --containerd "$sock" --unseen "$hidden" --out runs/rv32-ci-optimize

echo "== report"
# One self-contained page (tables, plots, every task run); open it in any browser, offline.
$arenactl report runs/cpu-ci-optimize
$arenactl report runs/rv32-ci-optimize
