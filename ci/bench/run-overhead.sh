#!/usr/bin/env bash
# Benchmark: what `arenactl run` adds to a task run, against the same harness calls run
# directly, side by side, on a CPU sample task. arena's side: `arenactl run --image-lock
# lockfiles/cpu.lock` with the agent that changes nothing (ci/agents/noop.toml) and
# --perf-pairs 0, so its evaluations make exactly the harness's calls (baseline: compile,
# correctness, performance; evaluator: the same three) in containers. The direct side: those
# six calls on the host, with the same Debian Python the image holds, each evaluation in a
# fresh copy of the task. Alternating rounds; prints each round, the medians and the ratio,
# and where arena's time goes (the task run's breakdown). Needs root, containerd and runc.
# ARENA_BENCH_PERF_PAIRS=N (default 0) runs arena's side with --perf-pairs N instead: the
# paired rounds a run makes by default (6) time both kernels N times each, which the direct
# side does once; the summary then says how many performance runs each side made.
# usage: ci/bench/run-overhead.sh [ROUNDS] [TASK]   (TASK: a task of lockfiles/cpu.lock)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
rounds=${1:-5}
task=${2:-python2python/arena/sum_squares}
pairs=${ARENA_BENCH_PERF_PAIRS:-0}
cd "$root"
if ! /usr/bin/python3 -c 'import yaml' 2>/dev/null; then
  echo "needs Debian's python3-yaml (/usr/bin/python3 reads the task's config.yaml)" >&2; exit 1
fi
cargo build --release --locked -q -p arenactl
arenactl=$root/target/release/arenactl
export ARENA_DEB_DIR=${ARENA_DEB_DIR:-$HOME/.cache/arena/debs}
bash ci/fetch-debs.sh images/testbase.toml "$ARENA_DEB_DIR"
$arenactl image verify --image-lock lockfiles/cpu.lock >/dev/null
work=$(mktemp -d /tmp/arena-bench-XXXX)
sock=$(bash ci/containerd.sh start "$work/ctd")
cleanup() {
  bash "$root/ci/containerd.sh" stop "$work/ctd"
  rm -rf "$work"
}
trap cleanup EXIT
t() {
  local s e; s=$(date +%s.%N)
  "$@" >/dev/null 2>"$work/last.err" || { echo "failed: $*" >&2; cat "$work/last.err" >&2; return 1; }
  e=$(date +%s.%N); echo "$e - $s" | bc
}
# The three gate commands of the task's config.yaml (read once, here), each evaluation in a
# fresh copy, run by sh as AgentKernelArena runs them, with Debian's python3 first on PATH.
commands=$(/usr/bin/python3 - "tasks/$task/config.yaml" <<'PY'
import sys, yaml
cfg = yaml.safe_load(open(sys.argv[1]))
for gate in ("compile", "correctness", "performance"):
    cmd = cfg[gate + "_command"]
    print("\n".join(cmd if isinstance(cmd, list) else [cmd]))
PY
)
direct() {
  local d=$1
  mkdir -p "$d"
  for side in baseline evaluator; do
    rm -rf "$d/$side" && cp -r "tasks/$task" "$d/$side"
    (cd "$d/$side" && PATH=/usr/bin:$PATH sh -e -c "$commands")
  done
}
run() {
  $arenactl run --image-lock lockfiles/cpu.lock --agent ci/agents/noop.toml --tasks "$task" \
    --perf-pairs "$pairs" --gpus cpu:1 --containerd "$sock" --out "$work/run-$1" --json
}
t direct "$work/warm" >/dev/null && t run warm >/dev/null   # warm-up: image import, page cache, bytecode
printf '%-6s %10s %10s %10s\n' round direct arena "task run"
rows=$work/rounds.txt; : > "$rows"
for i in $(seq "$rounds"); do
  d=$(t direct "$work/direct")
  a=$(t run "$i")
  tr=$(python3 -c 'import json,glob,sys; print(json.load(open(glob.glob(sys.argv[1]+"/**/result.json",recursive=True)[0]))["timings"]["total_s"])' "$work/run-$i")
  printf '%-6s %10.2f %10.2f %10.2f\n' "$i" "$d" "$a" "$tr"
  echo "$d $a $tr $work/run-$i" >> "$rows"
done
python3 - "$rows" <<'PY'
import glob, json, statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
d = [float(r[0]) for r in rows]; a = [float(r[1]) for r in rows]; tr = [float(r[2]) for r in rows]
med = statistics.median
print(f"\nmedians over {len(rows)} rounds: direct {med(d):.2f} s, `arenactl run` {med(a):.2f} s "
      f"(its task run {med(tr):.2f} s)")
print(f"arenactl run / direct: {med(a) / med(d):.2f}x   task run / direct: {med(tr) / med(d):.2f}x"
      "   (goal <= 1.1)")
keys = ["image_s", "containers_s", "agent_s", "compile_s", "correctness_s", "performance_s",
        "evaluator_setup_s", "other_s"]
results = [json.load(open(glob.glob(r[3] + "/**/result.json", recursive=True)[0])) for r in rows]
bd = [res["timings"]["breakdown"] for res in results]
runs = [len([c for c in results[0]["evaluators"][e]["commands"]
             if c["step"].startswith(("perf", "performance"))]) for e in ("baseline", "candidate")]
print(f"performance runs of the harness: arena {sum(runs)} (baseline {runs[0]}, candidate "
      f"{runs[1]}), direct 2")
print("task run breakdown, medians (s): " +
      ", ".join(f"{k[:-2]} {med(b.get(k, 0.0) for b in bd):.2f}" for k in keys) +
      f"; arena's share {med(b['arena_share'] for b in bd):.1%}")
PY
