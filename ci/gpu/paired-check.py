#!/usr/bin/env python3
"""Paired timing of self-reported tasks on a GPU host, without containers: arena's gate runner
(crates/arena-eval/trusted/arena_trusted/gates.py, the same file the runner installs into its
evaluator containers) runs the task's own performance command for the original kernel and for
candidates made from it, each in its own tree as its own user, interleaved in rounds of random
order within one session. It measures the method itself, on real AgentKernelArena tasks:

  noop    the original, untouched: its ratio to the original is the method's error
          (noop2: a second one, to compare two untouched kernels with each other);
  slow2   every Triton kernel of the source launched twice per call (2x the kernel's work);
  slow15  launched twice on every other call (1.5x).
  syncnoop  the original with `torch.cuda.synchronize` made a no-op when its module is loaded
          (ci/gpu/adversaries/sync_noop.py, against the task's own timing in its process).

usage: sudo python3 ci/gpu/paired-check.py TASKS_ROOT OUT [--tasks ID ...] [--pairs N]
           [--sessions K] [--candidates noop,noop2,slow2,slow15]

TASKS_ROOT holds the tasks with their perf helpers put in (`arenactl task materialize`).
Each session is one gate-runner job per task; --sessions K repeats it (run-to-run spread).
Prints a table per task and writes OUT/paired-check.json. Per case, a candidate's ratio is the
median over rounds of original / candidate (arena's estimator, arena-report's pair_ratio); a
task's, the mean over cases (the paper's aggregation). Reading of reports follows
crates/arena-eval/src/aka_perf.rs (build/performance_report.json, perf/benchmark_results.json,
GEAK_RESULT_LATENCY_MS=… in the output).
"""
import argparse
import json
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import time

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GATES = os.path.join(ROOT, "crates/arena-eval/trusted/arena_trusted/gates.py")
WORK = "/tmp/arena-paired-check"
UIDS = {"baseline": 60001, "noop": 60002, "noop2": 60003, "slow2": 60005, "slow15": 60006, "syncnoop": 60007}
# A role's directories are named by its user (k60001, …): every kernel's paths, and so its
# environment, have the same length.

SLOW = '''

# --- arena paired-check: every Triton kernel of this module launched again on every
# --- EVERY-th call (1: twice per call, 2: on every other call) ---
def _arena_slow(every):
    from triton.runtime.jit import JITFunction

    def wrap(fn):
        orig = fn.run
        calls = [0]

        def run(*args, **kwargs):
            calls[0] += 1
            out = orig(*args, **kwargs)
            if calls[0] % every == 0:
                orig(*args, **kwargs)
            return out

        fn.run = run

    for obj in list(globals().values()):
        jf = obj
        while jf is not None and not isinstance(jf, JITFunction):
            jf = getattr(jf, "fn", None)
        if isinstance(jf, JITFunction) and not getattr(jf, "_arena_slow", False):
            jf._arena_slow = True
            wrap(jf)


_arena_slow(EVERY)
'''


SYNC_NOOP = '''

# --- arena paired-check: the kernel's process times itself; this makes its synchronize a no-op ---
import torch as _arena_torch

_arena_torch.cuda.synchronize = lambda *a, **k: None
'''


def tasks_under(root, wanted):
    out = []
    for d, _, files in os.walk(root):
        if "config.yaml" in files:
            tid = os.path.relpath(d, root)
            if not wanted or tid in wanted:
                out.append(tid)
    return sorted(out)


def prepare_dir(path, uid, gid, mode):
    os.makedirs(path, exist_ok=True)
    os.chown(path, uid, gid)
    os.chmod(path, mode)


