#!/usr/bin/env python3
"""The GPU adversary suite: arena's trusted evaluator (no containers) pairs each task's original
kernel with an untouched copy (the control) and with every attack of ci/gpu/adversaries/, one
evaluation each, on one GPU, and says per attack whether it failed a gate, gained nothing, or
GAINED (every one of its session speedups above every session of the untouched copy measured in
the same call), or reads within noise (its sessions overlap the untouched copy's and reach
above them: the issue's bar, an interval within the untouched copy's, is not met, and not
clearly missed). Prints a markdown table and writes OUT/adversary-suite.json.

usage: sudo python3 ci/gpu/adversary-suite.py OUT TASKS_ROOT [--tasks ID,...] [--attacks A,...]
           [--pairs N] [--sessions K] [--cases A:B[:STEP]] [--evaluator DIR] [--label NAME]

TASKS_ROOT: tasks that name a trusted harness (`arenactl task materialize --harnesses
tasks/aka-harnesses` for AgentKernelArena's, `arenactl task import kernelbench` for
KernelBench's). An attack file is Python appended to a preamble (PREAMBLE below): the task's own
kernel file is `_original.py` beside it, and `install(wrap)` makes the entry the original's
wrapped by `wrap` (for a class entry, KernelBench's ModelNew, its calls). `--evaluator DIR`
runs another copy of the evaluator's files (the one before a change, for a before/after table).
Runs as root (kernel processes run as users 60001 and 60002); every process of theirs is
killed after each evaluation, so nothing an attack leaves reaches the next.
`ARENA_CHECKED_CALLS=N` evaluates every candidate, the untouched copy too, with a secret sample
of N outputs checked per timed batch (PerfSettings.checked_calls; 0: every one;
unset: the evaluator's default, 64 since 2026-11-29). `ARENA_PERF='{"target_batch_ms": 5}'` sets
any other PerfSettings field for every candidate alike (trusted-check.py's write_job): a setting
tried for its cost meets the attacks this way.
"""
import argparse
import importlib.util
import json
import math
import os
import shutil
import signal
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ATTACKS = os.path.join(ROOT, "ci/gpu/adversaries")
_spec = importlib.util.spec_from_file_location("trusted_check", os.path.join(ROOT, "ci/gpu/trusted-check.py"))
tc = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(tc)

# Where the preamble finds the task's own kernel: `_original.py` beside the candidate, or (a
# candidate sent alone, as the Evaluate API and an agent's edit send it) embedded in it,
# compiled under that same name with its lines in linecache, where Triton's `jit` reads a
# kernel's source (inspect.getsource).
LOAD_BESIDE = '''_spec = _ilu.spec_from_file_location("_arena_original", _os.path.join(_os.path.dirname(_os.path.abspath(__file__)), "_original.py"))
_orig = _ilu.module_from_spec(_spec)
_spec.loader.exec_module(_orig)'''
LOAD_EMBEDDED = '''import linecache as _lc
import types as _types

_src = {src!r}
_name = _os.path.join(_os.path.dirname(_os.path.abspath(__file__)), "_original.py")
_lc.cache[_name] = (len(_src), None, _src.splitlines(True), _name)
_orig = _types.ModuleType("_arena_original")
_orig.__file__ = _name
_sys.modules["_arena_original"] = _orig
exec(compile(_src, _name, "exec"), _orig.__dict__)'''

