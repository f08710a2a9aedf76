#!/usr/bin/env python3
"""Benchmark: what arena's trusted evaluator costs per task, against the same task's own harness
run directly, and what its split (each kernel in a process of its own) costs, against the same
evaluation with the kernels inside the evaluator — side by side, on the same machine, without
containers (the container costs are ci/bench/container-lifecycle.sh's and
docs/benchmarks.md's).

Per task and repeat, in an order that rotates:
  direct   the AgentKernelArena way: `python3 scripts/task_runner.py compile|correctness|performance`
           in a fresh copy of the task, once on the original kernel (the baseline evaluation) and
           once on the reference solution (the agent's evaluation; an untouched copy where the
           task has none in ci/solutions, as AgentKernelArena's tasks materialized with arena's
           harnesses) — the harness times itself;
  trusted  what the runner does now: the trusted evaluator on the original kernel alone (the
           baseline evaluation), then on the original and the solution paired (the evaluation),
           each kernel in a process of its own user, timed from outside, its outputs checked;
  inline   the same two evaluations by the same evaluator code with the kernels called inside
           the evaluator's process (ci/bench/inline-evaluator.py): the same gates, inputs,
           checks, batches, pairs, sessions and graph replays, no split.
Prints each repeat's wall times and the per-task ratios trusted / direct and trusted / inline,
and writes OUT/overhead.json. The evaluator's settings are the runner's defaults, but for the
variables below.

usage: sudo python3 ci/bench/trusted-overhead.py OUT_DIR [REPEATS] [TASK_DIR ...]
       (default tasks: the CPU samples matmul and prefix_sum; on a GPU machine pass
       tasks/triton2triton/arena/row_softmax etc.). Runs as root: kernels run as users 60001/60002.
       ARENA_BENCH_SIDES=direct,trusted,inline (the default) picks the sides.
       ARENA_BENCH_PAIRS=N times with at most N pairs per configuration (default 10, the
       runner's), and the paired evaluation's speedups, and where its pairs stopped, are
       printed beside. ARENA_BENCH_PERF='{"stop_width": 0}' takes all N, over the sessions.
       ARENA_CHECKED_CALLS=N checks a secret sample of N outputs per timed batch (0: every one;
       unset: the evaluator's default, 64).
       ARENA_BENCH_PERF='{"max_calls": 1024, ...}' sets any other field of the evaluator's
       PerfSettings (arena_trusted/perf_settings.py), to try what a setting would save.
       ARENA_BENCH_PROFILE=DIR runs each evaluator under cProfile, its profile in DIR.
       ARENA_BENCH_EVALUATOR=DIR runs the evaluator whose files DIR holds (arena_trusted of
       another commit: a before/after of a change, in the same call).
Each trusted evaluation's performance gate is also printed by part (perf_parts.py: fresh
sessions, sizing, warm-ups, inputs, captures, writes, timed windows, checks, the rest) beside
the seconds its timed batches read, summed over the original alone and the paired evaluation:
where the evaluator's time goes.
"""
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OURS = os.path.join(ROOT, "crates/arena-eval/trusted/arena_trusted")
EVALUATOR = os.path.join(os.path.abspath(os.environ.get("ARENA_BENCH_EVALUATOR") or OURS), "evaluate.py")
if not os.path.isfile(EVALUATOR):
    sys.exit(f"ARENA_BENCH_EVALUATOR: no evaluate.py in {os.path.dirname(EVALUATOR)}")
# job.json's `perf` with every field (the evaluator refuses one that lacks any): the
# evaluator's own type, its defaults the runner's (arena_trusted/perf_settings.py), read from
# this tree's evaluator also where ARENA_BENCH_EVALUATOR runs another (whose fields must be
# the same: it refuses a job that names others).
sys.path.insert(0, OURS)
from perf_settings import PerfSettings  # noqa: E402
sys.path.pop(0)
INLINE = os.path.join(ROOT, "ci/bench/inline-evaluator.py")
DEFAULT_TASKS = ["tasks/python2python/arena/matmul", "tasks/python2python/arena/prefix_sum"]
USERS = {"baseline": 60001, "candidate": 60002}
# The Python on PATH for both sides (a GPU machine's is the one with its torch), else the
# system's; ARENA_BENCH_PYTHON names another. The kernel processes run as other users: a
# root-only virtualenv or pyenv tree will not do (in the containers it is the image's
# /usr/bin/python3).
PYTHON = os.environ.get("ARENA_BENCH_PYTHON") or shutil.which("python3") or "/usr/bin/python3"
# Pairs per configuration (the runner's default, or `--trusted-pairs`).
PAIRS = int(os.environ.get("ARENA_BENCH_PAIRS", "10"))


