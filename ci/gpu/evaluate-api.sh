#!/usr/bin/env bash
# On an offline NVIDIA GPU machine: KernelBench level-1 problems evaluated through the runner's
# Evaluate API (warm evaluators) against the cold path, `arenactl run` of the same evaluation
# (baseline, agent and evaluator containers per task run), side by side, on the host's own
# userland (images/cuda-host.toml, as ci/gpu/venv-image.sh builds it).
#
# usage: ci/gpu/evaluate-api.sh BIN_DIR OUT_DIR
#   BIN_DIR: release `arenactl` and `evaluate_load` (arena-client's example), the containerd
#            bundle and start-containerd.sh (../shared/gpu/pack-containerd.sh), and kb/: the
#            KernelBench problems as tasks (`arenactl task import kernelbench
#            ci/fixtures/kernelbench-slice --out BIN_DIR/kb/kernelbench`).
#   ARENA_GPU_TASKS: task ids (default: four level-1 problems).
#   ARENA_GPU_WARM_N: evaluations per task through the API, one at a time (default 8; the
#            first starts the task's evaluator).
#   ARENA_GPU_COLD_N: cold task runs per task (default 1).
#   ARENA_GPU_WORK: where the store and runs go (default /tmp/arena-eval-bench).
#   ARENA_GPU_GPUS: the runner's --gpus (default nvidia:0), ARENA_GPU_RECIPE: the base recipe
#            under images/ (default cuda-host): cpu:1 and cuda-pytorch (with ARENA_WHEEL_DIR and
#            ARENA_DEB_DIR) try the script on a machine without a GPU.
# Prints one line per task and path (TIME ...) and a table; OUT_DIR gets the JSON of both.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
bin=$(cd "$1" && pwd)
out=$(mkdir -p "$2" && cd "$2" && pwd)
tasks=${ARENA_GPU_TASKS:-kernelbench/level1/1_Square_matrix_multiplication_ kernelbench/level1/17_Matmul_with_transposed_B kernelbench/level1/65_conv_transposed_2D__square_input__asymmetric_kernel kernelbench/level1/81_conv_transposed_2D_asymmetric_input_square_kernel___dilated____padded____strided__}
warm_n=${ARENA_GPU_WARM_N:-8}
cold_n=${ARENA_GPU_COLD_N:-1}
work=${ARENA_GPU_WORK:-/tmp/arena-eval-bench}
gpus=${ARENA_GPU_GPUS:-nvidia:0}
recipe=${ARENA_GPU_RECIPE:-cuda-host}
arenactl=$bin/arenactl
export ARENA_HOST_ROOT=/
exec > >(tee -a "$out/log.txt") 2>&1
now() { date +%s.%N; }
since() { python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.2f}')" "$1" "$(now)"; }
mkdir -p "$work"
cd "$root"

echo "== host"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv,noheader || true
python3 -c 'import torch; print("torch", torch.__version__)' || true

echo "== containerd"
for p in "$work"/containerd*/containerd.pid; do [ -f "$p" ] && kill "$(cat "$p")" 2>/dev/null || true; done
ctd=$work/containerd-$(date +%s)
sock=$(bash "$bin/start-containerd.sh" "$bin/containerd-bundle.tar.xz" "$ctd")

cat >"$work/sets.toml" <<TOML
[[set]]
name = "kb"
recipe = "$root/images/$recipe.toml"
tasks = "$bin/kb"
task_types = ["kernelbench"]
TOML
echo "== lock the KernelBench tasks on $recipe"
t=$(now)
ARENA_STORE=$work/store $arenactl lock --sets "$work/sets.toml" --set kb --out "$work/kb.lock" 2>&1 | tail -3
echo "TIME lock $(since "$t")"
export ARENA_STORE=$work/store

echo "== cold: arenactl run (noop agent), $cold_n task run(s) per task"
for task in $tasks; do
  name=$(basename "$task")
  rm -rf "$work/cold-$name"
  t=$(now)
  $arenactl run --image-lock "$work/kb.lock" --agent ci/agents/noop.toml --gpus "$gpus" \
    --containerd "$sock" --tasks "$task" --runs "$cold_n" --out "$work/cold-$name" \
    >/dev/null 2>"$work/cold-$name.err" || echo "COLD FAILED $task: $(tail -3 "$work/cold-$name.err")"
  echo "TIME cold $task $(since "$t") for $cold_n"
  cp "$work/cold-$name/results.json" "$out/cold-$name.json" 2>/dev/null || true
