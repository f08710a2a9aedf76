#!/usr/bin/env python3
"""On a GPU machine, without containers: arena's trusted evaluator on the Triton sample tasks,
the original kernel paired with candidates — the reference solution, an untouched copy (noop),
the original launched twice (2x slower), and adversarial kernels (all zeros, a patched clock,
deferred work, a reference swap) — and what it measured. Prints one line per (task,
candidate) and writes OUT/trusted-check.json.

usage: python3 ci/gpu/trusted-check.py OUT_DIR [PAIRS] [TASK/VARIANT,...]
ARENA_GRAPHS=0 times eagerly (no CUDA graphs); ARENA_EVALUATOR_DIR=DIR runs another copy of
the evaluator's files; ARENA_REPS=N runs each (task, candidate) N
times (run-to-run spread); ARENA_GPU_SESSIONS=N spreads the pairs over N sessions of fresh
kernel processes (5, the runner's default; 1: one session). ARENA_CHECKED_CALLS=N checks a
secret sample of N outputs per timed batch (PerfSettings.checked_calls, 64 by default; 0: every
one). ARENA_PERF='{"target_batch_ms": 5, ...}' sets any other PerfSettings field (a field it
lacks is refused, named), to try a setting against the attacks. ARENA_TASK_ROOT=DIR takes the tasks from DIR instead (ids below
it, each naming a trusted_harness: e.g. AgentKernelArena tasks materialized with
`arenactl task materialize --harnesses tasks/aka-harnesses`); the kernel's file and entry
are the harness's SOURCE and ENTRY. ARENA_CASES=A:B[:STEP] evaluates only the
harness's TEST_SHAPES[A:B:STEP] (a copy of the harness with that one line appended), so that a
task of many cases can be measured over several calls, or a sample of them in one.
Runs as root (kernel processes run as users 60001 and 60002).
"""
import ast
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# ARENA_EVALUATOR_DIR: another copy of the evaluator's files (an earlier commit's, from
# `git archive`), so that a change's before and after are measured in one call.
EVALUATOR = os.path.join(os.environ.get("ARENA_EVALUATOR_DIR") or os.path.join(ROOT, "crates/arena-eval/trusted/arena_trusted"), "evaluate.py")
# job.json's `perf` with every field (the evaluator refuses one that lacks any): the
# evaluator's own type, its defaults the runner's (arena_trusted/perf_settings.py).
sys.path.insert(0, os.path.dirname(EVALUATOR))
from perf_settings import PerfSettings  # noqa: E402
sys.path.pop(0)
TASKS = {"row_softmax": ("softmax.py", "softmax"), "add_rmsnorm": ("add_rmsnorm.py", "add_rmsnorm")}

