"""The AgentKernelArena gates of a c2rv32 task, for its harness's command line.

A task's scripts/task_runner.py defines the interface (SOURCE, ENTRY, TEST_SHAPES,
make_inputs, outputs, scalars, reference) and ends with

    if __name__ == "__main__":
        sys.exit(rv32gates.main(sys.modules[__name__], sys.argv))

so that `python3 scripts/task_runner.py compile|correctness|performance`, run from the task
directory, writes build/{compile,correctness,performance}_report.json and exits 0 on pass, 1
on fail: the agent's own checks. arena's trusted evaluator does not run these; it imports the
harness for its interface and simulates the kernel itself.
"""

import json
import os
import sys

import numpy as np

import rv32sim


def check_outputs(got, want):
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


def simulate(task, program, config, seed):
    inputs = task.make_inputs(config, seed)
    workdir = os.path.join("build", "run")
    os.makedirs(workdir, exist_ok=True)
    got, cycles = rv32sim.run(program, list(inputs), task.outputs(config), task.scalars(config), workdir)
    return inputs, got, cycles


def compile_gate(task):
    try:
        rv32sim.build(task.SOURCE, "build", task.ENTRY)
    except Exception as e:  # a compiler error (BuildError: gcc's stderr) or a missing tool
        write_report("compile_report.json", {"status": "fail", "error": f"{type(e).__name__}: {e}"})
        return 1
    write_report("compile_report.json", {"status": "ok", "error": None})
    return 0


def correctness_gate(task):
    shapes = task.TEST_SHAPES
    try:
        program = rv32sim.build(task.SOURCE, "build", task.ENTRY)
        for i, config in enumerate(shapes):
            inputs, got, _ = simulate(task, program, config, seed=1000 + i)
            try:
                task.check(got, task.reference(*inputs))
            except AssertionError as e:
                raise AssertionError(f"shape {config}: {e}") from None
    except Exception as e:
        write_report("correctness_report.json", {
            "status": "fail", "error": f"{type(e).__name__}: {e}", "num_shapes": len(shapes)})
        return 1
    write_report("correctness_report.json", {"status": "ok", "error": None, "num_shapes": len(shapes)})
    return 0


def performance_gate(task):
    """Each visible configuration simulated once: the same binary on the same inputs takes
    the same cycles every time."""
    cases, failed, program = [], False, None
    for i, config in enumerate(task.TEST_SHAPES):
        case = {"test_case_id": f"perf{i + 1}", "execution_time_ms": -1.0, "params": {"shape": list(config)}}
        try:
            program = program or rv32sim.build(task.SOURCE, "build", task.ENTRY)
            _, _, cycles = simulate(task, program, config, seed=2000 + i)
            case["execution_time_ms"] = cycles / rv32sim.CYCLES_PER_MS
            case["cycles"] = cycles
        except Exception as e:
            failed = True
            case["error"] = f"{type(e).__name__}: {e}"
        cases.append(case)
    write_report("performance_report.json", cases)
    return 1 if failed else 0


def main(task, argv):
    gates = {"compile": compile_gate, "correctness": correctness_gate, "performance": performance_gate}
    if len(argv) != 2 or argv[1] not in gates:
        print(f"usage: {argv[0]} compile|correctness|performance", file=sys.stderr)
        return 2
    return gates[argv[1]](task)
