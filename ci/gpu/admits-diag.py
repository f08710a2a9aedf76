#!/usr/bin/env python3
"""Why the evaluator's zeros probe (admits.py) says what it says on a derived harness, on this
machine's GPU: for each of the first --cases configurations and --seeds seeds of each task, the
correctness gate's reference (make_case, as measure.py's batch makes it), the largest
magnitude of each output the original gave, and the probe's outcome with the exception that
ended it (admits_zeros returns False on any exception; this prints which).

usage: python3 ci/gpu/admits-diag.py TASK_DIR... [--cases N] [--seeds K]"""
import argparse
import os
import sys
import traceback

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "../../crates/arena-eval/trusted/arena_trusted"))
import torch  # noqa: E402

import admits  # noqa: E402
import harness as evaluator_harness  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("tasks", nargs="+")
    ap.add_argument("--cases", type=int, default=1)
    ap.add_argument("--seeds", type=int, default=4)
    a = ap.parse_args()
    for t in a.tasks:
        h = evaluator_harness.Harness(os.path.join(t, "arena_harness.py"), accelerator=True)
        d = h.module.DERIVED
        print(f"== {os.path.basename(t)}: warnings {[w[:120] for w in d.warnings]}", flush=True)
        for config in d.cases[: a.cases]:
            for seed in range(a.seeds):
                _, want = d.make_case(config, 1000 + seed, "correctness")
                vals = want.outputs_kept()
                mags = {str(k): (tuple(v.shape), str(v.dtype), float(v.detach().abs().max()) if v.numel() else 0.0)
                        for k, v in vals.items() if isinstance(v, torch.Tensor)}
                zeros, _ = admits.zeros_of(vals)
                try:
                    d.check_kept(admits._Zeroed(zeros), want)
                    outcome = "zeros PASS the check"
                except AssertionError as e:
                    outcome = f"told apart: {str(e)[:200]}"
                except Exception:
                    outcome = "EXCEPTION " + traceback.format_exc()[-1500:]
                print(f"  {config!r} seed {seed}: {outcome}\n     outputs {mags}", flush=True)


if __name__ == "__main__":
    main()
