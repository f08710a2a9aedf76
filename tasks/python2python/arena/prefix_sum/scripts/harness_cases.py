#!/usr/bin/env python3
"""Harness of the prefix_sum task: python3 scripts/task_runner.py compile|correctness|performance

Two ways in. arena's trusted evaluator imports this module for its interface (SOURCE, ENTRY,
TEST_SHAPES, make_inputs, reference, check) and runs the kernel in a separate, unprivileged
process that it times from outside (config.yaml: trusted_harness). Run from the task
directory, the command line does the same gates in one process, as the AgentKernelArena
convention has it: build/{compile,correctness,performance}_report.json, exit 0 on pass, 1 on
fail — for the agent's own checks. Needs only Python 3's standard library.
"""
import array
import importlib.util
import itertools
import json
import os
import py_compile
import random
import statistics
import sys
import time

SOURCE = "source/prefix_sum.py"
ENTRY = "prefix_sum"
DEVICE = "cpu"

# Visible test shapes: (number of elements,)
TEST_SHAPES = [
    (1000,),
    (10000,),
    (100000,),
]
WARMUP_ITERATIONS = 3
BENCHMARK_ITERATIONS = 20


def make_inputs(shape, seed):
    """The kernel's arguments: an array('q') of n integers in [-32768, 32767] from `seed`."""
    (n,) = shape
    values = array.array("h", random.Random(seed).randbytes(2 * n))
    return (array.array("q", values),)


def reference(xs):
    return list(itertools.accumulate(xs))


def check(got, want):
    if not isinstance(got, (list, tuple, array.array)) or len(got) != len(want):
        raise AssertionError(f"expected a sequence of {len(want)} ints")
    got = list(got)
    bad = next((j for j, (g, w) in enumerate(zip(got, want)) if g != w), None)
    if bad is not None:
        raise AssertionError(f"element {bad} is {got[bad]!r}, expected {want[bad]}")


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
            (xs,) = make_inputs(shape, seed=1000 + i)
            try:
                check(fn(array.array("q", xs)), reference(xs))
            except AssertionError as e:
                raise AssertionError(f"shape {shape}: {e}") from None
    except Exception as e:
        write_report("correctness_report.json", {
            "status": "fail", "error": f"{type(e).__name__}: {e}", "num_shapes": len(TEST_SHAPES)})
        return 1
    write_report("correctness_report.json", {"status": "ok", "error": None, "num_shapes": len(TEST_SHAPES)})
    return 0


def performance_gate():
    cases, failed = [], False
    for i, shape in enumerate(TEST_SHAPES):
        case = {"test_case_id": f"perf{i + 1}", "execution_time_ms": -1.0, "params": {"shape": list(shape)}}
        try:
            fn = load_kernel()
            (xs,) = make_inputs(shape, seed=2000 + i)
            for _ in range(WARMUP_ITERATIONS):
                fn(xs)
            times = []
            for _ in range(BENCHMARK_ITERATIONS):
                t0 = time.perf_counter_ns()
                fn(xs)
                times.append((time.perf_counter_ns() - t0) / 1e6)
            case["execution_time_ms"] = statistics.median(times)
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

TEST_SHAPES = TEST_SHAPES[0:1:None]