WRAP = """import importlib.util, os, sys
_spec = importlib.util.spec_from_file_location("original", os.path.join(os.path.dirname(__file__), "_original.py"))
_orig = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_orig)
"""
VARIANTS = {
    "noop": None,
    "solution": "solution",
    "slow2x": WRAP + "def {entry}(*a):\n    _orig.{entry}(*a)\n    return _orig.{entry}(*a)\n",
    # 1.5x slower: the original launched twice on every other call (the count is kept in the
    # process, so a captured batch holds the same mix).
    "slow15": WRAP + "_n = [0]\ndef {entry}(*a):\n    _n[0] += 1\n    if _n[0] % 2:\n        _orig.{entry}(*a)\n    return _orig.{entry}(*a)\n",
    # Cheap while captured (zeros), right when called eagerly: the graph's outputs are checked.
    "capcheat": WRAP + "import torch\ndef {entry}(*a):\n    r = _orig.{entry}(*a)\n    if torch.cuda.is_current_stream_capturing():\n        return tuple(torch.zeros_like(t) for t in r) if isinstance(r, tuple) else torch.zeros_like(r)\n    return r\n",
    # Synchronizes in every call: cannot be captured, so both kernels are timed eagerly.
    "sync": WRAP + "import torch\ndef {entry}(*a):\n    r = _orig.{entry}(*a)\n    torch.cuda.synchronize()\n    return r\n",
    "zeros": WRAP + "import torch\ndef {entry}(*a):\n    r = _orig.{entry}(*a)\n    return tuple(torch.zeros_like(t) for t in r) if isinstance(r, tuple) else torch.zeros_like(r)\n",
    "timer": WRAP + "import time, torch\ntime.perf_counter = lambda: 0.0\ntime.perf_counter_ns = lambda: 0\ntorch.cuda.Event.elapsed_time = lambda self, other: 1e-6\n{entry} = _orig.{entry}\n",
    "defer": WRAP + "import torch\ntorch.cuda.synchronize = lambda *a, **k: None\ndef {entry}(*a):\n    for _ in range(20):\n        r = _orig.{entry}(*a)\n    return r\n",
    "refswap": WRAP + "import sys\nfor m in list(sys.modules.values()):\n    if hasattr(m, 'reference'):\n        m.reference = lambda *a: None\ntry:\n    sys.path.insert(0, '/arena/harness/task/scripts'); import task_runner\nexcept Exception as e:\n    print('harness not readable:', e)\n{entry} = _orig.{entry}\n",
}


def task_root_tasks(root):
    """The tasks below `root` that name a trusted harness: id -> (dir, harness, source, entry)."""
    found = {}
    for d, _, files in sorted(os.walk(root)):
        if "config.yaml" not in files:
            continue
        m = re.search(r"^trusted_harness:\s*(\S+)\s*$", open(os.path.join(d, "config.yaml")).read(), re.M)
        if not m:
            continue
        harness = os.path.join(d, m.group(1))
        names = {}
        for node in ast.parse(open(harness).read()).body:
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                if node.targets[0].id in ("SOURCE", "ENTRY"):
                    names[node.targets[0].id] = ast.literal_eval(node.value)
            # A derived harness (arena_task::derive): `derived.from_runner(..., source=, entry=)`.
            if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
                for kw in node.value.keywords:
                    if kw.arg in ("source", "entry"):
                        names[kw.arg.upper()] = ast.literal_eval(kw.value)
        found[os.path.relpath(d, root)] = (d, harness, names["SOURCE"], names["ENTRY"])
    return found


def task_info(task):
    """(task dir, harness, the kernel's file relative to the task, entry)."""
    if task in TASKS and not TASK_ROOT:
        src, entry = TASKS[task]
        tdir = os.path.join(ROOT, "tasks/triton2triton/arena", task)
        return tdir, os.path.join(tdir, "scripts/task_runner.py"), os.path.join("source", src), entry
    return ROOT_TASKS[task]


def copy_kernels(work, tdir, rel):
    """The task's kernel file, once for each role (work/kernel/<role>/<rel>)."""
    for role in ("baseline", "candidate"):
        d = os.path.dirname(os.path.join(work, "kernel", role, rel))
        os.makedirs(d, exist_ok=True)
        shutil.copy(os.path.join(tdir, rel), os.path.join(work, "kernel", role, rel))


def perf_settings(pairs, graphs, sessions):
    """job.json's `perf`: the defaults, these arguments, ARENA_CHECKED_CALLS, and any field of
    ARENA_PERF (PerfSettings.of refuses one it lacks, or of the wrong type, named)."""
    fields = dict(pairs=pairs, graphs=graphs, sessions=1, gpu_sessions=sessions,
                  checked_calls=int(os.environ.get("ARENA_CHECKED_CALLS", PerfSettings.checked_calls)))
    try:
        return PerfSettings.overridden(fields, os.environ.get("ARENA_PERF"), "ARENA_PERF").as_job()
    except ValueError as e:
        sys.exit(str(e))


