#!/usr/bin/env python3
"""Harness of the sum_squares task: python3 scripts/task_runner.py compile|correctness|performance

Run from the task directory. Writes build/compile_report.json, build/correctness_report.json or
build/performance_report.json and exits 0 on pass, 1 on fail (AgentKernelArena convention).
The kernel is imported into this process and timed with time.perf_counter_ns, as harnesses of
this convention do. Needs only Python 3's standard library.
"""
import array
import importlib.util
import json
import os
import py_compile
import random
import statistics
import sys
import time

SOURCE = "source/sum_squares.py"
ENTRY = "sum_squares"

# Visible test shapes: (number of elements,)
TEST_SHAPES = [
    (100000,),
    (300000,),
    (1000000,),
]
WARMUP_ITERATIONS = 2
BENCHMARK_ITERATIONS = 10


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


def make_input(shape, seed):
    (n,) = shape
    return array.array("h", random.Random(seed).randbytes(2 * n)).tolist()


def reference(xs):
    return sum(x * x for x in xs)


def compile_gate():
    try:
        py_compile.compile(SOURCE, doraise=True, cfile=os.path.join("build", "kernel.pyc"))
        load_kernel()
    except Exception as e:
        write_report("compile_report.json", {"status": "fail", "error": f"{type(e).__name__}: {e}"})
        return 1
    write_report("compile_report.json", {"status": "ok", "error": None})
    return 0


def correctness_gate():
    try:
        fn = load_kernel()
        for i, shape in enumerate(TEST_SHAPES):
            xs = make_input(shape, seed=1000 + i)
            got, want = fn(list(xs)), reference(xs)
            if got != want:
                raise AssertionError(f"shape {shape}: got {got!r}, expected {want}")
    except Exception as e:
        write_report("correctness_report.json", {
            "status": "fail", "error": f"{type(e).__name__}: {e}", "num_shapes": len(TEST_SHAPES)})
        return 1
    write_report("correctness_report.json", {"status": "ok", "error": None, "num_shapes": len(TEST_SHAPES)})
    return 0


def performance_gate():
    cases, failed = [], False
    fn = load_kernel()
    for i, shape in enumerate(TEST_SHAPES):
        case = {"test_case_id": f"perf{i + 1}", "execution_time_ms": -1.0, "params": {"shape": list(shape)}}
        try:
            xs = make_input(shape, seed=2000 + i)
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
