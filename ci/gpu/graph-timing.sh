#!/usr/bin/env bash
# On a GPU machine (as root): arena's trusted evaluator timing by CUDA-graph replay, checked.
# A smoke run first (row_softmax, untouched, 3 pairs; stops here if no case was graph-timed),
# then each Triton sample task against an untouched copy, a 2x and a 1.5x slower candidate,
# ARENA_REPS times each (run-to-run spread), after the adversaries of graph timing (a kernel
# that is cheap only while captured, one that cannot be captured, deferred work, zeros, a
# patched clock); then the untouched and 2x candidates timed eagerly for comparison.
# usage: ci/gpu/graph-timing.sh OUT_DIR   (ARENA_REPS, default 3; ARENA_GPU_DEADLINE s, 560;
# ARENA_ADV, ARENA_MAIN, ARENA_EAGER: the TASK/CANDIDATE lists of each part, empty skips it;
# ARENA_SMOKE=0 skips the smoke run)
set -uo pipefail
cd "$(dirname "$0")/../.."
out=$1
deadline=$(( $(date +%s) + ${ARENA_GPU_DEADLINE:-560} ))
left() { echo $(( deadline - $(date +%s) )); }
mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv | tee "$out/gpu.csv"
python3 -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__)'
if [ "${ARENA_SMOKE:-1}" != 0 ]; then
python3 ci/gpu/trusted-check.py "$out/smoke" 3 row_softmax/noop || exit 1
python3 - "$out/smoke/trusted-check.json" <<'PY' || exit 1
import json, sys
cases = json.load(open(sys.argv[1]))["row_softmax/noop"].get("cases") or []
graph = [c for c in cases if c.get("timing") == "graph"]
print(f"smoke: {len(graph)} of {len(cases)} cases graph-timed")
sys.exit(0 if graph else 1)
PY
fi
adv=${ARENA_ADV-row_softmax/capcheat,row_softmax/sync,row_softmax/defer,row_softmax/zeros,row_softmax/timer,add_rmsnorm/capcheat}
if [ -n "$adv" ]; then
  timeout $(( $(left) - 60 )) python3 ci/gpu/trusted-check.py "$out/adversaries" 10 "$adv"
fi
main=${ARENA_MAIN-row_softmax/noop,row_softmax/slow2x,row_softmax/slow15,add_rmsnorm/noop,add_rmsnorm/slow2x,add_rmsnorm/slow15}
ARENA_REPS=${ARENA_REPS:-3} timeout $(( $(left) - ${ARENA_EAGER_S:-120} )) python3 ci/gpu/trusted-check.py "$out/graph" 10 "$main"
eager=${ARENA_EAGER-row_softmax/noop,row_softmax/slow2x,add_rmsnorm/slow2x}
if [ -n "$eager" ]; then
  ARENA_GRAPHS=0 timeout "$(left)" python3 ci/gpu/trusted-check.py "$out/eager" 10 "$eager"
fi
nvidia-smi --query-gpu=clocks.sm,temperature.gpu,power.draw,clocks_throttle_reasons.active --format=csv | tee -a "$out/gpu.csv"
