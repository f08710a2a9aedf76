#!/usr/bin/env bash
# the zeros and kept-answer probes (admits.py) attacked on a GPU. `zeros.py`
# (computes nothing after its first call) and `memo_address.py` (hands back outputs kept by
# input address) against derived vLLM harnesses whose own check passes zeros
# (kda_recompute_wu, fla_fused_recurrent) or other inputs' outputs (prepare_pos_seq_lens),
# and one whose check tells zeros apart (expand), each beside an untouched copy measured in
# the same call (ci/gpu/adversary-suite.py). Give EVALUATOR (an arena_trusted directory, e.g.
# `git archive 2900ad2^ crates/arena-eval/trusted`) for the evaluator before the probes. About
# 5 minutes on an H200 (where no speedup is credited nothing is timed; before, 8).
#
# usage: bash ci/gpu/zeros-run.sh TASKS OUT [EVALUATOR]
#   TASKS: `arenactl task materialize --aka-root AKA --out TASKS` of those four tasks (derived
#   harnesses), or KernelBench's level1 directory of an import (below)
set -u
TASKS=$1 OUT=$2
ev=()
[ $# -ge 3 ] && ev=(--evaluator "$3")
one() { # task attacks seconds (a task not under TASKS is passed over)
  [ -d "$TASKS/$1" ] || return 0
  timeout -k 5 "$3" python3 ci/gpu/adversary-suite.py "$OUT" "$TASKS" --tasks "$1" --attacks "$2" \
    --pairs 3 --sessions 3 --cases 0:1 --timeout 150 "${ev[@]}" --label="-$1" 2>&1 | grep '^|'
}
one triton_kda_recompute_wu zeros,memo_address 330
one triton_prepare_pos_seq_lens memo_address,zeros 200
one triton_fla_fused_recurrent zeros 200
one triton_expand zeros 120
# KernelBench's level 1 (`arenactl task import kernelbench --out TASKS` of 23_Softmax and
# 19_ReLU): 6 GiB references, probed with expanded zeros since 2026-11-28. 23_Softmax's outputs
# are each under its atol (no speedup credited); 19_ReLU's are not (zeros fail correctness).
one 23_Softmax zeros 300
one 19_ReLU zeros 300
