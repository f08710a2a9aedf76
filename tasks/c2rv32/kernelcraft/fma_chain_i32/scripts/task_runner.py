#!/usr/bin/env python3
"""Harness of the fma_chain_i32 task (c2rv32): python3 scripts/task_runner.py compile|correctness|performance

Two ways in. arena's trusted evaluator imports this module for its interface (SOURCE, ENTRY,
TEST_SHAPES, make_inputs, outputs, scalars, reference, check) and runs the kernel in rv32sim, a
cycle-accurate simulation of a PicoRV32 (RV32IM) core: the kernel is called as
ENTRY(input pointers..., output pointers..., scalars...), its output buffers start zeroed, and
its score is the simulated cycle count. Run from the task directory, the command line does the
gates as the AgentKernelArena convention has it (rv32gates, beside rv32sim in the image):
build/{compile,correctness,performance}_report.json, exit 0 on pass, 1 on fail, for the
agent's own checks. Needs NumPy and rv32sim ($RV32SIM_ROOT/lib, default /opt/rv32sim/lib).
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.environ.get("RV32SIM_ROOT", "/opt/rv32sim"), "lib"))
import rv32gates  # noqa: E402

SOURCE = "source/fma_chain_i32.c"
ENTRY = "fma_chain_i32"
DEVICE = "cpu"
TIMING = "cycles"

# Visible test shapes: (n,), the length of every array
TEST_SHAPES = [
    (100,),
    (1000,),
    (4096,),
    (10007,),
    (16384,),
]


def make_inputs(config, seed):
    """a, b, c, d, e: int32 over the whole range (the products wrap)."""
    (n,) = config
    rng = np.random.default_rng(seed)
    return tuple(rng.integers(-2**31, 2**31, size=n, dtype=np.int32) for _ in range(5))


def outputs(config):
    (n,) = config
    return [((n,), np.int32)]


def scalars(config):
    return list(config)  # n


def reference(a, b, c, d, e):
    """y = (a*b + c)*d + e with int32 wraparound (the C code computes in uint32)."""
    a, b, c, d, e = (v.view(np.uint32) for v in (a, b, c, d, e))
    return (((a * b + c) * d + e).view(np.int32),)


check = rv32gates.check_outputs

if __name__ == "__main__":
    sys.exit(rv32gates.main(sys.modules[__name__], sys.argv))
