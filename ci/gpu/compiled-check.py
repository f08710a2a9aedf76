#!/usr/bin/env python3
"""Without containers: arena's trusted evaluator on imported KernelBench tasks, the untouched
ModelNew against the original eager and the original compiled by torch.compile (the harness's
COMPILED_BASELINE), timed in the same randomized pairs. Prints per task and case the three
kernels' times and the two speedups, and writes OUT/compiled-check.json. Runs on a GPU machine
or on a CPU one (inductor on a CPU needs g++ and Python's headers).

usage: python3 ci/gpu/compiled-check.py OUT_DIR TASK_DIR... (as root: kernel processes run as
users 60001 and 60002; run it with the Python that has torch)
ARENA_PAIRS: pairs per case (default 10). ARENA_COMPILE: torch.compile's options as JSON, in
place of the harness's (e.g. '{"backend": "aot_eager"}').
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
# job.json's `perf` with every field (the evaluator refuses one that lacks any): the
# evaluator's own type, its defaults the runner's (arena_trusted/perf_settings.py).
sys.path.insert(0, os.path.dirname(EVALUATOR))
from perf_settings import PerfSettings  # noqa: E402
sys.path.pop(0)
SOURCE = "source/model_new.py"


def setup(work, task_dir):
    shutil.rmtree(work, ignore_errors=True)
    harness = os.path.join(work, "harness")
    shutil.copytree(task_dir, harness)
    if os.environ.get("ARENA_COMPILE"):
        p = os.path.join(harness, "scripts/task_runner.py")
        text = open(p).read()
        assert "\nCOMPILED_BASELINE = {}\n" in text, f"{p}: no COMPILED_BASELINE to replace"
        open(p, "w").write(text.replace("\nCOMPILED_BASELINE = {}\n", f"\nCOMPILED_BASELINE = {os.environ['ARENA_COMPILE']}\n"))
    # The users arena's job has (arena_eval::trusted::users_of): the compiled original reads
    # the original's sources.
    users = {"baseline": 60001, "candidate": 60002, "compiled": 60003}
    for role, uid in users.items():
        if role != "compiled":
            d = os.path.join(work, "kernel", role, "source")
            os.makedirs(d)
            shutil.copy(os.path.join(task_dir, SOURCE), d)
        s = os.path.join(work, "scratch", role)
        os.makedirs(s)
        os.chown(s, uid, uid)
        os.chmod(s, 0o700)
    out = os.path.join(work, "out")
    os.makedirs(out)
    os.chmod(out, 0o700)
    for d in (work, os.path.join(work, "kernel"), os.path.join(work, "scratch")):
        os.chmod(d, 0o755)
    job = {
        "harness": os.path.join(harness, "scripts/task_runner.py"),
        "roles": ["baseline", "candidate"],
        "kernels": {r: os.path.join(work, "kernel", "baseline" if r == "compiled" else r) for r in users},
        "users": {r: {"uid": u, "gid": u} for r, u in users.items()},
        "scratch": {r: os.path.join(work, "scratch", r) for r in users},
        "groups": [],
        "timeouts": {"compile": 600, "correctness": 600, "performance": 900},
        "trials": 2,
        "perf": PerfSettings(pairs=int(os.environ.get("ARENA_PAIRS", "10")), sessions=1, gpu_sessions=1).as_job(),
        "out": out,
        "pass_env": ["CUDA_VISIBLE_DEVICES", "LD_LIBRARY_PATH", "PATH"],
        "unseen": False,
        "quiet_kernels": False,
        "deadline_s": 1800,
        "accelerator": os.path.exists("/dev/nvidiactl"),
    }
    with open(os.path.join(work, "job.json"), "w") as f:
        json.dump(job, f)
    return out


def ratio(pairs):
    r = [a / b for a, b in pairs if a > 0 and b > 0]
    return statistics.median(r) if r else None


def main():
    out_dir = sys.argv[1]
    os.makedirs(out_dir, exist_ok=True)
    results = {}
    for task_dir in sys.argv[2:]:
        name = "/".join(os.path.abspath(task_dir).split("/")[-2:])
        work = f"/tmp/compiled-check/{name.replace('/', '-')}"
        out = setup(work, task_dir)
        t0 = time.time()
        p = subprocess.run([sys.executable, "-I", "-B", EVALUATOR, os.path.join(work, "job.json")],
                           capture_output=True, text=True, timeout=1800)
        r = {"wall_s": round(time.time() - t0, 1), "stderr_tail": p.stderr[-2000:]}
        r["gates"] = open(os.path.join(out, "gates")).read().split()
        rec = json.load(open(os.path.join(out, "evaluator.json")))
        r["compiled_baseline"] = rec.get("compiled_baseline")
        r["gate_s"] = rec.get("gate_s")
        r["error"] = rec.get("error")
        try:
            cases = json.load(open(os.path.join(out, "performance_report.json")))
        except OSError:
            cases = []
        r["cases"] = cases
        results[name] = r
        print(f"{name}: gates {r['gates']} in {r['wall_s']} s; compiled baseline {json.dumps(r['compiled_baseline'])[:600]}",
              flush=True)
        if r["error"]:
            print("   error:", r["error"][-600:])
        for c in cases:
            if c.get("error"):
                print("  ", c["test_case_id"], "error:", c["error"][:300])
                continue
            eager = ratio(c.get("pairs_ms") or [])
            comp = ratio(c.get("compiled_pairs_ms") or [])
            print(f"   {c['test_case_id']}: eager {c.get('baseline_ms', 0):.4f} ms, compiled "
                  f"{c.get('compiled_ms', float('nan')):.4f} ms, ModelNew {c['execution_time_ms']:.4f} ms; "
                  f"speedup over eager {eager if eager is None else round(eager, 4)}, over compiled "
                  f"{comp if comp is None else round(comp, 4)}; timing {c.get('timing')} "
                  f"{c.get('compiled_error', '')[:300]} {json.dumps(c.get('graph_error')) if c.get('graph_error') else ''}",
                  flush=True)
        with open(os.path.join(out_dir, "compiled-check.json"), "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
