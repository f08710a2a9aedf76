#!/usr/bin/env python3
"""On a GPU machine, without containers: arena's trusted evaluator on the Triton sample tasks,
the original kernel paired with candidates — the reference solution, an untouched copy (noop),
the original launched twice (2x slower), and adversarial kernels (all zeros, a patched clock,
deferred work, a reference swap) — and what it measured. Prints one line per (task,
candidate) and writes OUT/trusted-check.json.

usage: python3 ci/gpu/trusted-check.py OUT_DIR [PAIRS] [TASK/VARIANT,...]
ARENA_GRAPHS=0 times eagerly (no CUDA graphs); ARENA_REPS=N runs each (task, candidate) N
times (run-to-run spread).
Runs as root (kernel processes run as users 60001 and 60002).
"""
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EVALUATOR = os.path.join(ROOT, "crates/arena-eval/trusted/arena_trusted/evaluate.py")
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


def setup(work, task, variant):
    src, entry = TASKS[task]
    tdir = os.path.join(ROOT, "tasks/triton2triton/arena", task)
    for role in ("baseline", "candidate"):
        d = os.path.join(work, "kernel", role, "source")
        os.makedirs(d, exist_ok=True)
        shutil.copy(os.path.join(tdir, "source", src), os.path.join(d, src))
    cand = os.path.join(work, "kernel", "candidate", "source")
    v = VARIANTS[variant]
    if v == "solution":
        shutil.copy(os.path.join(ROOT, "ci/solutions/triton2triton/arena", task, src), os.path.join(cand, src))
    elif v is not None:
        shutil.copy(os.path.join(cand, src), os.path.join(cand, "_original.py"))
        with open(os.path.join(cand, src), "w") as f:
            f.write(v.format(entry=entry))
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
    job = {
        "harness": os.path.join(tdir, "scripts/task_runner.py"),
        "roles": ["baseline", "candidate"],
        "kernels": {r: os.path.join(work, "kernel", r) for r in ("baseline", "candidate")},
        "users": {"baseline": {"uid": 60001, "gid": 60001}, "candidate": {"uid": 60002, "gid": 60002}},
        "scratch": {r: os.path.join(work, "scratch", r) for r in ("baseline", "candidate")},
        "groups": [],
        "timeouts": {"compile": 300, "correctness": 300, "performance": 600},
        "trials": 2,
        "perf": {"pairs": PAIRS, "target_batch_ms": 20, "max_calls": 4096, "warmup_batches": 2, "graphs": GRAPHS},
        "out": out,
        "pass_env": ["CUDA_VISIBLE_DEVICES", "LD_LIBRARY_PATH", "PATH"],
        "unseen": False,
        "quiet_kernels": False,
    }
    with open(os.path.join(work, "job.json"), "w") as f:
        json.dump(job, f)
    return out


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
            })
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
    for task in TASKS:
        for variant, rep in [(v, r) for v in VARIANTS for r in range(REPS)]:
            if ONLY and f"{task}/{variant}" not in ONLY and task not in ONLY:
                continue
            work = f"/tmp/tc-{task}-{variant}"
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
