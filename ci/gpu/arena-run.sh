#!/usr/bin/env bash
# On an offline NVIDIA GPU machine: a real `arenactl run --image-lock` of the Triton sample tasks
# through containerd with the `nvidia` profile, then the same harness commands run directly on
# the host, and the per-container overhead of the first against the second.
#
# usage: ci/gpu/arena-run.sh BIN_DIR OUT_DIR [RUNS]
#   ARENA_GPU_UNSEEN=0 leaves out the unseen-configuration evaluations;
#   ARENA_GPU_DIRECT_REPS (default RUNS) sets the direct runs of each harness;
#   ARENA_GPU_TASKS (default "row_softmax add_rmsnorm") picks the tasks;
#   ARENA_GPU_RELOCK=0 leaves out the second, unchanged lock (its timing).
#   BIN_DIR: `arenactl` (release build), containerd-bundle.tar.xz and start-containerd.sh
#            (../shared/gpu/pack-containerd.sh and its partner script).
# The image set is `cuda-host` (images/cuda-host.toml): the host's own Python, gcc and PyTorch
# virtualenv captured as locked layers, because such a machine can fetch no base image.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
bin=$(cd "$1" && pwd)
out=$(mkdir -p "$2" && cd "$2" && pwd)
runs=${3:-1}
unseen=${ARENA_GPU_UNSEEN:-1}
reps=${ARENA_GPU_DIRECT_REPS:-$runs}
tasks=${ARENA_GPU_TASKS:-row_softmax add_rmsnorm}
relock=${ARENA_GPU_RELOCK:-1}
work=${ARENA_GPU_WORK:-/tmp/arena-gpu}
[ -f "$work/containerd/containerd.pid" ] && kill "$(cat "$work/containerd/containerd.pid")" 2>/dev/null && sleep 1
rm -rf "$work"
mkdir -p "$work"
arenactl=$bin/arenactl
export ARENA_STORE=$work/store ARENA_HOST_ROOT=/
now() { date +%s.%N; }
since() { python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.2f}')" "$1" "$(now)"; }

sock=$(bash "$bin/start-containerd.sh" "$bin/containerd-bundle.tar.xz" "$work/containerd")
trap 'kill "$(cat "$work/containerd/containerd.pid")" 2>/dev/null || true' EXIT
cd "$root"
python3 -c 'import torch, triton; print("host: torch", torch.__version__, "triton", triton.__version__, torch.cuda.get_device_name(0))'

echo "== byte-compile the captured Python trees (hash-based .pyc)"
# Layers fix every mtime (to the recipe's, 0), so the usual timestamp-checked .pyc files no
# longer match their sources inside the image and every Python process in every container would
# compile its imports again (measured: +0.2 s for `python3 -c pass`, +1-2 s per gate).
# Hash-based .pyc files (PEP 552) do not depend on mtimes.
t=$(now)
python3 -m compileall -q -f -j 0 --invalidation-mode unchecked-hash \
  /usr/lib/python3.12 /opt/torch/.venv/lib/python3.12/site-packages >/dev/null 2>&1 || true
echo "TIME compileall $(since "$t")"

echo "== lock (build the cuda-host image set from this host's trees)"
t=$(now); $arenactl lock --set cuda-host --out "$work/cuda-host.lock"; echo "TIME lock $(since "$t")"
cp "$work/cuda-host.lock" "$out/"
if [ "$relock" = 1 ]; then
  t=$(now); $arenactl lock --set cuda-host --out "$work/cuda-host.lock" >/dev/null; echo "TIME relock-unchanged $(since "$t")"
fi
du -sh "$ARENA_STORE"

unseen_args=()
if [ "$unseen" = 1 ]; then
  echo "== hidden unseen configurations (seed 1)"
  $arenactl unseen generate --tasks tasks --seed 1 --out "$work/hidden" | tail -3
  unseen_args=(--unseen "$work/hidden")
fi

# The same harness commands run directly on the host, each rep with a fresh copy of the task and
# a fresh Triton cache, as each evaluator container has. Half before the arena run and half
# after it, so that a machine warming up (page cache, memory) favours neither side.
direct=$out/direct.jsonl
: >"$direct"
run_direct() { # PHASE REPS
  for task in $tasks; do
    for variant in baseline optimized; do
      for rep in $(seq 1 "$2"); do
        w=$(mktemp -d)
        cp -r "tasks/triton2triton/arena/$task/." "$w/"
        t=$(now)
        if [ "$variant" = optimized ]; then cp "ci/solutions/triton2triton/arena/$task/"*.py "$w/source/"; fi
        agent_s=$(since "$t")
        t=$(now)
        (cd "$w" && export TRITON_CACHE_DIR=$w/.triton HOME=$w \
          && python3 scripts/task_runner.py compile >/dev/null 2>&1 \
          && python3 scripts/task_runner.py correctness >/dev/null 2>&1 \
          && python3 scripts/task_runner.py performance >/dev/null 2>&1) || echo "$task $variant: a gate FAILED"
        python3 -c 'import json, sys; p = sys.argv[7]; print(json.dumps({"phase": sys.argv[1], "task": sys.argv[2], "variant": sys.argv[3], "rep": int(sys.argv[4]), "harness_s": float(sys.argv[5]), "agent_s": float(sys.argv[6]), "perf": json.load(open(p)) if p else None}))' \
          "$1" "$task" "$variant" "$rep" "$(since "$t")" "$agent_s" "$(ls "$w/build/performance_report.json" 2>/dev/null)" >>"$direct"
        rm -rf "$w"
      done
    done
  done
}
before=$(( reps / 2 ))
echo "== harness commands directly on the host: $before reps before the run"
run_direct before "$before"

