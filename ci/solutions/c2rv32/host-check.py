#!/usr/bin/env python3
"""Host-side check of the c2rv32 sample tasks, without the RV32 simulator.

Builds each task's baseline kernel and the fixtures (kernelcraft/<task>/<task>.c, the faster kernel; ../wrong/c2rv32/…, the wrong one) with the host's gcc
as shared libraries, calls them through ctypes on the tasks' own inputs (make_inputs, outputs,
scalars from tasks/c2rv32/kernelcraft/<task>/scripts/task_runner.py) and compares with the
tasks' NumPy references via their check(). The visible shapes and some odd extra sizes are run.
Inputs and outputs sit flush against an inaccessible guard page, so a read or write past the
end of any array crashes (SIGSEGV) instead of passing silently. Pass: the baseline and fast.c
match on every shape, wrong.c fails on every visible shape.

    python3 ci/solutions/c2rv32/host-check.py        (from the repository root, or anywhere)
"""
import ctypes
import faulthandler
import importlib.util
import os
import subprocess
import sys
import tempfile

import numpy as np

sys.dont_write_bytecode = True  # loading the task runners leaves no __pycache__ behind
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
TASKS = os.path.join(ROOT, "tasks", "c2rv32", "kernelcraft")
# The task runners import rv32gates from $RV32SIM_ROOT/lib: its sources serve (no simulator
# runs here).
os.environ.setdefault("RV32SIM_ROOT", os.path.join(ROOT, "images", "rv32sim"))

# Odd sizes beyond the visible shapes (unseen configurations will use such sizes).
EXTRA = {
    "gemm_i8": [(1, 1, 1), (3, 7, 5), (7, 3, 33), (33, 5, 3), (5, 33, 7), (2, 4, 1), (1, 9, 2)],
    "conv1d_i16": [(1, 1), (3, 1), (3, 3), (7, 3), (8, 4), (33, 7), (100, 33), (10, 2)],
    "fma_chain_i32": [(1,), (3,), (7,), (33,), (100,)],
    "sum_sq_i16": [(1,), (3,), (7,), (33,), (100,)],
    "ffn_i8": [(1, 1, 1), (3, 7, 5), (7, 3, 33), (33, 5, 3), (100, 17, 7), (2, 4, 1)],
}
CFLAGS = ["-O2", "-shared", "-fPIC", "-ffreestanding", "-fno-tree-loop-distribute-patterns",
          "-Wall", "-Wextra", "-Werror"]

libc = ctypes.CDLL(None, use_errno=True)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                      ctypes.c_long]
libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
PAGE = os.sysconf("SC_PAGE_SIZE")


def guarded(shape, dtype, fill=None):
    """A zeroed (or `fill`-ed) array whose last byte is followed by a PROT_NONE page."""
    dtype = np.dtype(dtype)
    nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    span = -(-nbytes // PAGE) * PAGE
    addr = libc.mmap(None, span + PAGE, 3, 0x22, -1, 0)  # PROT_READ|WRITE, MAP_PRIVATE|ANONYMOUS
    if addr in (None, ctypes.c_void_p(-1).value) or libc.mprotect(addr + span, PAGE, 0) != 0:
        raise OSError(ctypes.get_errno(), "mmap/mprotect failed")
    buf = (ctypes.c_char * nbytes).from_address(addr + span - nbytes)
    arr = np.frombuffer(buf, dtype=dtype).reshape(shape)
    arr[...] = 0 if fill is None else fill
    return arr


def load_runner(task):
    path = os.path.join(TASKS, task, "scripts", "task_runner.py")
    spec = importlib.util.spec_from_file_location(f"runner_{task}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def build(src, out):
    subprocess.run(["gcc", *CFLAGS, src, "-o", out], check=True)
    return ctypes.CDLL(out)


def call(lib, runner, config, seed):
    inputs = runner.make_inputs(config, seed)
    outs = runner.outputs(config)
    scalars = runner.scalars(config)
    nargs = len(inputs) + len(outs) + len(scalars)
    assert nargs <= 8, f"{nargs} kernel arguments, at most 8 fit ilp32's argument registers"
    ins = [guarded(a.shape, a.dtype, a) for a in inputs]
    got = [guarded(shape, dtype) for shape, dtype in outs]
    fn = lib[runner.ENTRY]
    fn.restype = None
    fn.argtypes = [ctypes.c_void_p] * (len(ins) + len(got)) + [ctypes.c_int] * len(scalars)
    fn(*[a.ctypes.data for a in ins + got], *scalars)
    for a, b in zip(inputs, ins):
        assert np.array_equal(a, b), "the kernel wrote to an input"
    want = runner.reference(*inputs)
    assert [(w.shape, w.dtype) for w in want] == [(tuple(s), np.dtype(d)) for s, d in outs], \
        "reference() does not match outputs()"
    runner.check(got, want)


def main():
    faulthandler.enable()
    failures, rows = 0, []
    with tempfile.TemporaryDirectory() as tmp:
        for task in EXTRA:
            runner = load_runner(task)
            for seed in (1, 2):  # make_inputs must be deterministic
                assert all(np.array_equal(x, y) for x, y in zip(
                    runner.make_inputs(runner.TEST_SHAPES[0], seed),
                    runner.make_inputs(runner.TEST_SHAPES[0], seed)))
            assert len(runner.TEST_SHAPES) == 5
            libs = {
                "baseline": build(os.path.join(TASKS, task, runner.SOURCE), f"{tmp}/{task}-b.so"),
                "fast": build(os.path.join(HERE, "kernelcraft", task, task + ".c"), f"{tmp}/{task}-f.so"),
                "wrong": build(os.path.join(HERE, "..", "wrong", "c2rv32", "kernelcraft", task, task + ".c"), f"{tmp}/{task}-w.so"),
            }
            configs = [(c, True) for c in runner.TEST_SHAPES] + [(c, False) for c in EXTRA[task]]
            for i, (config, visible) in enumerate(configs):
                row = [task, ("" if visible else "+") + str(config)]
                for variant, lib in libs.items():
                    try:
                        call(lib, runner, config, seed=1000 + i)
                        ok = True
                    except AssertionError as e:
                        ok = False
                        if variant != "wrong":
                            print(f"{task} {config} {variant}: {e}", file=sys.stderr)
                    if variant == "wrong":
                        failures += visible and ok
                        row.append("fails" if not ok else "ok (!)" if visible else "ok")
                    else:
                        failures += not ok
                        row.append("ok" if ok else "FAIL")
                rows.append(row)
    widths = [max(len(r[k]) for r in rows + [["task", "config", "baseline", "fast", "wrong"]])
              for k in range(5)]
    for r in [["task", "config", "baseline", "fast", "wrong"]] + rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths)))
    print("(+ marks extra, unseen-style sizes; the wrong kernel must fail on every visible shape)")
    print("PASS" if failures == 0 else f"FAIL: {failures} unexpected result(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
