#!/usr/bin/env python3
"""Benchmark: what a whole locked set costs one agent, one repeat, on one machine, projected
from a sample run side by side with the tasks' own harnesses.

A sample of the lockfile's tasks, drawn per family (a task id's first two parts, e.g.
triton2triton/vllm) in proportion to the family's size with at least --least of each, runs
through `arenactl run` with the agent that changes nothing (ci/agents/noop.toml). Beside it each
sampled task's own harness runs directly on this machine: its config.yaml's compile,
correctness and performance commands in a fresh copy of the task with a fresh Triton cache,
--direct-reps times (half before the arena run, half after it), their mean counted twice: the
baseline's evaluation and the candidate's, as AgentKernelArena's own runner makes them. Printed per task and
per family: the task run's seconds (its result's timings.total_s), the harness's seconds for
the same work, their ratio; then the hours the whole set takes each way, every family's mean
times its count, plus the run's time outside task runs (image import), once.

usage: python3 ci/bench/set-projection.py --image-lock LOCK --out DIR [--sample N] [--least N]
         [--seed S] [--arenactl BIN] [--tasks-root DIR] [--direct-reps N] [--dry-run] [--json]
         [-- ARGS FOR arenactl run…]
e.g. on one NVIDIA GPU:
  python3 ci/bench/set-projection.py --image-lock lockfiles/aka-cuda.lock --out /tmp/proj \\
    --arenactl BIN/arenactl -- --gpus nvidia:0 --containerd SOCK
and on this repository's CPU tasks (how the script itself is checked):
  python3 ci/bench/set-projection.py --image-lock lockfiles/cpu.lock --out /tmp/proj \\
    --sample 3 --least 1 -- --gpus cpu:1 --containerd SOCK
"""

import argparse
import hashlib
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import tomllib
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
GATES = ("compile_command", "correctness_command", "performance_command")


def read_lock(lock: Path, tasks_root: Path | None) -> tuple[list[str], Path]:
    """The lockfile's task ids, sorted, and the directory they are under."""
    try:
        doc = tomllib.loads(lock.read_text())
    except (OSError, tomllib.TOMLDecodeError) as e:
        sys.exit(f"{lock}: {e}")
    tasks = sorted({i["task"] for i in doc.get("image", []) if i.get("task")})
    if not tasks:
        sys.exit(f"{lock}: no [[image]] names a task")
    if tasks_root is None:
        sets_file = (lock.parent / doc["sets"]).resolve()
        sets = tomllib.loads(sets_file.read_text())["set"]
        entry = next((s for s in sets if s["name"] == doc["set"]), None)
        if entry is None:
            sys.exit(f"{sets_file}: no set named {doc['set']!r} (the lockfile's `set`)")
        tasks_root = (sets_file.parent / entry["tasks"]).resolve()
    return tasks, tasks_root


def family(task: str) -> str:
    return "/".join(task.split("/")[:2])


def draw_sample(tasks: list[str], n: int, least: int, seed: int) -> list[str]:
    """`n` tasks (or more, where every family's `least` needs it), each family's share in
    proportion to its size by largest remainders; within a family the tasks first in the
    order of sha256(seed:id). The same lockfile, n, least and seed draw the same sample."""
    fams: dict[str, list[str]] = {}
    for t in tasks:
        fams.setdefault(family(t), []).append(t)
    total = len(tasks)
    want = {f: len(ts) * n / total for f, ts in fams.items()}
    take = {f: min(len(fams[f]), max(least, math.floor(w))) for f, w in want.items()}
    by_remainder = sorted(fams, key=lambda f: (-(want[f] - math.floor(want[f])), f))
    for f in by_remainder:
        if sum(take.values()) >= n:
            break
        if take[f] < len(fams[f]):
            take[f] += 1
    order = lambda t: hashlib.sha256(f"{seed}:{t}".encode()).hexdigest()  # noqa: E731
    return sorted(t for f, ts in fams.items() for t in sorted(ts, key=order)[: take[f]])


