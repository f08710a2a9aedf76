#!/usr/bin/env python3
"""arena's trusted harnesses for AgentKernelArena tasks (tasks/aka-harnesses), checked against
the tasks' own kernels on a machine without a GPU: Triton's interpreter (TRITON_INTERPRET=1)
runs each kernel on CPU tensors. For every harness and every visible shape: the untouched
kernel's output (its return value, or the arguments OUTPUT_ARGS names) passes the harness's
check against its reference (made, as the evaluator makes it, from copies of the output
arguments), and neither the reference of other inputs nor, for OUTPUT_ARGS, the output
arguments as given (the kernel not called) does: the check can fail.
Exit 1 on any failure. Run by ci/bench/cuda-pytorch.sh in a container of that image.

usage: python3 ci/aka-harness-check.py HARNESS_DIR AKA_TASKS_DIR
"""
import contextlib
import glob
import importlib.util
import os
import sys
import time
import types

os.environ["TRITON_INTERPRET"] = "1"
import torch  # noqa: E402
import triton  # noqa: E402

# The interpreter cannot benchmark: an autotuned kernel keeps its first configuration.
_autotune = triton.autotune
triton.autotune = lambda configs, key, **kw: _autotune(configs=configs[:1], key=key, **kw)
# A kernel that enters its tensor's CUDA device (layernorm_gated) runs on the CPU here.
torch.cuda.device = lambda index: contextlib.nullcontext()
# rocmbench kernel parts import pytest at the top (their tests use it); a task's image has it,
# the cuda-pytorch image need not: an empty module stands in, as nothing above the rule uses it.
if importlib.util.find_spec("pytest") is None:
    sys.modules["pytest"] = types.ModuleType("pytest")
# The evaluator's own default check (harness.tensor_check), as it applies it.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../crates/arena-eval/trusted/arena_trusted"))
import entry  # noqa: E402  (how the kernel process loads and calls a kernel)
import harness as evaluator_harness  # noqa: E402


def load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    return m


def check_task(h, task_dir):
    h.DEVICE = "cpu"
    sys.path.insert(0, os.path.dirname(os.path.join(task_dir, h.SOURCE)))
    try:
        module = entry.load_module(os.path.join(task_dir, h.SOURCE), getattr(h, "KERNEL_PART", False))
        fn = getattr(module, h.ENTRY)
    finally:
        sys.path.pop(0)
    if getattr(h, "LAUNCH", False):
        fn = entry.Launch(fn)
    check = getattr(h, "check", None) or evaluator_harness.tensor_check(getattr(h, "ATOL", 1e-5), getattr(h, "RTOL", 1e-5))
    outs = getattr(h, "OUTPUT_ARGS", None) or ()

    def copies(args):
        return tuple(a.clone() if isinstance(a, torch.Tensor) else a for a in args)

    def outputs(result, args):
        if not outs:
            return result
        return args[outs[0]] if len(outs) == 1 else tuple(args[j] for j in outs)

    def refused(got, want, what):
        try:
            check(got, want)
        except AssertionError:
            return
        raise AssertionError(f"shape {shape!r}: the check passed {what}")

    for i, shape in enumerate(h.TEST_SHAPES):
        args = h.make_inputs(shape, 1000 + i)
        want = h.reference(*copies(args))
        given = copies(args)
        got = outputs(fn(*given), given)
        check(got, want)
        refused(got, h.reference(*copies(h.make_inputs(shape, 5000 + i))), "the reference of other inputs")
        if outs:
            untouched = copies(args)
            refused(outputs(None, untouched), want, "the output arguments as given (the kernel not called)")


def main(harness_dir, tasks_dir):
    failed = 0
    harnesses = sorted(glob.glob(os.path.join(harness_dir, "**", "*.py"), recursive=True))
    for path in harnesses:
        task = os.path.relpath(path, harness_dir)[: -len(".py")]
        t0 = time.time()
        try:
            h = load(path, "harness")
            check_task(h, os.path.join(tasks_dir, task))
            print(f"ok    {task}: {len(h.TEST_SHAPES)} shapes ({time.time() - t0:.1f} s)", flush=True)
        except Exception as e:
            failed += 1
            print(f"FAIL  {task}: {type(e).__name__}: {e}", flush=True)
    print(f"{len(harnesses) - failed} of {len(harnesses)} harnesses pass their task's kernel")
    return 1 if failed or not harnesses else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
