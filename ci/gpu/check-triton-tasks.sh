#!/usr/bin/env bash
# On a GPU machine: run the Triton sample tasks' harnesses (compile, correctness, performance)
# on the baseline kernels and on the reference solutions in ci/solutions, three times each to
# show the run-to-run spread of the timing, and print the per-task speedups.
# usage: ci/gpu/check-triton-tasks.sh [OUT_DIR]
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
out=${1:-$(mktemp -d)}
mkdir -p "$out"
python3 -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__, "gpu", torch.cuda.get_device_name(0))'
for task in row_softmax add_rmsnorm; do
  for variant in baseline optimized; do
    for rep in 1 2 3; do
      work=$(mktemp -d)
      cp -r "$root/tasks/triton2triton/arena/$task/." "$work/"
      if [ "$variant" = optimized ]; then cp "$root/ci/solutions/triton2triton/arena/$task/"*.py "$work/source/"; fi
      (cd "$work" && for g in compile correctness performance; do
         python3 scripts/task_runner.py $g > "$out/$task.$variant.$rep.$g.log" 2>&1 || { echo "$task $variant: $g FAILED"; tail -5 "$out/$task.$variant.$rep.$g.log"; }
       done)
      cp "$work/build/performance_report.json" "$out/$task.$variant.$rep.perf.json" 2>/dev/null || true
      rm -rf "$work"
    done
  done
done
python3 - "$out" <<'PY'
import json, statistics, sys, glob, os
out = sys.argv[1]
for task in ("row_softmax", "add_rmsnorm"):
    per = {}
    for v in ("baseline", "optimized"):
        reps = []
        for f in sorted(glob.glob(os.path.join(out, f"{task}.{v}.*.perf.json"))):
            reps.append({c["test_case_id"]: c["execution_time_ms"] for c in json.load(open(f))})
        per[v] = reps
    ids = sorted(per["baseline"][0])
    print(f"\n{task}: case  baseline_ms (3 runs, CV%)  optimized_ms  ratio")
    speedups = []
    for rep in range(len(per["baseline"])):
        b, o = per["baseline"][rep], per["optimized"][rep]
        speedups.append(statistics.fmean(b[i] / o[i] for i in ids))
    for i in ids:
        bs = [r[i] for r in per["baseline"]]; os_ = [r[i] for r in per["optimized"]]
        cv = 100 * statistics.pstdev(bs) / statistics.fmean(bs)
        print(f"  {i}: {statistics.fmean(bs):.4f} ({cv:.2f}%)  {statistics.fmean(os_):.4f}  {statistics.fmean(bs)/statistics.fmean(os_):.2f}x")
    print(f"  task speedup per run: {[round(s, 3) for s in speedups]}")
PY
