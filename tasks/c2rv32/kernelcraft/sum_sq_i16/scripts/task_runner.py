#!/usr/bin/env python3
"""Harness of the sum_sq_i16 task (c2rv32): python3 scripts/task_runner.py compile|correctness|performance

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

SOURCE = "source/sum_sq_i16.c"
ENTRY = "sum_sq_i16"
DEVICE = "cpu"
TIMING = "cycles"

# Visible test shapes: (n,), the length of x
TEST_SHAPES = [
    (256,),
    (1000,),
    (4099,),
    (20000,),
    (50000,),
]


def make_inputs(config, seed):
    """x: int16 over the whole range, so the sum wraps around int32 (on every visible shape)."""
    (n,) = config
    return (np.random.default_rng(seed).integers(-32768, 32768, size=n, dtype=np.int16),)


def outputs(config):
    return [((1,), np.int32)]


def scalars(config):
    return list(config)  # n


def reference(x):
    """out[0] = sum of x[i]*x[i], wrapped to int32 (the C code accumulates in uint32)."""
    x = x.astype(np.int64)
    return (np.array([np.sum(x * x)], dtype=np.int64).astype(np.int32),)


check = rv32gates.check_outputs

if __name__ == "__main__":
    sys.exit(rv32gates.main(sys.modules[__name__], sys.argv))