def job_for(task_dir, cfg, roles, pairs, seed, work):
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "LD_LIBRARY_PATH", "CUDA_VISIBLE_DEVICES")}
    env.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    src = cfg["source_file_path"][0].lstrip("./")
    trees, steps = [], []

    def step(name, role, commands, reports=None, capture=None):
        tree = os.path.join(work, "kernels", f"k{UIDS[role]}")
        home = os.path.join(work, "scratch", f"k{UIDS[role]}")
        return {
            "name": name, "commands": commands, "timeout": 900, "cwd": tree, "tree": tree,
            "user": {"uid": UIDS[role], "gid": UIDS[role]},
            "env": {"HOME": home, "TMPDIR": home, "TRITON_CACHE_DIR": home + "/.triton", "PYTHONHASHSEED": "0"},
            "reports": reports, "capture": capture, "go_on": False,
        }

    for role in roles:
        tree = os.path.join(work, "kernels", f"k{UIDS[role]}")
        prepare_dir(tree, 0, UIDS[role], 0o1770)
        prepare_dir(os.path.join(tree, "build"), UIDS[role], UIDS[role], 0o750)
        prepare_dir(os.path.join(work, "scratch", f"k{UIDS[role]}"), UIDS[role], UIDS[role], 0o700)
        overlay = []
        if role.startswith("slow") or role == "syncnoop":
            every = 1 if role == "slow2" else 2
            path = os.path.join(work, "sources", role, src)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(os.path.join(task_dir, src)) as f:
                text = f.read()
            with open(path, "w") as f:
                f.write(text + (SYNC_NOOP if role == "syncnoop" else SLOW.replace("EVERY", str(every))))
            os.chmod(path, 0o644)
            overlay.append({"rel": src, "from": path})
        trees.append({"path": tree, "gid": UIDS[role], "overlay": overlay})
        compile_step = step(f"compile-{role}", role, cfg["compile_command"])
        # The floor probe runs beside the original's compile only.
        compile_step["floor_start"] = role == "baseline"
        steps.append(compile_step)
    rng = random.Random(seed)
    first = True
    for r in range(pairs):
        order = list(roles)
        rng.shuffle(order)
        for role in order:
            name = f"perf{r}-{role}"
            s = step(name, role, cfg["performance_command"], f"perf/{name}", f"perf/{name}/output")
            s["floor_first"] = first
            first = False
            steps.append(s)
    return {
        "groups": [], "env": env, "out": os.path.join(work, "out"), "quiet": True,
        "task_root": task_dir, "trees": trees,
        "floor": {"user": {"uid": 60004, "gid": 60004}, "timeout": 120},
        "steps": steps, "deadline_s": 3000,
    }


def read_cases(d):
    """(case id -> ms) of one run, as arena's aka_perf reads it."""
    for name in ("performance_report.json", "alt/performance_report.json", "alt/build-perf_report.json",
                 "alt/perf_report.json", "alt/perf-benchmark_results.json"):
        p = os.path.join(d, name)
        if not os.path.exists(p):
            continue
        v = json.load(open(p))
        if isinstance(v, dict):
            v = v.get("test_cases", [v])
        out = {}
        for i, c in enumerate(v):
            t = c.get("execution_time_ms")
            if t is None and isinstance(c.get("timing_ms"), dict):
                t = c["timing_ms"].get("mean")
            if t is not None:
                out[str(c.get("test_case_id", f"test_case_{i}"))] = float(t)
        if out:
            return out
    text = open(os.path.join(d, "output"), errors="replace").read() if os.path.exists(os.path.join(d, "output")) else ""
    m = re.search(r"GEAK_RESULT_LATENCY_MS=([0-9.]+)", text)
    return {"test_case_0": float(m.group(1))} if m else {}