def perf_settings():
    """The evaluator's settings for this bench: the defaults, with ARENA_BENCH_PAIRS,
    ARENA_CHECKED_CALLS and ARENA_BENCH_PERF's fields (a field PerfSettings lacks is refused
    by PerfSettings.of, named)."""
    fields = {"pairs": PAIRS, "checked_calls": int(os.environ.get("ARENA_CHECKED_CALLS", PerfSettings.checked_calls))}
    try:
        return PerfSettings.overridden(fields, os.environ.get("ARENA_BENCH_PERF"), "ARENA_BENCH_PERF")
    except ValueError as e:
        sys.exit(str(e))


def solution_dir(task):
    rel = os.path.relpath(task, os.path.join(ROOT, "tasks"))
    return os.path.join(ROOT, "ci/solutions", rel)


def candidate_file(task, src):
    """The agent's version of kernel file `src`: the reference solution (ci/solutions) where
    the task has one, else an untouched copy of the original (an AgentKernelArena task
    materialized with arena's harnesses: the paired evaluation is then the noop's)."""
    solved = os.path.join(solution_dir(task), os.path.basename(src))
    return solved if os.path.isfile(solved) else os.path.join(task, src)


def sources(task):
    """The kernel files (config.yaml's source_file_path), read without a YAML parser (the GPU
    machine's Python may have none): a list under the key, indented or not (the samples write
    `- x`, `arenactl task materialize` writes `  - x`), or one path beside it."""
    out, inside = [], False
    for line in open(os.path.join(task, "config.yaml")):
        if line.startswith("source_file_path:"):
            inside = True
            scalar = line.split(":", 1)[1].split("#", 1)[0].strip()
            if scalar:
                return [scalar]
        elif inside and line.lstrip().startswith("- "):
            out.append(line.lstrip()[2:].split("#", 1)[0].strip())
        elif inside and line.strip():
            break
    if not out:
        sys.exit(f"{task}/config.yaml: no source_file_path")
    return out


def harness(task):
    for line in open(os.path.join(task, "config.yaml")):
        if line.startswith("trusted_harness:"):
            return line.split(":", 1)[1].strip()
    sys.exit(f"{task}/config.yaml: no trusted_harness (a self-reported task has no trusted path)")


