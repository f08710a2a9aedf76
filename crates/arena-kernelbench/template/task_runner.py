# ---- The rest is the same for every KernelBench problem (arena-kernelbench/template). ----
import importlib.util
import json
import os
import statistics
import sys
import traceback
import types

ENTRY = "ModelNew"
# Where the task runs, in the order preferred: arena's evaluator picks the GPU where its
# container has one, else the CPU, and sets DEVICE (the command line below picks alike).
DEVICES = ("cuda", "cpu")
DEVICE = None
# What every ModelNew imports first: arena's evaluator forks its kernel processes from a
# process that has it loaded already.
PRELOAD = ("torch",)
# KernelBench seeds the weights alike before it builds Model and ModelNew, so that both draw
# the same parameters; the inputs come from the evaluator's secret seed, fresh for every call.
WEIGHT_SEED = 42
# KernelBench's tolerances (torch.allclose, atol and rtol 1e-2).
ATOL = 1e-2
RTOL = 1e-2
# Elements compared at a time (check): 256 MiB of fp32.
CHECK_BLOCK = 1 << 26
# KernelBench's second baseline: the original compiled by torch.compile (its defaults: the
# inductor backend). Arena's evaluator times it in the same pairs as the eager original and
# ModelNew, and reports the speedup over it as a column of its own; the score stays the
# paper's, over eager. Where it cannot compile (inductor on a CPU needs a C++ compiler) the
# result says why and has no such column.
COMPILED_BASELINE = {}
WARMUP_ITERATIONS = 10
BENCHMARK_ITERATIONS = 100
CORRECTNESS_TRIALS = 5

_MODULES = {}
_REFERENCES = {}


def _torch():
    import torch

    return torch


def _device():
    """DEVICE as the evaluator set it; on the command line the GPU where there is one."""
    if DEVICE is not None:
        return DEVICE
    return "cuda" if _torch().cuda.is_available() else "cpu"


def _sync(torch):
    if _device() == "cuda":
        torch.cuda.synchronize()


class _Pinned(dict):
    """The problem's top-level namespace while it runs: an assignment to a configured name
    keeps the configuration's value (`N = 2048 * 2`, `height = width = 128` alike), and
    values derived from it after (`bias_shape = (out_channels, 1, 1)`) follow."""

    def __init__(self, pins, module_globals):
        super().__init__()
        self.pins = pins
        self.seen = set()
        self.module_globals = module_globals

    def __setitem__(self, name, value):
        if name in self.pins:
            self.seen.add(name)
            value = self.pins[name]
        super().__setitem__(name, value)
        # Functions called while the module runs look names up in its globals: kept alike.
        self.module_globals[name] = value


def problem(config):
    """The problem module with `config`'s sizes."""
    key = json.dumps(config, sort_keys=True)
    m = _MODULES.get(key)
    if m is None:
        m = types.ModuleType("kernelbench_problem")
        m.__file__ = PROBLEM
        top = _Pinned(dict(config), m.__dict__)
        exec(compile(PROBLEM_SOURCE, PROBLEM, "exec"), m.__dict__, top)
        missing = sorted(set(config) - top.seen)
        if missing:
            raise KeyError(f"{PROBLEM}: no top-level assignment of {', '.join(missing)} to set")
        _MODULES[key] = m
    return m


def init_key(config):
    """The constructor's arguments, the weights' seed and the configuration, as the JSON both
    the reference and the kernel process build their model from."""
    args = problem(config).get_init_inputs()
    try:
        return json.dumps({"args": list(args), "seed": WEIGHT_SEED, "config": config}, sort_keys=True)
    except TypeError as e:
        raise TypeError(f"{PROBLEM}: get_init_inputs() returns something that is not plain data: {e}") from None


def _seed(torch, seed):
    """torch.manual_seed(seed) for the generators a problem can draw from, the CPU's and every
    CUDA device's: the same draws. torch.manual_seed also seeds XPU and MTIA, and where those
    are absent each call queues a lazy call for them with its formatted Python stack (on a
    machine without CUDA, one for CUDA too), once per timed call here: arena's derived
    harnesses lost a third of an evaluation to the same (docs/benchmarks.md)."""
    seed = int(seed)
    if torch.cuda.is_available() and not torch.cuda._is_in_bad_fork():
        torch.cuda.manual_seed_all(seed)
    torch.default_generator.manual_seed(seed)


def make_inputs(config, seed):
    """(init key, *get_inputs()) under `seed`, tensors on the task's device."""
    torch = _torch()
    m = problem(config)
    _seed(torch, seed)
    device = _device()
    # Made on the device itself (a fresh draw per call; KernelBench's sizes run to gigabytes,
    # which the CPU would take seconds to draw for a GPU).
    with torch.device(device):
        raw = m.get_inputs()
    inputs = [x.to(device) if isinstance(x, torch.Tensor) else x for x in raw]
    return (init_key(config), *inputs)


def reference(init, *inputs):
    torch = _torch()
    model = _REFERENCES.get(init)
    if model is None:
        spec = json.loads(init)
        # The module first: whatever its top level draws must not come between the seed and
        # the weights (the kernel's process imported its module before seeding too).
        m = problem(spec["config"])
        torch.manual_seed(spec["seed"])
        model = m.Model(*spec["args"]).to(_device())
        model.requires_grad_(False)
        _REFERENCES[init] = model
    with torch.no_grad():
        return model(*inputs)


def _blocks(g, w):
    """The elements of `g` and `w` (one shape), CHECK_BLOCK at a time, as float32."""
    a, b = g.reshape(-1), w.reshape(-1)
    for i in range(0, a.numel(), CHECK_BLOCK):
        yield a[i : i + CHECK_BLOCK].float(), b[i : i + CHECK_BLOCK].float()


