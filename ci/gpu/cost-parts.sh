#!/bin/bash
# On one GPU: where a trusted evaluation's time goes, part by part (perf_parts.py, in
# each evaluator's record), at the defaults and at settings that would cut it, beside the
# task's own harness run directly; then the GPU adversary suite at one such setting, with the
# untouched copy in the same call as its control (a setting that changes the timing is a change
# to the trust code: it counts only once the attacks have run against it on the device).
#
# usage: sudo bash ci/gpu/cost-parts.sh OUT [TASK_DIR] [AKA_TASKS]
#   TASK_DIR: the task timed by the cost step (default tasks/triton2triton/arena/add_rmsnorm,
#   the graph-timed sample of 2026-11-28 and 2026-11-29 cost figures; an AgentKernelArena task
#   materialized with arena's harnesses works too, its candidate an untouched copy).
#   AKA_TASKS: the suite's tasks (`arenactl task materialize --harnesses tasks/aka-harnesses`);
#   ARENA_SUITE_TASKS picks them (default triton2triton/vllm/triton_layernorm_gated).
#   ARENA_STEPS=cost,suite (default: cost) picks the steps; each takes minutes.
#   ARENA_VARIANTS: PerfSettings fields to try, JSON objects separated by ';' (default
#   '{"target_batch_ms": 5}'); the suite runs at ARENA_SUITE_PERF (default: the first variant).
#   ARENA_BENCH_PAIRS: pairs per configuration of the cost step (default 10, the runner's).
#   ARENA_BEFORE=DIR: the evaluator files of an earlier commit (`git archive REV
#   crates/arena-eval/trusted/arena_trusted`, carried), timed too at the defaults in the cost
#   step, and the suite's untouched copy evaluated by it too (`--evaluator`): a change's
#   before and after in the same call.
# Writes OUT/cost-default, OUT/cost-before and OUT/cost-K (ci/bench/trusted-overhead.py, the
# K-th variant) and OUT/suite (ci/gpu/adversary-suite.py); each prints its table and parts.
set -euo pipefail
out=$1
here=$(cd "$(dirname "$0")/../.." && pwd)
task=${2:-$here/tasks/triton2triton/arena/add_rmsnorm}
tasks=${3:-}
steps=",${ARENA_STEPS:-cost},"
IFS=';' read -r -a variants <<< "${ARENA_VARIANTS:-{\"target_batch_ms\": 5\}}"
suite_perf=${ARENA_SUITE_PERF:-${variants[0]}}
mkdir -p "$out"
# The device's Python (its torch) runs the evaluator and the harness alike.
export ARENA_BENCH_PYTHON=${ARENA_BENCH_PYTHON:-$(command -v python3)}
if [[ $steps == *,cost,* ]]; then
  ARENA_BENCH_SIDES=direct,trusted python3 "$here/ci/bench/trusted-overhead.py" "$out/cost-default" 1 "$task"
  if [[ -n ${ARENA_BEFORE:-} ]]; then
    echo "before: $ARENA_BEFORE"
    ARENA_BENCH_SIDES=trusted ARENA_BENCH_EVALUATOR=$ARENA_BEFORE \
      python3 "$here/ci/bench/trusted-overhead.py" "$out/cost-before" 1 "$task"
  fi
  k=0
  for v in "${variants[@]}"; do
    k=$((k + 1))
    echo "variant $k: $v"
    ARENA_BENCH_SIDES=trusted ARENA_BENCH_PERF="$v" \
      python3 "$here/ci/bench/trusted-overhead.py" "$out/cost-$k" 1 "$task"
  done
fi
if [[ $steps == *,suite,* ]]; then
  if [[ -z $tasks ]]; then
    echo "the suite step needs AKA_TASKS (the third argument)" >&2
    exit 2
  fi
  echo "suite at $suite_perf"
  ids=${ARENA_SUITE_TASKS:-triton2triton/vllm/triton_layernorm_gated}
  ARENA_PERF=$suite_perf python3 "$here/ci/gpu/adversary-suite.py" "$out/suite" "$tasks" \
    --tasks "$ids" --pairs 3 --sessions 3 --cases 0:1
  if [[ -n ${ARENA_BEFORE:-} ]]; then
    ARENA_PERF=$suite_perf python3 "$here/ci/gpu/adversary-suite.py" "$out/suite-before" "$tasks" \
      --tasks "$ids" --attacks untouched --pairs 3 --sessions 3 --cases 0:1 --evaluator "$ARENA_BEFORE"
  fi
fi
