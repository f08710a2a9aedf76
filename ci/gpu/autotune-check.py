#!/usr/bin/env python3
"""On a GPU machine: does a task's Triton autotuner choose differently from one process to the
next, and does its time follow the choice? Runs the task's own performance command RUNS times,
each in a fresh copy with a fresh Triton cache and TRITON_PRINT_AUTOTUNING=1, and prints per
run the configuration chosen for each (kernel, key) and each case's reported time, then per
configuration the mean time of the runs that chose it.

usage: python3 ci/gpu/autotune-check.py OUT_DIR RUNS TASK_DIR...   (AKA tasks with their perf
       helpers materialized: `arenactl task materialize`)
"""
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

# What Triton 3.6 prints when a kernel's autotuning finishes (runtime/autotuner.py).
CHOSEN = re.compile(r"Triton autotuning for function (\S+),\s*with key as (.*?),\s*finished after ([0-9.]+)s,\s*best config selected: (.*?);", re.S)


def autotune_choices(output):
    return [{"kernel": k, "key": key, "config": cfg, "tuning_s": float(t)} for k, key, t, cfg in CHOSEN.findall(output)]


def run_once(task):
    work = tempfile.mkdtemp(prefix="arena-autotune-")
    try:
        tree = os.path.join(work, "task")
        shutil.copytree(task, tree, ignore=shutil.ignore_patterns("build"))
        env = dict(os.environ, TRITON_PRINT_AUTOTUNING="1", TRITON_CACHE_DIR=os.path.join(work, "triton"))
        p = subprocess.run(["python3", "scripts/task_runner.py", "performance"], cwd=tree, env=env,
                           capture_output=True, text=True, timeout=300)
        try:
            cases = json.load(open(os.path.join(tree, "build/performance_report.json")))
        except (OSError, ValueError):
            cases = []
        return autotune_choices(p.stdout), {c["test_case_id"]: c["execution_time_ms"] for c in cases}
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main():
    out, runs, tasks = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
    os.makedirs(out, exist_ok=True)
    result = {}
    for task in tasks:
        name = os.path.relpath(task, os.path.dirname(os.path.dirname(task)))
        rows = []
        for i in range(runs):
            chosen, times = run_once(task)
            rows.append({"chosen": chosen, "times_ms": times})
            label = "; ".join(f"{c['kernel']}[{c['key']}]: {c['config']} ({c['tuning_s']:.2f} s)" for c in chosen) or "no autotuning"
            print(f"{name} run {i + 1}: " + " ".join(f"{k}={v:.4f}" for k, v in sorted(times.items())) + f"  | {label}", flush=True)
        by_choice = {}
        for r in rows:
            picked = [(c["kernel"], c["key"], c["config"]) for c in r["chosen"]]
            by_choice.setdefault(json.dumps(picked), []).append(r["times_ms"])
        for choice, runs_of in by_choice.items():
            means = {k: statistics.fmean(t[k] for t in runs_of if k in t) for k in sorted(runs_of[0])}
            print(f"{name}: {len(runs_of)} run(s) chose {choice}: " + " ".join(f"{k}={v:.4f}" for k, v in means.items()))
        result[name] = rows
    with open(os.path.join(out, "autotune-check.json"), "w") as f:
        json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