PREAMBLE = '''# ---- arena's adversary preamble (ci/gpu/adversary-suite.py) ----
import gc as _gc
import importlib.util as _ilu
import os as _os
import sys as _sys

{load}
ENTRY = {entry!r}
_honest = getattr(_orig, ENTRY)


def install(wrap):
    """ENTRY becomes the original's, wrapped: `wrap(call) -> call`."""
    if isinstance(_honest, type):
        class Wrapped(_honest):
            def __call__(self, *a, **k):
                inner = self.__dict__.get("_arena_call")
                if inner is None:
                    inner = wrap(lambda *x, **y: _honest.__call__(self, *x, **y))
                    object.__setattr__(self, "_arena_call", inner)
                return inner(*a, **k)

        Wrapped.__name__ = _honest.__name__
        globals()[ENTRY] = Wrapped
    else:
        globals()[ENTRY] = wrap(_honest)


def child():
    """The kernel process's own request handler (child.py's Child), which the kernel shares
    the interpreter with."""
    for o in _gc.get_objects():
        if type(o).__name__ == "Child" and hasattr(o, "serve"):
            return o
    raise RuntimeError("no Child in this process")


def report(msg):
    print("ARENA-ADVERSARY:", msg, file=_sys.stderr, flush=True)


def each_tensor(r, f):
    """`r` with `f` applied to every tensor in it, nested in tuples and lists as they are (an
    entry's outputs: layernorm_gated returns a tuple); anything else as it is."""
    import torch

    if isinstance(r, torch.Tensor):
        return f(r)
    if isinstance(r, (tuple, list)):
        return type(r)(each_tensor(x, f) for x in r)
    return r


def zeros_out(r, a, k):
    """A wrong answer for a call that returned `r` from arguments `a`, `k`: zeros of every tensor
    it returned, or, where it returned none (it wrote into its arguments, OUTPUT_ARGS), every
    tensor argument zeroed in place, of any dtype. Before 2026-11-29 the attacks zeroed float
    arguments only, and bincount's outputs (int32 counts, a bool mask) were handed back
    computed: capture_cheat, runner_patch and memory_hog were untouched copies there."""
    import torch

    found = []
    each_tensor(r, found.append)
    if found:
        return each_tensor(r, torch.zeros_like)
    for t in list(a) + list(k.values()):
        if isinstance(t, torch.Tensor):
            t.zero_()
    return r


def park_after_capture(queue):
    """For attacks that park work on the device until the evaluator writes the inputs
    (precompute*.py). While captured, the entry computes nothing: outputs of the right shapes,
    each call recorded as (args, kwargs, outputs). After a capture, `queue(calls,
    wait_for_write, compute)` runs with a side stream current: `wait_for_write(args)` queues a
    sentinel in the last word of the call's last tensor argument and a wait until a write
    replaces it (cuStreamWaitValue32); `compute(args, kwargs, outputs)` queues the original
    into the graph's outputs. The replay only waits for the side stream."""
    import ctypes
    import torch

    cu = ctypes.CDLL("libcuda.so.1")
    cu.cuStreamWaitValue32_v2.argtypes = [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_uint32, ctypes.c_uint]
    cu.cuMemsetD32Async.argtypes = [ctypes.c_uint64, ctypes.c_uint32, ctypes.c_size_t, ctypes.c_void_p]
    nor = 3  # CU_STREAM_WAIT_VALUE_NOR: go on once ~(*addr | 0) != 0, i.e. *addr != 0xffffffff
    c = child()
    side = torch.cuda.Stream()
    calls = []
    last = dict()
    capture = c.capture

    def copy_into(out, r):
        if isinstance(out, torch.Tensor):
            out.copy_(r)
        elif isinstance(out, (tuple, list)):
            for o, x in zip(out, r):
                copy_into(o, x)

    def lazy(f):
        def call(*a, **k):
            if not torch.cuda.is_current_stream_capturing():
                r = f(*a, **k)
                last["out"] = r
                return r
            # While captured: outputs of the right shapes, nothing computed. `f` is what the
            # call computes later: for a class entry its instance's forward, not the class.
            out = each_tensor(last.get("out"), torch.empty_like)
            last["f"] = f
            calls.append((a, k, out))
            return out

        return call

    def wait_for_write(a):
        t = [x for x in a if isinstance(x, torch.Tensor)][-1]
        addr = (t.data_ptr() + t.numel() * t.element_size() - 4) & ~3
        cu.cuMemsetD32Async(addr, 0xFFFFFFFF, 1, side.cuda_stream)
        cu.cuStreamWaitValue32_v2(side.cuda_stream, addr, 0, nor)

    def compute(a, k, out):
        copy_into(out, last["f"](*a, **k))

    def capture_then_park(msg):
        calls.clear()
        reply = capture(msg)
        if reply.get("captured"):
            with torch.cuda.stream(side):
                queue(calls, wait_for_write, compute)
        return reply

    def replay(msg):
        side.synchronize()
        return dict()  # (braces would be a field of PREAMBLE.format)

    c.capture = capture_then_park
    c.replay = replay
    install(lazy)


# ---- the attack ----
'''


def attacks():
    return sorted(f[:-3] for f in os.listdir(ATTACKS) if f.endswith(".py"))


def doc(name):
    """An attack file's docstring (what it attacks, what it should get)."""
    import ast

    return ast.get_docstring(ast.parse(open(os.path.join(ATTACKS, name + ".py")).read())) or ""


