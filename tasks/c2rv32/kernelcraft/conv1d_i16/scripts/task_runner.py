#!/usr/bin/env python3
"""Harness of the conv1d_i16 task (c2rv32): python3 scripts/task_runner.py compile|correctness|performance

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

SOURCE = "source/conv1d_i16.c"
ENTRY = "conv1d_i16"
DEVICE = "cpu"
TIMING = "cycles"

# Visible test shapes: (N, K); y has N elements, w has K, x has L = N + K - 1. Declared by
# the output's length, not the input's, so that every positive (N, K) an unseen configuration
# may pick is a valid one.
TEST_SHAPES = [
    (62, 3),
    (250, 7),
    (996, 5),
    (1009, 16),
    (2034, 15),
]


def make_inputs(config, seed):
    """x[N + K - 1] and w[K]: int16 in [-2048, 2047], so a sum of K < 512 products fits in int32."""
    n, k = config
    rng = np.random.default_rng(seed)
    return (rng.integers(-2048, 2048, size=n + k - 1, dtype=np.int16),
            rng.integers(-2048, 2048, size=k, dtype=np.int16))


def outputs(config):
    n, _ = config
    return [((n,), np.int32)]


def scalars(config):
    n, k = config
    return [n + k - 1, k]  # L, K


def reference(x, w):
    """y[i] = sum_k x[i+k] * w[k] for i in [0, L-K] (valid correlation), in int32."""
    windows = np.lib.stride_tricks.sliding_window_view(x.astype(np.int64), w.size)
    return ((windows @ w.astype(np.int64)).astype(np.int32),)


check = rv32gates.check_outputs

if __name__ == "__main__":
    sys.exit(rv32gates.main(sys.modules[__name__], sys.argv))