def run_arena(a: argparse.Namespace, sample: list[str], out: Path) -> tuple[float, dict]:
    """One `arenactl run` of the sample with the noop agent: its wall seconds, its report."""
    cmd = [a.arenactl, "run", "--image-lock", str(a.image_lock), "--agent",
           str(ROOT / "ci/agents/noop.toml"), "--out", str(out), "--json", "--tasks", *sample,
           *a.run_args]
    print("$ " + " ".join(cmd), file=sys.stderr, flush=True)
    t = time.monotonic()
    p = subprocess.run(cmd, stdout=subprocess.PIPE, cwd=ROOT)
    wall = time.monotonic() - t
    if p.returncode != 0:
        sys.exit(f"arenactl run failed (exit {p.returncode}); its run directory: {out}")
    return wall, json.loads(p.stdout)


def task_runs(out: Path) -> dict[str, dict]:
    """Every result.json of the run, by task id (one repeat)."""
    got = {}
    for p in sorted(out.glob("tasks/*/r0/result.json")):
        r = json.loads(p.read_text())
        got[r["task_id"]] = r
    return got


def run_direct(task_dir: Path) -> float:
    """The task's own three gate commands, in a fresh copy with a fresh Triton cache: seconds."""
    cfg = yaml.safe_load((task_dir / "config.yaml").read_text())
    with tempfile.TemporaryDirectory(prefix="arena-direct-") as w:
        work = Path(w) / "task"
        shutil.copytree(task_dir, work, symlinks=True)
        env = dict(os.environ, TRITON_CACHE_DIR=str(Path(w) / "triton"), HOME=w)
        t = time.monotonic()
        for gate in GATES:
            for c in cfg.get(gate) or []:
                p = subprocess.run(c, shell=True, cwd=work, env=env, capture_output=True, text=True)
                if p.returncode != 0:
                    sys.exit(f"{task_dir}: `{c}` ({gate}) failed directly (exit {p.returncode}):"
                             f"\n{p.stderr[-2000:]}")
        return time.monotonic() - t


def summarize(sample, runs, direct, counts, wall, lock) -> dict:
    rows = []
    for t in sample:
        r = runs.get(t)
        run_s = r["timings"]["total_s"] if r else None
        d = direct[t]
        # Two evaluations (baseline, candidate), each the mean of its direct runs.
        direct_s = 2 * statistics.fmean(d) if d else None
        rows.append({"task": t, "family": family(t), "trust": r.get("trust") if r else None,
                     "task_run_s": run_s, "harness_s": direct_s,
                     "ratio": run_s / direct_s if run_s and direct_s else None})
    fams = []
    for f in sorted(counts):
        fr = [x for x in rows if x["family"] == f and x["task_run_s"] and x["harness_s"]]
        if not fr:
            continue
        run_mean = statistics.fmean(x["task_run_s"] for x in fr)
        dir_mean = statistics.fmean(x["harness_s"] for x in fr)
        fams.append({"family": f, "tasks": counts[f], "sampled": len(fr),
                     "task_run_s": run_mean, "harness_s": dir_mean, "ratio": run_mean / dir_mean,
                     "projected_h": counts[f] * run_mean / 3600,
                     "projected_harness_h": counts[f] * dir_mean / 3600})
    in_runs = sum(x["task_run_s"] for x in rows if x["task_run_s"])
    outside = max(0.0, wall - in_runs)
    proj = sum(f["projected_h"] for f in fams) + outside / 3600
    proj_h = sum(f["projected_harness_h"] for f in fams)
    return {"lockfile": str(lock), "tasks_in_set": sum(counts.values()),
            "families_projected": len(fams), "families": len(counts), "sample": rows,
            "by_family": fams, "run_wall_s": wall, "outside_task_runs_s": outside,
            "projected_h": proj, "projected_harness_h": proj_h,
            "ratio": proj / proj_h if proj_h else None}