done

echo "== warm: the Evaluate API, $warm_n evaluations per task"
$arenactl runner serve --listen "unix:$work/runner.sock" --gpus "$gpus" --containerd "$sock" \
  --eval-dir "$work/eval" >"$work/serve.log" 2>&1 &
server=$!
trap 'kill -INT $server 2>/dev/null; wait $server 2>/dev/null || true' EXIT
for _ in $(seq 100); do [ -S "$work/runner.sock" ] && break; sleep 0.1; done
for task in $tasks; do
  name=$(basename "$task")
  t=$(now)
  "$bin/evaluate_load" "unix:$work/runner.sock" "$work/kb.lock" "$task" \
    "source/model_new.py=$bin/kb/$task/source/model_new.py" "$warm_n" 1 >"$out/warm-$name.json" \
    || echo "WARM FAILED $task"
  echo "TIME warm $task $(since "$t") for $warm_n: $(cat "$out/warm-$name.json")"
done
# KernelBench's own test agents' ModelNew of the first task (BIN_DIR/attacks/{wrong,cached}.py,
# made from ci/agents/kernelbench/*.toml), through the API: each must fail correctness; and
# BIN_DIR/attacks/syncnoop.py (its ModelNew with torch.cuda.synchronize made a no-op at import),
# which must fail performance (DeferredWork: the evaluator's sampled outputs).
first=${tasks%% *}
for a in wrong cached syncnoop; do
  [ -f "$bin/attacks/$a.py" ] || continue
  $arenactl eval --runner "unix:$work/runner.sock" --image-lock "$work/kb.lock" --task "$first" \
    --candidate "source/model_new.py=$bin/attacks/$a.py" 2>&1 | sed "s/^/$a: /" || echo "$a: FAILED"
done
kill -INT $server; wait $server || true
trap - EXIT

python3 - "$out" $tasks <<'PY'
import json, os, statistics, sys
out, tasks = sys.argv[1], sys.argv[2:]
print("| task | cold s per evaluation | warm s per evaluation (p50) | warm evaluations per hour / cold | warm latency over the evaluator's gates (p50 ms) | untouched speedup (cold; warm runs) | over torch.compile (cold; warm runs) |")
print("|---|---:|---:|---:|---:|---|---|")
for task in tasks:
    name = os.path.basename(task)
    try:
        cold = json.load(open(os.path.join(out, f"cold-{name}.json")))
        warm = json.load(open(os.path.join(out, f"warm-{name}.json")))
    except (OSError, ValueError) as e:
        print(f"| {task} | missing: {e} |")
        continue
    walls = [r["timings"]["total_s"] for r in cold["tasks"]]
    cold_s = statistics.fmean(walls)
    warm_s = warm["latency_ms"]["p50"] / 1000
    def speedup(r):
        cases = r["candidate"]["performance"]
        return statistics.fmean(c["baseline_ms"] / c["execution_time_ms"] for c in cases) if cases else float("nan")
    def compiled(r):
        cases = r["candidate"]["performance"]
        ratios = []
        for c in cases:
            pairs = c.get("compiled_pairs_ms")
            if not pairs:
                why = c.get("compiled_error") or (r.get("evaluators", {}).get("candidate", {}).get("compiled_baseline") or {}).get("error")
                return f"none ({str(why)[:120]})"
            ratios.append(statistics.median(a / b for a, b in pairs))
        return f"{statistics.fmean(ratios):.3f}" if ratios else "none"
    cold_sp = ", ".join(f"{speedup(r):.3f}" for r in cold["tasks"])
    warm_sp = ", ".join(f"{x:.3f}" for x in warm.get("speedups", []))
    cold_c = ", ".join(compiled(r) for r in cold["tasks"])
    warm_c = ", ".join("none" if x is None else f"{x:.3f}" for x in warm.get("compiled_speedups", []))
    print(f"| {task} | {cold_s:.1f} | {warm_s:.2f} | {cold_s / warm_s:.1f}x | {warm['latency_over_gates_ms']['p50']:.0f} | {cold_sp}; {warm_sp} | {cold_c}; {warm_c} |")
PY
