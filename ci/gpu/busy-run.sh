#!/usr/bin/env bash
# On an offline NVIDIA GPU machine with several GPUs: one `arenactl run` of
# AgentKernelArena tasks over every GPU of the machine (noop agent, derived harnesses,
# containers), and how busy each GPU was from the first task run's start to the last one's
# end: by arena's own report (task runs holding a GPU, less their time on images) and by the
# device (nvidia-smi's utilization.gpu, sampled every 500 ms: the share of time a kernel ran).
# Nothing is imported before the run: the run imports the image set itself, once per image,
# before a task run takes a GPU (crates/arena-runner/src/task_run/import_once.rs).
#
# usage: ci/gpu/busy-run.sh BIN_DIR TASKS_DIR OUT_DIR
#   BIN_DIR: release `arenactl`, containerd-bundle.tar.xz and start-containerd.sh
#            (../shared/gpu/pack-containerd.sh and its partner script).
#   TASKS_DIR: task dirs materialized by `arenactl task materialize` (no --harnesses).
#   ARENA_GPU_TASKS: the task dir names to run (default: every one under TASKS_DIR);
#   ARENA_GPU_CONFIGS: visible configurations kept per task (ci/gpu/first-configs.py; default 1);
#   ARENA_GPU_PAIRS: --trusted-pairs (default 3, so that 16 task runs fit one device call).
# Ends with "DONE"; the run's results.json, report.json, log and samples are under OUT_DIR.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
bin=$(cd "$1" && pwd)
src=$(cd "$2" && pwd)
out=$(mkdir -p "$3" && cd "$3" && pwd)
work=${ARENA_GPU_WORK:-/tmp/arena-busy}
[ -f "$work/containerd/containerd.pid" ] && kill "$(cat "$work/containerd/containerd.pid")" 2>/dev/null && sleep 1
rm -rf "$work" && mkdir -p "$work/tasks"
cp -r "$bin" "$work/bin" && bin=$work/bin
arenactl=$bin/arenactl
export ARENA_STORE=$work/store ARENA_HOST_ROOT=/
cd "$root"
date -u
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader
ngpu=$(nvidia-smi -L | wc -l)
gpus=$(seq -s, 0 $((ngpu - 1)))

sock=$(bash "$bin/start-containerd.sh" "$bin/containerd-bundle.tar.xz" "$work/containerd")
trap 'kill "$(cat "$work/containerd/containerd.pid")" 2>/dev/null || true; kill $smi 2>/dev/null || true' EXIT

tasks=${ARENA_GPU_TASKS:-$(ls "$src")}
for t in $tasks; do cp -r "$src/$t" "$work/tasks/" && rm -rf "$work/tasks/$t/build"; done
python3 ci/gpu/first-configs.py "${ARENA_GPU_CONFIGS:-1}" "$work"/tasks/* >/dev/null
cat >"$work/sets.toml" <<TOML
[[set]]
name = "aka"
recipe = "$root/images/cuda-host.toml"
tasks = "$work/tasks"
task_types = ["triton2triton"]
TOML
# Hash-based .pyc files (ci/gpu/arena-run.sh says why).
python3 -m compileall -q -f -j 0 --invalidation-mode unchecked-hash \
  /usr/lib/python3.12 /opt/torch/.venv/lib/python3.12/site-packages >/dev/null 2>&1 || true
SECONDS=0
$arenactl lock --sets "$work/sets.toml" --set aka --out "$work/aka.lock" 2>&1 | tail -1
echo "TIME lock $SECONDS"

nvidia-smi --query-gpu=timestamp,index,utilization.gpu --format=csv,noheader,nounits -lms 500 >"$out/utilization.csv" &
smi=$!
args=()
for t in $tasks; do args+=(--tasks "$t"); done
SECONDS=0
rc=0
$arenactl run --image-lock "$work/aka.lock" --agent ci/agents/noop.toml --gpus "nvidia:$gpus" \
  --trusted-pairs "${ARENA_GPU_PAIRS:-3}" --containerd "$sock" --out "$work/run" "${args[@]}" \
  >"$out/run.log" 2>&1 || rc=$?
echo "TIME run $SECONDS rc=$rc"
kill $smi 2>/dev/null
cp "$work/run/results.json" "$out/results.json" 2>/dev/null
$arenactl report "$work/run" --format json >"$out/report.json" 2>/dev/null
python3 ci/gpu/busy-summary.py "$out"
echo DONE
