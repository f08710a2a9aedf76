#!/usr/bin/env bash
# Benchmark: the runner's Evaluate API (warm evaluators) on the CPU sample tasks with a trusted
# harness, side by side with the cold path it replaces for a training loop — `arenactl run` of
# the same evaluation (the reference solution, installed by ci/agents/optimize.toml: baseline,
# agent and evaluator containers per task run) — then a load run: ARENA_BENCH_LOAD requests at
# once against a queue of ARENA_BENCH_QUEUE, each of which must get exactly one answer.
#
# Prints per task: seconds per evaluation cold and warm (p50, p99), warm evaluations per hour
# over cold's, and the warm latency over the evaluator's own gate time (what the API adds: the
# goal is at most 50 ms); then the load run's counts. Needs root (containerd), like the tests.
# usage: ci/bench/evaluate-api.sh [WORK_DIR]
#   ARENA_BENCH_N: evaluations per task through the API, one at a time (default 10)
#   ARENA_BENCH_COLD: cold task runs per task (default 3)
#   ARENA_BENCH_LOAD: requests of the load run (default 1000), ARENA_BENCH_QUEUE (default 64)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
work=${1:-$(mktemp -d)}
mkdir -p "$work"; work=$(cd "$work" && pwd)
n=${ARENA_BENCH_N:-10}
cold_n=${ARENA_BENCH_COLD:-3}
load=${ARENA_BENCH_LOAD:-1000}
queue=${ARENA_BENCH_QUEUE:-64}
cd "$root"
bash ci/setup.sh
export ARENA_DEB_DIR=${ARENA_DEB_DIR:-$root/target/arena-debs}
bash ci/fetch-debs.sh images/testbase.toml "$ARENA_DEB_DIR" >/dev/null
cargo build --release --locked -q -p arenactl -p arena-client --bins --examples
arenactl=$root/target/release/arenactl
load_bin=$root/target/release/examples/evaluate_load
store=$root/target/arena-run-test-store
$arenactl image verify --image-lock lockfiles/cpu.lock --store "$store" >/dev/null
sock=$(bash ci/containerd.sh start "$work/ctd")
cleanup() { kill -INT "${server:-0}" 2>/dev/null; wait "${server:-0}" 2>/dev/null; bash ci/containerd.sh stop "$work/ctd" >/dev/null 2>&1 || true; }
trap cleanup EXIT
tasks="python2python/arena/prefix_sum python2python/arena/matmul"

declare -A cold
for task in $tasks; do
  k=$(basename "$task")
  walls=()
  for i in $(seq "$cold_n"); do
    rm -rf "$work/cold-$k-$i"
    t0=$(date +%s.%N)
    $arenactl run --image-lock lockfiles/cpu.lock --agent ci/agents/optimize.toml --tasks "$task" \
      --gpus cpu:1 --containerd "$sock" --store "$store" --out "$work/cold-$k-$i" >/dev/null 2>&1
    walls+=("$(echo "$(date +%s.%N) - $t0" | bc)")
  done
  cold[$k]=$(printf '%s\n' "${walls[@]}" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
  echo "cold $task: ${walls[*]} s (median ${cold[$k]})"
done

$arenactl runner serve --listen "unix:$work/runner.sock" --gpus cpu:1 --containerd "$sock" \
  --store "$store" --eval-queue "$queue" --eval-dir "$work/eval" >"$work/serve.log" 2>&1 &
server=$!
for _ in $(seq 100); do [ -S "$work/runner.sock" ] && break; sleep 0.1; done
echo "| task | cold s per evaluation | warm s per evaluation p50 (p99) | warm evaluations per hour / cold | warm latency over the evaluator's gates p50 (p99), ms |"
echo "|---|---:|---:|---:|---:|"
for task in $tasks; do
  k=$(basename "$task")
  sol=$root/ci/solutions/$task/$k.py
  # The first request starts the task's evaluator: a request of its own, not counted.
  "$load_bin" "unix:$work/runner.sock" "$root/lockfiles/cpu.lock" "$task" "source/$k.py=$sol" 1 1 >/dev/null
  "$load_bin" "unix:$work/runner.sock" "$root/lockfiles/cpu.lock" "$task" "source/$k.py=$sol" "$n" 1 >"$work/warm-$k.json"
  python3 - "$work/warm-$k.json" "$task" "${cold[$k]}" <<'PY'
import json, sys
w, task, cold = json.load(open(sys.argv[1])), sys.argv[2], float(sys.argv[3])
p50, p99 = w["latency_ms"]["p50"] / 1000, w["latency_ms"]["p99"] / 1000
o = w["latency_over_gates_ms"]
print(f"| {task} | {cold:.2f} | {p50:.2f} ({p99:.2f}) | {cold / p50:.2f}x | {o['p50']:.0f} ({o['p99']:.0f}) |")
PY
done

# The load: every request at once, a failing candidate (zeros: correctness fails in ~60 ms),
# so that the line and not the kernel is what is measured.
zeros=$work/zeros.py
cp tasks/python2python/arena/prefix_sum/source/prefix_sum.py "$zeros"
printf '\n\ndef prefix_sum(xs):\n    return [0] * len(xs)\n' >>"$zeros"
"$load_bin" "unix:$work/runner.sock" "$root/lockfiles/cpu.lock" python2python/arena/prefix_sum \
  "source/prefix_sum.py=$zeros" "$load" "$load" >"$work/load.json"
python3 - "$work/load.json" <<'PY'
import json, sys
l = json.load(open(sys.argv[1]))
ok = l["answered"] + l["busy"] == l["requests"] and not l["errors"] and not l["duplicate_evaluations"] and not l["wrong_request_ids"]
print(f"load: {l['requests']} requests at once: {l['answered']} evaluated, {l['busy']} refused as busy, "
      f"{len(l['errors'])} other errors, {l['duplicate_evaluations']} duplicated, {l['wrong_request_ids']} mismatched; "
      f"{l['evaluations_per_s']:.1f} evaluations/s; latency p50 {l['latency_ms']['p50']:.0f} ms, p99 {l['latency_ms']['p99']:.0f} ms"
      + ("" if ok else "  <- NOT ONE ANSWER EACH"))
sys.exit(0 if ok else 1)
PY