def show(s: dict) -> None:
    f = lambda v, p=1: "—" if v is None else f"{v:.{p}f}"  # noqa: E731
    print("| task | trust | task run s | harness s | ratio |")
    print("|---|---|---:|---:|---:|")
    for x in s["sample"]:
        print(f"| {x['task']} | {x['trust']} | {f(x['task_run_s'])} | {f(x['harness_s'])} "
              f"| {f(x['ratio'], 2)} |")
    print("\n| family | tasks | sampled | task run s (mean) | harness s (mean) | ratio "
          "| projected h | harness h |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for x in s["by_family"]:
        print(f"| {x['family']} | {x['tasks']} | {x['sampled']} | {f(x['task_run_s'])} "
              f"| {f(x['harness_s'])} | {f(x['ratio'], 2)} | {f(x['projected_h'], 2)} "
              f"| {f(x['projected_harness_h'], 2)} |")
    print(f"\nthe run: {s['run_wall_s']:.1f} s, of it {s['outside_task_runs_s']:.1f} s outside "
          f"task runs (counted once in the projection)")
    print(f"all {s['tasks_in_set']} tasks, one agent, one repeat: {s['projected_h']:.2f} h "
          f"({s['projected_h'] * 60:.1f} min) through arenactl run against "
          f"{s['projected_harness_h']:.2f} h ({s['projected_harness_h'] * 60:.1f} min) of their "
          f"harnesses ({f(s['ratio'], 2)}×)")
    if s["families_projected"] < s["families"]:
        print(f"warning: {s['families'] - s['families_projected']} families had no task run "
              "that finished with both timings; the projection leaves them out", file=sys.stderr)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--image-lock", type=Path, required=True)
    p.add_argument("--out", type=Path, required=True, help="a new directory for everything")
    p.add_argument("--sample", type=int, default=24, help="tasks to run (default 24)")
    p.add_argument("--least", type=int, default=3, help="tasks of each family at least (3)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--arenactl", default=shutil.which("arenactl") or "arenactl")
    p.add_argument("--tasks-root", type=Path, help="default: the set's `tasks` of sets.toml")
    p.add_argument("--direct-reps", type=int, default=1,
                   help="direct runs of each evaluation, half before the arena run (1)")
    p.add_argument("--dry-run", action="store_true", help="print the sample and stop")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.add_argument("run_args", nargs="*", help="after --: more arguments for `arenactl run`")
    a = p.parse_args()
    if a.sample < 1 or a.least < 0 or a.direct_reps < 1:
        p.error("--sample and --direct-reps must be at least 1, --least at least 0")
    a.image_lock = a.image_lock.resolve()
    tasks, root = read_lock(a.image_lock, a.tasks_root)
    counts: dict[str, int] = {}
    for t in tasks:
        counts[family(t)] = counts.get(family(t), 0) + 1
    sample = draw_sample(tasks, a.sample, a.least, a.seed)
    missing = [t for t in sample if not (root / t / "config.yaml").is_file()]
    if missing:
        sys.exit(f"{root}: no config.yaml for {', '.join(missing)} (--tasks-root)")
    print(f"{len(sample)} of {len(tasks)} tasks, {len(counts)} families, seed {a.seed}: "
          + " ".join(sample), file=sys.stderr)
    if a.dry_run:
        return
    try:
        a.out.mkdir(parents=True, exist_ok=False)
    except FileExistsError:
        sys.exit(f"{a.out}: exists (--out takes a new directory)")
    direct: dict[str, list[float]] = {t: [] for t in sample}
    before = a.direct_reps // 2

    def direct_round(reps: int) -> None:
        for _ in range(reps):
            for t in sample:
                direct[t].append(run_direct(root / t))

    direct_round(before)
    wall, _report = run_arena(a, sample, a.out / "run")
    direct_round(a.direct_reps - before)
    s = summarize(sample, task_runs(a.out / "run"), direct, counts, wall, a.image_lock)
    (a.out / "projection.json").write_text(json.dumps(s, indent=1) + "\n")
    if a.json:
        print(json.dumps(s, indent=1))
    else:
        show(s)


if __name__ == "__main__":
    main()