def session(tid, task_dir, roles, pairs, seed):
    cfg = yaml.safe_load(open(os.path.join(task_dir, "config.yaml")))
    work = os.path.join(WORK, tid.replace("/", "__"))
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(os.path.join(work, "out"), mode=0o700)
    job = job_for(task_dir, cfg, roles, pairs, seed, work)
    with open(os.path.join(work, "job.json"), "w") as f:
        json.dump(job, f, indent=1)
    t0 = time.monotonic()
    subprocess.run([sys.executable, "-I", "-B", GATES, os.path.join(work, "job.json")], check=False)
    wall = time.monotonic() - t0
    out = job["out"]
    rec = json.load(open(os.path.join(out, "evaluator.json")))
    codes = dict(line.split() for line in open(os.path.join(out, "gates")) if line.strip())
    runs = {}  # role -> round -> cases
    for r in range(pairs):
        for role in roles:
            name = f"perf{r}-{role}"
            if codes.get(name) == "0":
                runs.setdefault(role, {})[r] = read_cases(os.path.join(out, "perf", name))
    walls = {}
    for c in rec.get("commands", []):
        walls.setdefault(c["step"].split("-", 1)[-1] if c["step"].startswith("perf") else c["step"], []).append(c["wall_s"])
    res = {"task": tid, "wall_s": wall, "codes": codes, "floor": rec.get("floor"), "setup_s": rec.get("setup_s"),
           "perf_wall_s": {k: statistics.median(v) for k, v in walls.items() if k in roles}, "candidates": {}}
    base = runs.get("baseline", {})
    for role in roles:
        if role == "baseline":
            continue
        cand = runs.get(role, {})
        cases = {}
        for cid in sorted(set().union(*[set(c) for c in base.values()]) if base else []):
            pairs_ = [(base[r][cid], cand[r][cid]) for r in range(pairs)
                      if r in base and r in cand and cid in base[r] and cid in cand[r]
                      and base[r][cid] > 0 and cand[r][cid] > 0]
            if len(pairs_) == pairs:
                cases[cid] = {
                    "ratio": statistics.median(b / c for b, c in pairs_),
                    "baseline_ms": statistics.median(b for b, _ in pairs_),
                    "candidate_ms": statistics.median(c for _, c in pairs_),
                    "pairs_ms": pairs_,
                }
        ok = bool(cases) and len(cases) == len(base.get(0, {}))
        res["candidates"][role] = {
            "speedup": statistics.fmean(c["ratio"] for c in cases.values()) if ok else None,
            "cases": cases,
        }
    return res


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("tasks_root")
    ap.add_argument("out")
    ap.add_argument("--tasks", nargs="*", default=[])
    ap.add_argument("--pairs", type=int, default=5)
    ap.add_argument("--sessions", type=int, default=1)
    ap.add_argument("--candidates", default="noop,slow2,slow15")
    a = ap.parse_args()
    roles = ["baseline"] + [c for c in a.candidates.split(",") if c]
    os.makedirs(a.out, exist_ok=True)
    results = []
    for tid in tasks_under(a.tasks_root, set(a.tasks)):
        for k in range(a.sessions):
            r = session(tid, os.path.join(a.tasks_root, tid), roles, a.pairs, seed=1000 * k + 7)
            r["session"] = k
            results.append(r)
            line = " ".join(
                f"{role}={c['speedup']:.4f}" if c["speedup"] else f"{role}=FAIL"
                for role, c in r["candidates"].items()
            )
            print(f"{tid} s{k}: {line}  (wall {r['wall_s']:.1f} s, perf run {r['perf_wall_s']}, codes "
                  f"{[k2 for k2, v in r['codes'].items() if v != '0']} failed)", flush=True)
            if k == 0:
                for role, c in r["candidates"].items():
                    for cid, case in c["cases"].items():
                        print(f"    {role} {cid}: base {case['baseline_ms']:.5f} ms cand "
                              f"{case['candidate_ms']:.5f} ms ratio {case['ratio']:.4f}")
            with open(os.path.join(a.out, "paired-check.json"), "w") as f:
                json.dump(results, f, indent=1)
    print("floor:", json.dumps(results[0]["floor"]) if results else None)


if __name__ == "__main__":
    main()
