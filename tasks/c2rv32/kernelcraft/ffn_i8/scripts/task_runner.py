#!/usr/bin/env python3
"""Harness of the ffn_i8 task (c2rv32): python3 scripts/task_runner.py compile|correctness|performance

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

SOURCE = "source/ffn_i8.c"
ENTRY = "ffn_i8"
DEVICE = "cpu"
TIMING = "cycles"

# Visible test shapes: (D, H, O): x[D] -> h[H] -> y[O]
TEST_SHAPES = [
    (16, 16, 8),
    (64, 48, 10),
    (100, 64, 16),
    (128, 128, 32),
    (256, 128, 64),
]


def make_inputs(config, seed):
    """x[D], W1[H,D], b1[H], W2[O,H], b2[O] and dims = [D, H, O] (int32; it keeps the
    kernel at 8 arguments). W1 is drawn from [-16, 15] so that h spreads over [0, 127] rather
    than saturating; x and W2 span int8, b1 [-2048, 2047], b2 [-65536, 65535]."""
    d, h, o = config
    rng = np.random.default_rng(seed)
    x = rng.integers(-128, 128, size=d, dtype=np.int8)
    w1 = rng.integers(-16, 16, size=(h, d), dtype=np.int8)
    b1 = rng.integers(-2048, 2048, size=h, dtype=np.int32)
    w2 = rng.integers(-128, 128, size=(o, h), dtype=np.int8)
    b2 = rng.integers(-65536, 65536, size=o, dtype=np.int32)
    return (x, w1, b1, w2, b2, np.array([d, h, o], dtype=np.int32))


def outputs(config):
    _, h, o = config
    return [((o,), np.int32), ((h,), np.int8)]  # y, then the hidden activations h


def scalars(config):
    return []


def reference(x, w1, b1, w2, b2, dims):
    """h = min(max(W1 @ x + b1, 0) >> 7, 127) as int8; y = W2 @ h + b2 in int32."""
    acc = w1.astype(np.int64) @ x.astype(np.int64) + b1
    h = np.minimum(np.maximum(acc, 0) >> 7, 127).astype(np.int8)
    y = (w2.astype(np.int64) @ h.astype(np.int64) + b2).astype(np.int32)
    return (y, h)


check = rv32gates.check_outputs

if __name__ == "__main__":
    sys.exit(rv32gates.main(sys.modules[__name__], sys.argv))