def direct(task, solved):
    """One evaluation the AKA way; returns its seconds (every gate must pass)."""
    work = tempfile.mkdtemp(prefix="arena-bench-direct-")
    try:
        shutil.copytree(task, work, dirs_exist_ok=True)
        if solved:
            for src in sources(task):
                shutil.copy(candidate_file(task, src), os.path.join(work, src))
        t0 = time.perf_counter()
        ok = all(
            subprocess.run([PYTHON, "scripts/task_runner.py", gate], cwd=work,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode == 0
            for gate in ("compile", "correctness", "performance"))
        if not ok:
            sys.exit(f"{task}: the direct evaluation ({'solution' if solved else 'original'}) failed a gate")
        return time.perf_counter() - t0
    finally:
        shutil.rmtree(work, ignore_errors=True)


def trusted(task, roles, inline=False):
    """One evaluation by arena's evaluator on `roles` (`inline`: its peer without the split);
    returns its seconds and its record's seconds per gate, and whether its zygote was started
    before the harness was loaded (every gate must pass)."""
    work = tempfile.mkdtemp(prefix="arena-bench-trusted-")
    try:
        os.chmod(work, 0o755)
        kernels = {}
        for role in roles:
            k = os.path.join(work, "kernel", role)
            for src in sources(task):
                os.makedirs(os.path.dirname(os.path.join(k, src)), exist_ok=True)
                origin = os.path.join(task, src)
                if role == "candidate":
                    origin = candidate_file(task, src)
                shutil.copy(origin, os.path.join(k, src))
            kernels[role] = k
            s = os.path.join(work, "scratch", role)
            os.makedirs(s)
            os.chown(s, USERS[role], USERS[role])
            os.chmod(s, 0o700)
        for d in ("kernel", "scratch"):
            os.chmod(os.path.join(work, d), 0o755)
            for r in os.listdir(os.path.join(work, d)):
                if d == "kernel":
                    subprocess.run(["chmod", "-R", "a+rX", os.path.join(work, d, r)], check=True)
        out = os.path.join(work, "out")
        os.makedirs(out, mode=0o700)
        # The runner's defaults (crates/arena-eval/src/trusted.rs: Job::new, PerfSettings).
        job = {
            "harness": os.path.join(task, harness(task)),
            "roles": roles,
            "kernels": kernels,
            "users": {r: {"uid": USERS[r], "gid": USERS[r]} for r in roles},
            "scratch": {r: os.path.join(work, "scratch", r) for r in roles},
            "groups": [],
            "timeouts": {"compile": 300, "correctness": 300, "performance": 600},
            "trials": 2,
            "perf": perf_settings().as_job(),
            "out": out,
            "pass_env": ["CUDA_VISIBLE_DEVICES", "LD_LIBRARY_PATH", "PATH"],
            "unseen": False,
            "quiet_kernels": True,
            "deadline_s": 1200,
        }
        with open(os.path.join(work, "job.json"), "w") as f:
            json.dump(job, f)
        argv = [PYTHON, "-I", "-B"]
        profile = os.environ.get("ARENA_BENCH_PROFILE")
        if profile:
            os.makedirs(profile, exist_ok=True)
            side = "inline" if inline else "trusted"
            name = f"{os.path.basename(task)}-{side}-{'-'.join(roles)}-{time.time_ns()}.prof"
            argv += ["-m", "cProfile", "-o", os.path.join(profile, name)]
        t0 = time.perf_counter()
        subprocess.run(argv + [INLINE if inline else EVALUATOR, os.path.join(work, "job.json")],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        dt = time.perf_counter() - t0
        try:
            gates = dict(line.split() for line in open(os.path.join(out, "gates")))
        except OSError:
            gates = {}
        try:
            record = json.load(open(os.path.join(out, "evaluator.json")))
        except (OSError, ValueError) as e:
            record = {"error": f"no evaluator.json: {e}"}
        if gates != {"compile": "0", "correctness": "0", "performance": "0"}:
            why = record.get("error")
            side = "inline" if inline else "trusted"
            sys.exit(f"{task}: the {side} evaluation of {roles} did not pass: gates {gates}: {why}")
        seen = {g: round(v, 3) for g, v in record.get("gate_s", {}).items()}
        # Where the performance gate's seconds went (the evaluator's record), and what its
        # timed batches read.
        if "performance_parts_s" in record:
            seen["parts"] = record["performance_parts_s"]
            seen["measured"] = record.get("performance_measured_s")
        if len(roles) > 1:
            # Each case's speedup (median pair ratio) and its pairs' range: the noise that
            # fewer pairs buy.
            cases = json.load(open(os.path.join(out, "performance_report.json")))
            seen["speedups"] = []
            # Where the pairs stopped (a stop width set): sessions taken and why.
            stop = next((c["stop"] for c in cases if "stop" in c), None)
            if stop:
                seen["stop"] = {k: stop[k] for k in ("sessions", "reason", "width")}
            for c in cases:
                ratios = [b / x for b, x in c.get("pairs_ms", []) if x > 0]
                if ratios:
                    seen["speedups"].append([round(statistics.median(ratios), 3), round(min(ratios), 3), round(max(ratios), 3)])
        if "zygote" in record:
            seen["zygote_started_early"] = record["zygote"].get("early")
        return dt, seen
    finally:
        shutil.rmtree(work, ignore_errors=True)


def parts_line(gate_s):
    """The performance gates' parts summed over the original alone and the paired evaluation,
    largest first, and what their timed batches read."""
    total, measured = {}, 0.0
    for evaluation in gate_s.values():
        for part, s in evaluation.get("parts", {}).items():
            total[part] = total.get(part, 0.0) + s
        measured += evaluation.get("measured") or 0.0
    if not total:
        return "not recorded (an evaluator before perf_parts.py)"
    gates = sum(total.values())
    parts = ", ".join(f"{p} {s:.2f}" for p, s in sorted(total.items(), key=lambda kv: -kv[1]) if s > 0)
    return f"{gates:.2f} s: {parts}; timed kernel work {measured:.3f} s ({100 * measured / max(gates, 1e-9):.1f}%)"


def main():
    if os.geteuid() != 0:
        sys.exit("run as root: the evaluator runs each kernel as a user of its own")
    out = sys.argv[1]
    repeats = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    tasks = [os.path.abspath(os.path.join(ROOT, t)) for t in (sys.argv[3:] or DEFAULT_TASKS)]
    sides = os.environ.get("ARENA_BENCH_SIDES", "direct,trusted,inline").split(",")
    unknown = set(sides) - {"direct", "trusted", "inline"}
    if unknown or "trusted" not in sides:
        sys.exit(f"ARENA_BENCH_SIDES: {','.join(sides)}: sides are direct, trusted, inline; trusted is needed")
    perf_settings()  # a bad ARENA_BENCH_PERF is refused before anything runs
    os.makedirs(out, exist_ok=True)
    rows = []
    print(f"{'task':12} {'rep':>3} " + " ".join(f"{s + ' s':>10}" for s in sides))
    for task in tasks:
        name = os.path.basename(task)
        for rep in range(repeats):
            # Rotate which side goes first, so that a drifting machine favours none.
            order = sides[rep % len(sides):] + sides[:rep % len(sides)]
            r = {"task": name, "repeat": rep}
            for side in order:
                if side == "direct":
                    r["direct_s"] = direct(task, solved=False) + direct(task, solved=True)
                else:
                    inline = side == "inline"
                    alone, alone_gates = trusted(task, ["baseline"], inline)
                    paired, paired_gates = trusted(task, ["baseline", "candidate"], inline)
                    r[f"{side}_s"] = alone + paired
                    r[f"{side}_gate_s"] = {"baseline": alone_gates, "paired": paired_gates}
            rows.append(r)
            print(f"{name:12} {rep:>3} " + " ".join(f"{r[s + '_s']:>10.2f}" for s in sides), flush=True)
            for side in ("trusted", "inline"):
                if f"{side}_gate_s" in r:
                    print(f"{'':12} {side} speedups (median, min, max of the pairs): {r[f'{side}_gate_s']['paired'].get('speedups')}", flush=True)
                    if "stop" in r[f"{side}_gate_s"]["paired"]:
                        print(f"{'':12} {side} pairs stopped: {r[f'{side}_gate_s']['paired']['stop']}", flush=True)
                    print(f"{'':12} {side} performance by part: {parts_line(r[f'{side}_gate_s'])}", flush=True)
    summary = {}
    for task in tasks:
        name = os.path.basename(task)
        mine = [r for r in rows if r["task"] == name]
        mean = {s: statistics.fmean(r[f"{s}_s"] for r in mine) for s in sides}
        summary[name] = {f"{s}_s": mean[s] for s in sides}
        line = f"{name}: " + ", ".join(f"{s} {mean[s]:.2f} s" for s in sides)
        for peer in ("direct", "inline"):
            if peer in sides:
                ratio = mean["trusted"] / mean[peer]
                summary[name][f"trusted_over_{peer}"] = ratio
                line += f"; trusted / {peer} {ratio:.3f} ({(ratio - 1) * 100:+.1f}%)"
        print(line)
    with open(os.path.join(out, "overhead.json"), "w") as f:
        json.dump({"pairs": PAIRS, "perf": perf_settings().as_job(), "rows": rows, "summary": summary}, f, indent=2)


if __name__ == "__main__":
    main()