def write_job(work, harness, cases, pairs, graphs, sessions):
    """The rest of an evaluation's directory below `work` (each kernel's scratch, owned by its
    user; the evaluator's out), the harness cut to TEST_SHAPES[cases] where `cases` is
    "A:B[:STEP]", and work/job.json. Returns the out directory."""
    for role, uid in (("baseline", 60001), ("candidate", 60002)):
        s = os.path.join(work, "scratch", role)
        os.makedirs(s, exist_ok=True)
        os.chown(s, uid, uid)
        os.chmod(s, 0o700)
    out = os.path.join(work, "out")
    os.makedirs(out, exist_ok=True)
    os.chmod(out, 0o700)
    os.chmod(work, 0o755)
    for p in ("kernel", "scratch"):
        os.chmod(os.path.join(work, p), 0o755)
    if cases:
        a, b, step = ([int(x) if x else None for x in cases.split(":")] + [None])[:3]
        # Beside the harness: a derived one finds the task's runner from where it lies.
        sliced = os.path.join(os.path.dirname(harness), "harness_cases.py")
        with open(sliced, "w") as f:
            f.write(open(harness).read() + f"\nTEST_SHAPES = TEST_SHAPES[{a}:{b}:{step}]\n")
        harness = sliced
    job = {
        "harness": harness,
        "roles": ["baseline", "candidate"],
        "kernels": {r: os.path.join(work, "kernel", r) for r in ("baseline", "candidate")},
        "users": {"baseline": {"uid": 60001, "gid": 60001}, "candidate": {"uid": 60002, "gid": 60002}},
        "scratch": {r: os.path.join(work, "scratch", r) for r in ("baseline", "candidate")},
        "groups": [],
        "timeouts": {"compile": 300, "correctness": 300, "performance": 600},
        "trials": 2,
        "perf": perf_settings(pairs, graphs, sessions),
        "out": out,
        "pass_env": ["CUDA_VISIBLE_DEVICES", "LD_LIBRARY_PATH", "PATH"],
        "unseen": False,
        "quiet_kernels": False,
    }
    with open(os.path.join(work, "job.json"), "w") as f:
        json.dump(job, f)
    return out


def setup(work, task, variant):
    tdir, harness, rel, entry = task_info(task)
    copy_kernels(work, tdir, rel)
    cand = os.path.dirname(os.path.join(work, "kernel", "candidate", rel))
    src = os.path.basename(rel)
    v = VARIANTS[variant]
    if v == "solution":
        shutil.copy(os.path.join(ROOT, "ci/solutions/triton2triton/arena", task, src), os.path.join(cand, src))
    elif v is not None:
        shutil.copy(os.path.join(cand, src), os.path.join(cand, "_original.py"))
        with open(os.path.join(cand, src), "w") as f:
            f.write(v.format(entry=entry))
    sessions = int(os.environ.get("ARENA_GPU_SESSIONS", "5"))
    return write_job(work, harness, os.environ.get("ARENA_CASES"), PAIRS, GRAPHS, sessions)


def session_speedups(cases):
    """Each session's speedup as arena's reports take it (arena_report::stats::session_ratios):
    the mean over cases of the median of that session's pair ratios. None without sessions."""
    if not cases or any(c.get("error") or not c.get("pair_sessions") for c in cases):
        return None
    per = []
    for c in cases:
        by = {}
        for (b, x), sess in zip(c["pairs_ms"], c["pair_sessions"]):
            by.setdefault(sess, []).append(b / x)
        per.append(by)
    return [statistics.mean(statistics.median(m[k]) for m in per) for k in sorted(per[0])]


