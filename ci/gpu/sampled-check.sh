#!/bin/bash
# sampled check on one GPU: what the trusted evaluation costs when a secret sample
# of N outputs of each timed batch is checked instead of every one, beside the task's own
# harness run directly and the same evaluation checking every output; the GPU adversary suite
# against the sample, the untouched copy in the same call as its control; and where an
# untouched evaluation's time goes, with and without the sample.
#
# usage: sudo bash ci/gpu/sampled-check.sh OUT AKA_TASKS [N] [TASK_ID,...]
#   AKA_TASKS: AgentKernelArena tasks with arena's harnesses (`arenactl task materialize
#   --harnesses tasks/aka-harnesses`); TASK_ID: the suite's tasks (default
#   triton2triton/vllm/triton_layernorm_gated). N: checked calls per timed batch (default 64).
#   ARENA_STEPS=cost,suite,profile (the default: all three) picks the steps; each step takes
#   several minutes, so a device call of 10 minutes runs one or two.
# Writes OUT/cost-0 and OUT/cost-N (ci/bench/trusted-overhead.py), OUT/suite-N
# (ci/gpu/adversary-suite.py) and OUT/profile-{0,N} (cProfile of the evaluator, and the top of
# it by cumulative time in profile-*.txt); each prints its own table.
set -euo pipefail
out=$1 tasks=$2 n=${3:-64} ids=${4:-triton2triton/vllm/triton_layernorm_gated}
steps=",${ARENA_STEPS:-cost,suite,profile},"
here=$(cd "$(dirname "$0")/../.." && pwd)
cost_tasks=("$here/tasks/triton2triton/arena/add_rmsnorm" "$here/tasks/triton2triton/arena/row_softmax")
mkdir -p "$out"
# The device's Python (its torch) runs the evaluator and the harness alike.
export ARENA_BENCH_PYTHON=${ARENA_BENCH_PYTHON:-$(command -v python3)}
if [[ $steps == *,cost,* ]]; then
  ARENA_BENCH_SIDES=direct,trusted ARENA_CHECKED_CALLS=0 \
    python3 "$here/ci/bench/trusted-overhead.py" "$out/cost-0" 1 "${cost_tasks[@]}"
  ARENA_BENCH_SIDES=trusted ARENA_CHECKED_CALLS="$n" \
    python3 "$here/ci/bench/trusted-overhead.py" "$out/cost-$n" 1 "${cost_tasks[@]}"
fi
if [[ $steps == *,suite,* ]]; then
  ARENA_CHECKED_CALLS="$n" python3 "$here/ci/gpu/adversary-suite.py" "$out/suite-$n" "$tasks" \
    --tasks "$ids" --pairs 3 --sessions 3 --cases 0:1
fi
if [[ $steps == *,profile,* ]]; then
  for c in 0 "$n"; do
    ARENA_SUITE_PROFILE="$out/profile-$c" ARENA_CHECKED_CALLS="$c" python3 "$here/ci/gpu/adversary-suite.py" \
      "$out/profile-$c" "$tasks" --tasks "$ids" --attacks untouched --pairs 3 --sessions 3 --cases 0:1
    for p in "$out/profile-$c"/*.prof; do
      python3 -c 'import pstats, sys; pstats.Stats(sys.argv[1]).sort_stats("cumulative").print_stats(40)' "$p" \
        > "${p%.prof}.txt"
    done
  done
fi
