#!/usr/bin/env python3
"""Harness of the matmul task: python3 scripts/task_runner.py compile|correctness|performance

Two ways in. arena's trusted evaluator imports this module for its interface (SOURCE, ENTRY,
TEST_SHAPES, make_inputs, reference, check) and runs the kernel in a separate, unprivileged
process that it times from outside (config.yaml: trusted_harness). Run from the task
directory, the command line does the same gates in one process, as the AgentKernelArena
convention has it: build/{compile,correctness,performance}_report.json, exit 0 on pass, 1 on
fail — for the agent's own checks. Needs only Python 3's standard library.
"""
import importlib.util
import json
import os
import py_compile
import random
import statistics
import sys
import time
import traceback

SOURCE = "source/matmul.py"
ENTRY = "matmul"
DEVICE = "cpu"

# Visible test shapes: (M, N, K) for an M×K by K×N product
TEST_SHAPES = [
    (16, 16, 16),
    (32, 48, 64),  # rectangular: catches swapped dimensions
    (64, 64, 64),
]
WARMUP_ITERATIONS = 3
BENCHMARK_ITERATIONS = 20


def write_report(name, data):
    os.makedirs("build", exist_ok=True)
    tmp = os.path.join("build", name + ".tmp")
    with open(tmp, "w") as f:
        json.dump(data, f, indent=2)
    os.replace(tmp, os.path.join("build", name))


def load_kernel():
    spec = importlib.util.spec_from_file_location("kernel_under_test", SOURCE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    fn = getattr(module, ENTRY, None)
    if not callable(fn):
        raise AttributeError(f"{SOURCE} defines no callable `{ENTRY}`")
    return fn


def make_inputs(shape, seed):
    """The kernel's arguments: A (M×K) and B (K×N), lists of rows of ints in [-8, 8]."""
    m, n, k = shape
    rng = random.Random(seed)
    values = range(-8, 9)
    a = [rng.choices(values, k=k) for _ in range(m)]
    b = [rng.choices(values, k=n) for _ in range(k)]
    return a, b


def reference(a, b):
    cols = list(zip(*b))
    return [[sum(x * y for x, y in zip(row, col)) for col in cols] for row in a]


def check(got, want):
    if not isinstance(got, list) or len(got) != len(want) or any(
            not isinstance(r, list) or len(r) != len(w) for r, w in zip(got, want)):
        raise AssertionError(f"expected a {len(want)}x{len(want[0])} list of lists")
    for r, (grow, wrow) in enumerate(zip(got, want)):
        c = next((j for j, (g, w) in enumerate(zip(grow, wrow)) if g != w), None)
        if c is not None:
            raise AssertionError(f"C[{r}][{c}] is {grow[c]!r}, expected {wrow[c]}")


def compile_gate():
    try:
        py_compile.compile(SOURCE, doraise=True, cfile=os.path.join("build", "kernel.pyc"))
        load_kernel()
    except Exception as e:  # any failure to build or import the kernel fails the gate
        write_report("compile_report.json", {"status": "fail", "error": f"{type(e).__name__}: {e}"})
        return 1
    write_report("compile_report.json", {"status": "ok", "error": None})
    return 0


def correctness_gate():
    try:
        fn = load_kernel()
        for i, shape in enumerate(TEST_SHAPES):
            a, b = make_inputs(shape, seed=1000 + i)
            try:
                check(fn([row[:] for row in a], [row[:] for row in b]), reference(a, b))
            except AssertionError as e:
                raise AssertionError(f"shape {shape}: {e}") from None
    except Exception as e:
        write_report("correctness_report.json", {
            "status": "fail", "error": f"{type(e).__name__}: {e}", "num_shapes": len(TEST_SHAPES)})
        return 1
    write_report("correctness_report.json", {"status": "ok", "error": None, "num_shapes": len(TEST_SHAPES)})
    return 0


def performance_gate():
    cases = []
    failed = False
    fn = None
    try:
        fn = load_kernel()
    except Exception:
        traceback.print_exc()
    for i, shape in enumerate(TEST_SHAPES):
        case = {"test_case_id": f"perf{i + 1}", "execution_time_ms": -1.0, "params": {"shape": list(shape)}}
        try:
            if fn is None:
                raise RuntimeError("kernel failed to load")
            a, b = make_inputs(shape, seed=2000 + i)
            for _ in range(WARMUP_ITERATIONS):
                fn(a, b)
            times = []
            for _ in range(BENCHMARK_ITERATIONS):
                t0 = time.perf_counter_ns()
                fn(a, b)
                times.append((time.perf_counter_ns() - t0) / 1e6)
            # The median resists the outliers a shared CPU produces; the spread is reported too.
            case["execution_time_ms"] = statistics.median(times)
            case["stats"] = {"min_ms": min(times), "mean_ms": statistics.fmean(times),
                             "stdev_ms": statistics.pstdev(times), "iterations": len(times)}
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