def summarize(out):
    s = {}
    try:
        s["gates"] = open(os.path.join(out, "gates")).read().split("\n")
        rec = json.load(open(os.path.join(out, "evaluator.json")))
        s["warnings"] = rec.get("warnings")
        s["error"] = rec.get("error")
        s["gate_s"] = rec.get("gate_s")
    except OSError as e:
        s["error"] = str(e)
    for name in ("compile_report.json", "correctness_report.json"):
        try:
            s[name] = json.load(open(os.path.join(out, name)))
        except OSError:
            pass
    try:
        cases = json.load(open(os.path.join(out, "performance_report.json")))
        s["cases"] = []
        for c in cases:
            pairs = c.get("pairs_ms") or []
            ratios = [b / x for b, x in pairs if x > 0]
            s["cases"].append({
                "id": c["test_case_id"], "cand_ms": c["execution_time_ms"], "base_ms": c.get("baseline_ms"),
                "ratio_median": statistics.median(ratios) if ratios else None,
                "ratio_min": min(ratios) if ratios else None, "ratio_max": max(ratios) if ratios else None,
                "calls": c.get("calls_per_batch"), "error": c.get("error"),
                "timing": c.get("timing"), "graph_error": c.get("graph_error"),
                "pairs_ms": pairs, "pair_sessions": c.get("pair_sessions"),
            })
        s["sessions"] = session_speedups(s["cases"])
    except OSError:
        pass
    return s


if __name__ == "__main__":
    OUT = sys.argv[1]
    PAIRS = int(sys.argv[2]) if len(sys.argv) > 2 else 10
    GRAPHS = os.environ.get("ARENA_GRAPHS", "1") != "0"
    REPS = int(os.environ.get("ARENA_REPS", "1"))
    os.makedirs(OUT, exist_ok=True)
    results = {}
    ONLY = set(sys.argv[3].split(",")) if len(sys.argv) > 3 else None
    TASK_ROOT = os.environ.get("ARENA_TASK_ROOT")
    ROOT_TASKS = task_root_tasks(TASK_ROOT) if TASK_ROOT else {}
    # In the order given (a deadline cuts the last), else every task's every variant.
    todo = [(t, v) for t in (ROOT_TASKS or TASKS) for v in VARIANTS]
    if ONLY:
        todo = [tv for item in sys.argv[3].split(",") for tv in todo if "/".join(tv) == item or (tv[0] == item)]
    for task, variant, rep in [(t, v, r) for t, v in todo for r in range(REPS)]:
        work = f"/tmp/tc-{task.replace('/', '_')}-{variant}"
        shutil.rmtree(work, ignore_errors=True)
        out = setup(work, task, variant)
        t0 = time.time()
        p = subprocess.run([sys.executable, "-I", "-B", EVALUATOR, os.path.join(work, "job.json")],
                           capture_output=True, text=True, timeout=900)
        s = summarize(out)
        s["wall_s"] = time.time() - t0
        s["stderr_tail"] = p.stderr[-1500:]
        results[f"{task}/{variant}" + (f"/{rep}" if REPS > 1 else "")] = s
        cases = s.get("cases") or []
        ratio = [c["ratio_median"] for c in cases if c.get("ratio_median")]
        if s.get("sessions"):
            ss = s["sessions"]
            print(f"{task} {variant}: speedup {statistics.mean(ratio):.4f} (mean of case medians); "
                  f"sessions {[round(x, 4) for x in ss]}, median {statistics.median(ss):.4f}, "
                  f"range {min(ss):.4f}-{max(ss):.4f}", flush=True)
        print(f"{task:12} {variant:9} gates={s.get('gates')} wall={s['wall_s']:.1f}s "
              f"ratios={[round(r, 3) for r in ratio]} err={(s.get('error') or '')[-200:]!r}", flush=True)
        for c in cases:
            if c.get("error"):
                print("   ", c["id"], c["error"][:300])
            else:
                print("   ", c["id"], c.get("timing"), "calls", c.get("calls"), f"base {c['base_ms']:.4f} ms",
                      f"ratios {c['ratio_min']:.3f}-{c['ratio_max']:.3f}", str(c.get("graph_error") or "")[:200])
        with open(os.path.join(OUT, "trusted-check.json"), "w") as f:
            json.dump(results, f, indent=1)
