#!/usr/bin/env bash
# Calls one after another, on one GPU, without containers: the attacks that overlap or merge a
# timed batch's calls (ci/gpu/adversaries: overlap_streams, overlap_events, graph_hook,
# defer_merge, batch_skip, spread_chain, forge_stamps, and the persistent kernels' precompute),
# each beside an untouched copy measured in the same call; the torch-only attack against an
# earlier evaluator too (its files from `git archive REV crates/arena-eval/trusted/arena_trusted`),
# so that before and after are one call's; and the sample tasks' reference solutions and the
# trusted gate's cost under both evaluators.
#
# usage: sudo bash ci/gpu/call-order.sh OUT TASKS_ROOT [OLD_EVALUATOR_DIR]
#   TASKS_ROOT: tasks naming a trusted harness, laid out by id (`arenactl task materialize
#   --harnesses tasks/aka-harnesses`, `arenactl task import kernelbench`).
#   ARENA_STEPS (default attacks,before): which of attacks, before, solutions, cost to run.
#   ARENA_ORDER_TASKS: ids below TASKS_ROOT, comma-separated (default triton_layernorm_gated).
#   ARENA_ORDER_ATTACKS: the attacks of the `attacks` step (default: the class above).
#   ARENA_ORDER_PAIRS / ARENA_ORDER_SESSIONS: pairs and sessions per evaluation (3 / 3).
set -euo pipefail
out=$(mkdir -p "$1" && cd "$1" && pwd)
tasks=$(cd "$2" && pwd)
old=${3:-}
here=$(cd "$(dirname "$0")/../.." && pwd)
steps=",${ARENA_STEPS:-attacks,before},"
ids=${ARENA_ORDER_TASKS:-triton_layernorm_gated}
attacks=${ARENA_ORDER_ATTACKS:-noop_wrap,overlap_streams,overlap_events,graph_hook,defer_merge,spread_chain,forge_stamps,batch_skip,precompute,side_stream,sync_noop}
pairs=${ARENA_ORDER_PAIRS:-3}
sessions=${ARENA_ORDER_SESSIONS:-3}
export PYTHONUNBUFFERED=1
python3 -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__, torch.cuda.get_device_name(0))'
if [[ $steps == *,attacks,* ]]; then
  echo "== attacks (this evaluator)"
  python3 "$here/ci/gpu/adversary-suite.py" "$out/attacks" "$tasks" --tasks "$ids" --attacks "$attacks" \
    --pairs "$pairs" --sessions "$sessions" --cases 0:1
fi
if [[ $steps == *,before,* && -n $old ]]; then
  echo "== before: the torch-only attack against $old"
  python3 "$here/ci/gpu/adversary-suite.py" "$out/before" "$tasks" --tasks "$ids" \
    --attacks overlap_streams --pairs "$pairs" --sessions "$sessions" --cases 0:1 --evaluator "$old"
fi
if [[ $steps == *,solutions,* ]]; then
  # The sample tasks' reference solutions (ci/solutions) under both evaluators: an honest faster
  # kernel reads what it read before.
  for ev in new ${old:+old}; do
    echo "== solutions ($ev evaluator)"
    dir=""
    [ "$ev" = old ] && dir=$old
    ARENA_EVALUATOR_DIR=$dir ARENA_GPU_SESSIONS=${ARENA_SOLUTION_SESSIONS:-2} \
      python3 "$here/ci/gpu/trusted-check.py" "$out/solutions-$ev" "${ARENA_SOLUTION_PAIRS:-4}" \
      add_rmsnorm/solution,row_softmax/solution
  done
fi
if [[ $steps == *,cost,* ]]; then
  echo "== cost: add_rmsnorm's trusted gate, this evaluator and the old one"
  export ARENA_BENCH_PYTHON=${ARENA_BENCH_PYTHON:-$(command -v python3)}
  ARENA_BENCH_SIDES=trusted python3 "$here/ci/bench/trusted-overhead.py" "$out/cost-new" 1 \
    "$here/tasks/triton2triton/arena/add_rmsnorm"
  if [[ -n $old ]]; then
    ARENA_BENCH_SIDES=trusted ARENA_BENCH_EVALUATOR=$old python3 "$here/ci/bench/trusted-overhead.py" \
      "$out/cost-old" 1 "$here/tasks/triton2triton/arena/add_rmsnorm"
  fi
fi