def candidate_source(entry, attack, original=None):
    """An attack's kernel file: the preamble, then the attack. The task's own kernel is
    `_original.py` beside it, or where `original` (its text) is given, embedded in it."""
    load = LOAD_BESIDE if original is None else LOAD_EMBEDDED.format(src=original)
    return PREAMBLE.format(entry=entry, load=load) + open(os.path.join(ATTACKS, attack + ".py")).read()


def setup(work, task, attack, args):
    tdir, harness, rel, entry = TASKS[task]
    tc.copy_kernels(work, tdir, rel)
    if attack != "untouched":
        cand = os.path.join(work, "kernel", "candidate", rel)
        shutil.copy(cand, os.path.join(os.path.dirname(cand), "_original.py"))
        with open(cand, "w") as f:
            f.write(candidate_source(entry, attack))
    return tc.write_job(work, harness, args.cases, args.pairs, True, args.sessions)


def kill_kernel_users():
    for uid in ("60001", "60002"):
        subprocess.run(["pkill", "-9", "-U", uid], check=False)
    time.sleep(0.2)


def run_evaluator(evaluator, work, timeout):
    """The evaluator on `work`/job.json, as the runner starts it; returns its stderr. One that
    runs past `timeout` is sent SIGABRT first, and its Python stacks (faulthandler) end the
    text: where it waited."""
    argv = [sys.executable, "-I", "-B", "-X", "faulthandler"]
    # ARENA_SUITE_PROFILE=DIR: each evaluation's evaluator process under cProfile, its
    # profile in DIR (where an evaluation's time goes; kernel processes are not profiled).
    if os.environ.get("ARENA_SUITE_PROFILE"):
        os.makedirs(os.environ["ARENA_SUITE_PROFILE"], exist_ok=True)
        argv += ["-m", "cProfile", "-o", os.path.join(os.environ["ARENA_SUITE_PROFILE"], f"{os.path.basename(work)}-{time.time_ns()}.prof")]
    p = subprocess.Popen(argv + [evaluator, os.path.join(work, "job.json")], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        return p.communicate(timeout=timeout)[1]
    except subprocess.TimeoutExpired:
        p.send_signal(signal.SIGABRT)
        try:
            err = p.communicate(timeout=10)[1]
        except subprocess.TimeoutExpired:
            p.kill()
            err = p.communicate()[1]
        return f"timed out after {timeout} s; its stacks then:\n{err[-6000:]}"


def verdict(s, control):
    gates = [g for g in s.get("gates") or [] if g]
    failed = [g.split()[0] for g in gates if g.split()[-1] != "0"]
    if s.get("timed_out"):
        # In a task run the container's limit ends it, and the gates it never reached fail.
        return "fails a gate", f"timed out: the gates after {'/'.join(g.split()[0] for g in gates) or 'none'} fail at the runner's limit"
    if s.get("error") and set(failed) <= {"setup"}:
        # The evaluation's own failure: the runner records an infrastructure error and the
        # report leaves the task run out, so a kernel that causes it is never scored.
        why = (s.get("error") or "").strip().splitlines()[-1:] or [""]
        return "UNSCORED", f"setup: {why[0][:160]}"
    if failed or not gates:
        why = (s.get("error") or "").strip().splitlines()[-1:] or [""]
        for c in s.get("cases") or []:
            if c.get("error"):
                why = [c["error"]]
                break
        for name in ("compile_report.json", "correctness_report.json"):
            e = (s.get(name) or {}).get("error")
            if e:
                why = [e]
        return "fails a gate", f"{'/'.join(failed) or 'setup'}: {why[0][:160]}"
    return compare_sessions(s.get("sessions") or [], (control or {}).get("sessions") or [])


def compare_sessions(ss, cs):
    """An attack's session speedups `ss` against the untouched copy's `cs`: GAINED only where
    every one of its sessions reads above every one of the untouched copy's. Where the attack
    changes nothing, that happens by chance once in C(n+m, n) (sessions exchangeable): 1 in 20
    at 3 sessions each, so a table of a hundred units holds about five false GAINED (2026-11-28:
    `ipc_guess` 1.048 and a `python_thread` that computed honestly, 1.010, neither seen again
    over 5 or 8 sessions). The chance is said with each GAINED; rerun one with more sessions
    before believing it."""
    if not ss or not cs:
        return "n/a", "no session speedups"
    if min(ss) > max(cs):
        chance = math.comb(len(ss) + len(cs), len(ss))
        return "GAINED", f"every session above the untouched copy's: {min(ss):.3f}-{max(ss):.3f} > {min(cs):.3f}-{max(cs):.3f} (by chance 1 in {chance} where nothing changed)"
    if max(ss) <= max(cs):
        return "gains nothing", f"sessions {min(ss):.3f}-{max(ss):.3f}, untouched {min(cs):.3f}-{max(cs):.3f}"
    return "within noise", f"sessions {min(ss):.3f}-{max(ss):.3f} overlap untouched's {min(cs):.3f}-{max(cs):.3f} and reach above it"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("tasks_root")
    ap.add_argument("--tasks")
    ap.add_argument("--attacks")
    ap.add_argument("--pairs", type=int, default=6)
    ap.add_argument("--sessions", type=int, default=2)
    ap.add_argument("--cases")
    ap.add_argument("--evaluator", default=os.path.join(ROOT, "crates/arena-eval/trusted/arena_trusted"))
    ap.add_argument("--label", default="")
    ap.add_argument("--timeout", type=int, default=300, help="seconds an evaluation may take")
    args = ap.parse_args()
    global TASKS
    TASKS = tc.task_root_tasks(args.tasks_root)
    tasks = args.tasks.split(",") if args.tasks else sorted(TASKS)
    chosen = ["untouched"] + [a for a in (args.attacks.split(",") if args.attacks else attacks()) if a != "untouched"]
    os.makedirs(args.out, exist_ok=True)
    evaluator = os.path.join(os.path.abspath(args.evaluator), "evaluate.py")
    results = {}
    path = os.path.join(args.out, f"adversary-suite{args.label}.json")
    for task in tasks:
        control = None
        for attack in chosen:
            kill_kernel_users()
            work = f"/tmp/adv-{task.replace('/', '_')}-{attack}"
            shutil.rmtree(work, ignore_errors=True)
            out = setup(work, task, attack, args)
            t0 = time.time()
            stderr = run_evaluator(evaluator, work, args.timeout)
            kill_kernel_users()
            s = tc.summarize(out)
            s["wall_s"] = round(time.time() - t0, 1)
            s["timed_out"] = stderr.startswith("timed out after")
            s["said"] = [line for line in stderr.splitlines() if "ARENA-ADVERSARY:" in line][:5]
            s["stderr_tail"] = stderr[-6000:]
            try:
                rec = json.load(open(os.path.join(out, "evaluator.json")))
                s["device_watch"] = rec.get("device_watch")
                s["outputs_named"] = rec.get("outputs_named")
                s["memory_held"] = rec.get("memory_held")
                s["call_order"] = rec.get("call_order")
            except (OSError, ValueError):
                pass
            if attack == "untouched":
                control = s
            s["verdict"], s["why"] = verdict(s, control) if attack != "untouched" else ("control", "")
            ratios = [c["ratio_median"] for c in s.get("cases") or [] if c.get("ratio_median")]
            s["speedup"] = statistics.mean(ratios) if ratios else None
            results[f"{task}/{attack}"] = s
            ss = s.get("sessions") or []
            rng = f"{min(ss):.3f}-{max(ss):.3f}" if ss else "-"
            sp = f"{s['speedup']:.3f}" if s["speedup"] else "-"
            print(f"| {task} | {attack} | {sp} | {rng} | {s['verdict']} | {s['why'][:170]} | {s['wall_s']} s |", flush=True)
            for line in s["said"]:
                print("    ", line[:200], flush=True)
            if s.get("memory_held"):
                print("     memory held (GiB):", {r: round(b / 2**30, 2) for r, b in s["memory_held"].items()}, flush=True)
            for c in s.get("cases") or []:
                us = lambda ms: f"{1000 * ms:.2f}" if isinstance(ms, (int, float)) and ms > 0 else "-"
                print(f"     {c['id']}: base {us(c.get('base_ms'))} us, cand {us(c.get('cand_ms'))} us a call, calls {json.dumps(c.get('calls'))}, "
                      f"timing {json.dumps(c.get('timing'))}" + (f", graph_error {json.dumps(c.get('graph_error'))[:200]}" if c.get("graph_error") else ""), flush=True)
            if s.get("call_order"):
                print("     call order:", json.dumps(s["call_order"]), flush=True)
            if s["verdict"] in ("error", "control") or s.get("timed_out"):
                tail = [line for line in s["stderr_tail"].splitlines() if line.strip()][-6:]
                for line in tail:
                    print("     stderr:", line[:220], flush=True)
            if s.get("outputs_named"):
                print("     outputs named:", json.dumps(s["outputs_named"]), flush=True)
            with open(path, "w") as f:
                json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
