#!/usr/bin/env bash
# On an offline NVIDIA GPU machine: AgentKernelArena tasks with derived
# harnesses through `arenactl run` (containers: baseline, agent, evaluator), with the noop agent
# and with ci/gpu/agents/sync_noop.toml, then a noop run with hidden unseen configurations.
# Each run's tasks are shared out over the machine's GPUs, one task run per GPU at a time.
#
# usage: ci/gpu/derived-run.sh BIN_DIR TASKS_DIR OUT_DIR
#   BIN_DIR: release `arenactl`, containerd-bundle.tar.xz and start-containerd.sh
#            (../shared/gpu/pack-containerd.sh and its partner script).
#   TASKS_DIR: task dirs materialized by `arenactl task materialize` (no --harnesses).
#   ARENA_GPU_TASKS: the task dir names to run (default: every one under TASKS_DIR);
#   ARENA_GPU_CONFIGS: visible configurations kept per task (ci/gpu/first-configs.py; default 1);
#   ARENA_GPU_UNSEEN_TASKS: the tasks of the unseen run (default: the first two);
#   ARENA_GPU_PER_TASK: hidden configurations per task (default 2);
#   ARENA_GPU_RUNS: which runs, in order (default "noop sync_noop unseen").
# Ends with "DONE"; results.json, the reports and the logs of each run are under OUT_DIR.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
bin=$(cd "$1" && pwd)
src=$(cd "$2" && pwd)
out=$(mkdir -p "$3" && cd "$3" && pwd)
work=${ARENA_GPU_WORK:-/tmp/arena-derived}
[ -f "$work/containerd/containerd.pid" ] && kill "$(cat "$work/containerd/containerd.pid")" 2>/dev/null && sleep 1
rm -rf "$work" && mkdir -p "$work/tasks"
# Its own copy: a later call to the same machine may copy the working tree (BIN_DIR with it)
# again while these binaries run.
cp -r "$bin" "$work/bin" && bin=$work/bin
arenactl=$bin/arenactl
export ARENA_STORE=$work/store ARENA_HOST_ROOT=/
cd "$root"
date -u
nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader
ngpu=$(nvidia-smi -L | wc -l)

sock=$(bash "$bin/start-containerd.sh" "$bin/containerd-bundle.tar.xz" "$work/containerd")
trap 'kill "$(cat "$work/containerd/containerd.pid")" 2>/dev/null || true' EXIT

tasks=${ARENA_GPU_TASKS:-$(ls "$src")}
for t in $tasks; do cp -r "$src/$t" "$work/tasks/" && rm -rf "$work/tasks/$t/build"; done
python3 ci/gpu/first-configs.py "${ARENA_GPU_CONFIGS:-1}" "$work"/tasks/*
cat >"$work/sets.toml" <<TOML
[[set]]
name = "aka"
recipe = "$root/images/cuda-host.toml"
tasks = "$work/tasks"
task_types = ["triton2triton"]
TOML
# Hash-based .pyc files: layers fix every mtime, so timestamp-checked ones would not match
# inside the image and every process would compile its imports again (ci/gpu/arena-run.sh).
python3 -m compileall -q -f -j 0 --invalidation-mode unchecked-hash \
  /usr/lib/python3.12 /opt/torch/.venv/lib/python3.12/site-packages >/dev/null 2>&1 || true
SECONDS=0
$arenactl task list "$work/tasks" --json | python3 -c '
import json, sys
for t in json.load(sys.stdin):
    print(t["id"], json.dumps(t["trust"]))'
$arenactl lock --sets "$work/sets.toml" --set aka --out "$work/aka.lock" 2>&1 | tail -2
echo "TIME lock $SECONDS"
SECONDS=0
$arenactl unseen generate --tasks "$work/tasks" --seed 7 --per-task "${ARENA_GPU_PER_TASK:-2}" --out "$work/hidden" 2>&1 | tail -3
echo "TIME unseen-generate $SECONDS"
# Imported once, before two runs would import the same images side by side.
SECONDS=0
$arenactl image load --image-lock "$work/aka.lock" --containerd "$sock" 2>&1 | tail -2
echo "TIME image-load $SECONDS"

run() { # NAME GPU AGENT [ARGS...]
  local name=$1 gpu=$2 agent=$3
  shift 3
  local t=$SECONDS
  local rc=0
  $arenactl run --image-lock "$work/aka.lock" --agent "$agent" --gpus "nvidia:$gpu" --containerd "$sock" \
    --out "$work/run-$name" "$@" >"$out/$name.log" 2>&1 || rc=$?
  echo "TIME run-$name $((SECONDS - t)) rc=$rc"
  cp "$work/run-$name/results.json" "$out/$name-results.json" 2>/dev/null
  $arenactl report "$work/run-$name" --format json >"$out/$name-report.json" 2>/dev/null
}
unseen_tasks=${ARENA_GPU_UNSEEN_TASKS:-$(echo $tasks | cut -d' ' -f1-2)}
agent_of() { [ "$1" = sync_noop ] && echo ci/gpu/agents/sync_noop.toml || echo ci/agents/noop.toml; }
# Each run's tasks are shared out over the GPUs (every NGPU-th from the g-th): GPU g runs its
# part of each run in turn, into OUT/RUN-gG-*.
SECONDS=0
for g in $(seq 0 $((ngpu - 1))); do
  (
    for r in ${ARENA_GPU_RUNS:-noop sync_noop unseen}; do
      list=$tasks
      [ "$r" = unseen ] && list=$unseen_tasks
      part=$(echo $list | tr ' ' '\n' | awk -v g="$g" -v n="$ngpu" 'NF && (NR - 1) % n == g')
      [ -n "$part" ] || continue
      args=()
      for t in $part; do args+=(--tasks "$t"); done
      [ "$r" = unseen ] && args+=(--unseen "$work/hidden")
      run "$r-g$g" "$g" "$(agent_of "$r")" "${args[@]}"
    done
  ) &
done
wait
python3 ci/gpu/derived-summary.py "$out"
echo DONE