echo "== run"
task_args=()
for task in $tasks; do task_args+=(--tasks "triton2triton/arena/$task"); done
t=$(now)
rc=0
$arenactl run --image-lock "$work/cuda-host.lock" --agent ci/agents/optimize.toml --gpus nvidia:0 \
  --containerd "$sock" "${unseen_args[@]}" --runs "$runs" "${task_args[@]}" --out "$work/run" || rc=$?
echo "TIME run $(since "$t") rc=$rc"
cp "$work/run/results.json" "$out/" 2>/dev/null || true
tar -C "$work/run" -czf "$out/run-logs.tgz" --exclude='*/workspace/*' . 2>/dev/null || true

echo "== harness commands directly on the host: $(( reps - before )) reps after the run"
run_direct after $(( reps - before ))

python3 - "$out" <<'PY'
import json, statistics, sys, os
out = sys.argv[1]
res = json.load(open(os.path.join(out, "results.json")))
direct = [json.loads(l) for l in open(os.path.join(out, "direct.jsonl"))]
def total(c):
    return c["create_s"] + c["start_s"] + c["run_s"] + c["teardown_s"]
def direct_s(name):
    d = [r for r in direct if r["task"] == name]
    base = statistics.fmean(r["harness_s"] for r in d if r["variant"] == "baseline")
    opt = statistics.fmean(r["harness_s"] + r["agent_s"] for r in d if r["variant"] == "optimized")
    return base + opt
def speedup(t):
    # Per case, the paired baseline over the candidate (arena.task_result/v2).
    cases = (t.get("candidate") or {}).get("performance") or []
    r = [c["baseline_ms"] / c["execution_time_ms"] for c in cases if c.get("baseline_ms") and c["execution_time_ms"] > 0]
    return statistics.fmean(r) if r else float("nan")
print("\n| task | repeat | trust | speedup | agent+evaluator containers s | direct s (mean) | overhead | create+start+teardown s |")
print("|---|---:|---|---:|---:|---:|---:|---:|")
sums = [0.0, 0.0]
for t in res["tasks"]:
    name = t["task_id"].split("/")[-1]
    cs = t["containers"]
    conts = [cs.get("agent"), cs.get("baseline"), cs.get("candidate")]
    in_ct = sum(total(c) for c in conts if c)
    life = sum(c["create_s"] + c["start_s"] + c["teardown_s"] for c in conts if c)
    dd = direct_s(name)
    sums[0] += in_ct
    sums[1] += dd
    print(f"| {name} | {t['repeat']} | {t.get('trust')} | {speedup(t):.3f} | {in_ct:.2f} | {dd:.2f} | {100 * (in_ct - dd) / dd:+.2f}% | {life:.2f} |")
print(f"| all | | | | {sums[0]:.2f} | {sums[1]:.2f} | {100 * (sums[0] - sums[1]) / sums[1]:+.2f}% | |")
for ph in ("before", "after"):
    h = [r["harness_s"] for r in direct if r.get("phase") == ph]
    if h:
        print(f"direct harness runs {ph} the arena run: n={len(h)}, mean {statistics.fmean(h):.2f} s")
print("\nper-case ms of the baseline kernel, evaluator containers vs direct (means):")
for name in sorted({t["task_id"].split("/")[-1] for t in res["tasks"]}):
    cases = {}
    for t in res["tasks"]:
        if t["task_id"].endswith("/" + name):
            for c in t["baseline"]["performance"]:
                cases.setdefault(c["test_case_id"], [[], []])[0].append(c["execution_time_ms"])
    for r in direct:
        if r["task"] == name and r["variant"] == "baseline" and r["perf"]:
            for c in r["perf"]:
                cases.setdefault(c["test_case_id"], [[], []])[1].append(c["execution_time_ms"])
    for cid, (a, b) in sorted(cases.items()):
        if a and b:
            print(f"  {name} {cid}: container {statistics.fmean(a):.4f}  direct {statistics.fmean(b):.4f}  ratio {statistics.fmean(a) / statistics.fmean(b):.3f}")
PY
