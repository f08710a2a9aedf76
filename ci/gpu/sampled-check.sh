#!/bin/bash
# Issue 40's sampled check on one GPU, in one call: what the trusted evaluation costs when a
# secret sample of N outputs of each timed batch is checked instead of every one, beside the
# task's own harness run directly and the same evaluation checking every output; then the GPU
# adversary suite against the sample, with the untouched copy in the same call as its control.
#
# usage: sudo bash ci/gpu/sampled-check.sh OUT AKA_TASKS [N] [TASK_ID,...]
#   AKA_TASKS: AgentKernelArena tasks with arena's harnesses (`arenactl task materialize
#   --harnesses tasks/aka-harnesses`); TASK_ID: the suite's tasks (default
#   triton2triton/vllm/triton_layernorm_gated). N: checked calls per timed batch (default 64).
# Writes OUT/cost-0 and OUT/cost-N (ci/bench/trusted-overhead.py) and OUT/suite-N
# (ci/gpu/adversary-suite.py); each prints its own table.
set -euo pipefail
out=$1 tasks=$2 n=${3:-64} ids=${4:-triton2triton/vllm/triton_layernorm_gated}
here=$(cd "$(dirname "$0")/../.." && pwd)
cost_tasks=("$here/tasks/triton2triton/arena/add_rmsnorm" "$here/tasks/triton2triton/arena/row_softmax")
mkdir -p "$out"
# The device's Python (its torch) runs the evaluator and the harness alike.
export ARENA_BENCH_PYTHON=${ARENA_BENCH_PYTHON:-$(command -v python3)}
ARENA_BENCH_SIDES=direct,trusted ARENA_CHECKED_CALLS=0 \
  python3 "$here/ci/bench/trusted-overhead.py" "$out/cost-0" 1 "${cost_tasks[@]}"
ARENA_BENCH_SIDES=trusted ARENA_CHECKED_CALLS="$n" \
  python3 "$here/ci/bench/trusted-overhead.py" "$out/cost-$n" 1 "${cost_tasks[@]}"
ARENA_CHECKED_CALLS="$n" python3 "$here/ci/gpu/adversary-suite.py" "$out/suite-$n" "$tasks" \
  --tasks "$ids" --pairs 3 --sessions 3 --cases 0:1
