#!/usr/bin/env python3
"""Harness of the conv1d_i16 task (c2rv32): python3 scripts/task_runner.py compile|correctness|performance

Two ways in. arena's trusted evaluator imports this module for its interface (SOURCE, ENTRY,
TEST_SHAPES, make_inputs, outputs, scalars, reference, check) and runs the kernel in rv32sim, a
cycle-accurate simulation of a PicoRV32 (RV32IM) core: the kernel is called as
ENTRY(input pointers..., output pointers..., scalars...), its output buffers start zeroed, and
its score is the simulated cycle count. Run from the task directory, the command line does the
same gates in one process, as the AgentKernelArena convention has it:
build/{compile,correctness,performance}_report.json, exit 0 on pass, 1 on fail — for the
agent's own checks. Needs NumPy and rv32sim ($RV32SIM_ROOT/lib, default /opt/rv32sim/lib).
"""
import json
import os
import sys

import numpy as np

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


def check(got, want):
    """Raises AssertionError naming the first element that differs (row-major order)."""
    if len(got) != len(want):
        raise AssertionError(f"expected {len(want)} output arrays, got {len(got)}")
    for o, (g, w) in enumerate(zip(got, want)):
        g = np.asarray(g)
        if g.size != w.size:
            raise AssertionError(f"output {o} has {g.size} elements, expected {w.size}")
        g = g.reshape(w.shape)
        bad = np.argwhere(g != w)
        if len(bad):
            at = tuple(int(v) for v in bad[0])
            raise AssertionError(f"output {o} element {list(at)} is {int(g[at])}, expected "
                                 f"{int(w[at])} ({len(bad)} of {w.size} elements differ)")


def write_report(name, data):
    os.makedirs("build", exist_ok=True)
    tmp = os.path.join("build", name + ".tmp")
    with open(tmp, "w") as f:
        json.dump(data, f, indent=2)
    os.replace(tmp, os.path.join("build", name))


def simulator():
    sys.path.insert(0, os.path.join(os.environ.get("RV32SIM_ROOT", "/opt/rv32sim"), "lib"))
    import rv32sim
    return rv32sim


def simulate(sim, program, config, seed):
    inputs = make_inputs(config, seed)
    workdir = os.path.join("build", "run")
    os.makedirs(workdir, exist_ok=True)
    got, cycles = sim.run(program, list(inputs), outputs(config), scalars(config), workdir)
    return inputs, got, cycles


def compile_gate():
    try:
        sim = simulator()
        sim.build(SOURCE, "build", ENTRY)
    except Exception as e:  # a compiler error (BuildError: gcc's stderr) or a missing simulator
        write_report("compile_report.json", {"status": "fail", "error": f"{type(e).__name__}: {e}"})
        return 1
    write_report("compile_report.json", {"status": "ok", "error": None})
    return 0


def correctness_gate():
    try:
        sim = simulator()
        program = sim.build(SOURCE, "build", ENTRY)
        for i, config in enumerate(TEST_SHAPES):
            inputs, got, _ = simulate(sim, program, config, seed=1000 + i)
            try:
                check(got, reference(*inputs))
            except AssertionError as e:
                raise AssertionError(f"shape {config}: {e}") from None
    except Exception as e:
        write_report("correctness_report.json", {
            "status": "fail", "error": f"{type(e).__name__}: {e}", "num_shapes": len(TEST_SHAPES)})
        return 1
    write_report("correctness_report.json", {"status": "ok", "error": None, "num_shapes": len(TEST_SHAPES)})
    return 0


def performance_gate():
    cases, failed, program = [], False, None
    for i, config in enumerate(TEST_SHAPES):
        case = {"test_case_id": f"perf{i + 1}", "execution_time_ms": -1.0, "params": {"shape": list(config)}}
        try:
            sim = simulator()
            program = program or sim.build(SOURCE, "build", ENTRY)
            _, _, cycles = simulate(sim, program, config, seed=2000 + i)  # deterministic: one run
            # Simulated time at a nominal 100 MHz clock: 100,000 cycles per millisecond.
            case["execution_time_ms"] = cycles / 100000.0
            case["cycles"] = cycles
        except Exception as e:
            failed = True
            case["error"] = f"{type(e).__name__}: {e}"
        cases.append(case)
    write_report("performance_report.json", cases)
    return 1 if failed else 0


def main(argv):
    gates = {"compile": compile_gate, "correctness": correctness_gate, "performance": performance_gate}
    if len(argv) != 2 or argv[1] not in gates:
        print(f"usage: {argv[0]} compile|correctness|performance", file=sys.stderr)
        return 2
    return gates[argv[1]]()


if __name__ == "__main__":
    sys.exit(main(sys.argv))