def check(got, want):
    import torch

    gots = list(got) if isinstance(got, (tuple, list)) else [got]
    wants = list(want) if isinstance(want, (tuple, list)) else [want]
    if len(gots) != len(wants):
        raise AssertionError(f"expected {len(wants)} outputs, got {len(gots)}")
    for k, (g, w) in enumerate(zip(gots, wants)):
        where = f"output {k}: " if len(wants) > 1 else ""
        if not isinstance(w, torch.Tensor):
            if g != w:
                raise AssertionError(f"{where}expected {w!r}, got {g!r}")
            continue
        if not isinstance(g, torch.Tensor):
            raise AssertionError(f"{where}expected a tensor, got a {type(g).__name__}")
        if g.shape != w.shape:
            raise AssertionError(f"{where}got shape {tuple(g.shape)}, expected {tuple(w.shape)}")
        # Stricter than KernelBench's own check, which compares values only: an output in a
        # narrower type than the reference's (fp16 for fp32) writes half the bytes and is not
        # the same function.
        if g.dtype != w.dtype:
            raise AssertionError(f"{where}got {g.dtype}, expected {w.dtype}")
        # torch.allclose, a block of elements at a time: the same answer, with one block's
        # temporaries at once rather than a whole output's (level 1 has outputs of 4-16 GiB).
        if not all(torch.allclose(x, y, atol=ATOL, rtol=RTOL) for x, y in _blocks(g, w)):
            err = max((x - y).abs().nan_to_num(float("inf")).max().item() for x, y in _blocks(g, w))
            raise AssertionError(f"{where}max abs error {err:.3e} exceeds atol={ATOL}, rtol={RTOL}")


# The command line: the gates in one process, for the agent's own checks
# (build/{compile,correctness,performance}_report.json, exit 0 on pass, 1 on fail).


def write_report(name, data):
    os.makedirs("build", exist_ok=True)
    tmp = os.path.join("build", name + ".tmp")
    with open(tmp, "w") as f:
        json.dump(data, f, indent=2)
    os.replace(tmp, os.path.join("build", name))


def load_candidate():
    spec = importlib.util.spec_from_file_location("kernel_under_test", SOURCE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    cls = getattr(module, ENTRY, None)
    if not isinstance(cls, type):
        raise AttributeError(f"{SOURCE} defines no class `{ENTRY}`")
    made = {}

    def call(init, *inputs):
        torch = _torch()
        if init not in made:
            spec = json.loads(init)
            torch.manual_seed(spec["seed"])
            made[init] = cls(*spec["args"]).to(_device()).requires_grad_(False)
        return made[init](*inputs)

    return call


def compile_gate():
    try:
        torch = _torch()
        fn = load_candidate()
        fn(*make_inputs(TEST_SHAPES[0], seed=1))
        _sync(torch)
    except Exception as e:
        traceback.print_exc()
        write_report("compile_report.json", {"status": "fail", "error": f"{type(e).__name__}: {e}"})
        return 1
    write_report("compile_report.json", {"status": "ok", "error": None})
    return 0


def correctness_gate():
    try:
        torch = _torch()
        fn = load_candidate()
        for i, config in enumerate(TEST_SHAPES):
            for trial in range(CORRECTNESS_TRIALS):
                args = make_inputs(config, seed=1000 + 10 * i + trial)
                got = fn(*args)
                _sync(torch)
                try:
                    check(got, reference(*args))
                except AssertionError as e:
                    raise AssertionError(f"configuration {config}, trial {trial + 1}: {e}") from None
    except Exception as e:
        traceback.print_exc()
        write_report("correctness_report.json", {"status": "fail", "error": f"{type(e).__name__}: {e}", "num_shapes": len(TEST_SHAPES)})
        return 1
    write_report("correctness_report.json", {"status": "ok", "error": None, "num_shapes": len(TEST_SHAPES)})
    return 0


def time_ms(torch, fn):
    """Median of per-iteration times: on a GPU by CUDA events with L2 flushed before each
    iteration, on the CPU by the process's clock around each call."""
    if _device() != "cuda":
        import time

        for _ in range(WARMUP_ITERATIONS):
            fn()
        times = []
        for _ in range(BENCHMARK_ITERATIONS):
            t0 = time.perf_counter()
            fn()
            times.append(1000 * (time.perf_counter() - t0))
        return statistics.median(times), times
    flush = torch.empty(256 * 1024 * 1024, dtype=torch.int8, device="cuda")
    for _ in range(WARMUP_ITERATIONS):
        fn()
    torch.cuda.synchronize()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(BENCHMARK_ITERATIONS)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(BENCHMARK_ITERATIONS)]
    for s, e in zip(starts, ends):
        flush.zero_()
        s.record()
        fn()
        e.record()
    torch.cuda.synchronize()
    times = [s.elapsed_time(e) for s, e in zip(starts, ends)]
    return statistics.median(times), times


def performance_gate():
    cases, failed = [], False
    for i, config in enumerate(TEST_SHAPES):
        case = {"test_case_id": f"perf{i + 1}", "execution_time_ms": -1.0, "params": dict(config)}
        try:
            torch = _torch()
            fn = load_candidate()
            args = make_inputs(config, seed=2000 + i)
            with torch.no_grad():
                median, times = time_ms(torch, lambda: fn(*args))
            case["execution_time_ms"] = median
            method = "cuda-event median, L2 flushed" if _device() == "cuda" else "perf_counter median"
            case["stats"] = {"min_ms": min(times), "mean_ms": statistics.fmean(times), "iterations": len(times), "method": method}
        except Exception as e:
            traceback.print_exc()
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
