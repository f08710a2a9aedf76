#!/usr/bin/env python3
"""Harness of the gemm_i8 task (c2rv32): python3 scripts/task_runner.py compile|correctness|performance

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

SOURCE = "source/gemm_i8.c"
ENTRY = "gemm_i8"
DEVICE = "cpu"
TIMING = "cycles"

# Visible test shapes: (M, N, K); C[M,N] = A[M,K] @ B[K,N]
TEST_SHAPES = [
    (8, 8, 8),
    (16, 16, 16),
    (16, 32, 8),
    (32, 16, 16),
    (24, 24, 32),
]


def make_inputs(config, seed):
    """A[M,K] and B[K,N]: int8 over the whole range."""
    m, n, k = config
    rng = np.random.default_rng(seed)
    return (rng.integers(-128, 128, size=(m, k), dtype=np.int8),
            rng.integers(-128, 128, size=(k, n), dtype=np.int8))


def outputs(config):
    m, n, _ = config
    return [((m, n), np.int32)]


def scalars(config):
    return list(config)  # M, N, K


def reference(a, b):
    """C = A @ B in int32 (|sum| < 2**31 for K < 131072, so no wrap in practice)."""
    return ((a.astype(np.int64) @ b.astype(np.int64)).astype(np.int32),)


check = rv32gates.check_outputs

if __name__ == "__main__":
    sys.exit(rv32gates.main(sys.modules[__name__], sys.argv))
