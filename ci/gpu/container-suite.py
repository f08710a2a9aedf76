#!/usr/bin/env python3
"""The GPU adversary suite through containers. Every attack of
ci/gpu/adversaries/ becomes a candidate of each task, evaluated two ways:

- `eval`: the runner's Evaluate API (`arenactl eval` against `arenactl runner serve`), in a warm
  evaluator container per task and GPU;
- `run`: `arenactl run`, a whole task run: the baseline's, the agent's and the evaluator's
  containers. An agent made here for each attack copies the attack's file over the task's kernel
  file in its workspace.

An untouched copy of the task's kernel runs in the same call as the control: the original's own
file for `eval`, and ci/agents/noop.toml for `run`. Each attack gets a verdict by the rules of
ci/gpu/adversary-suite.py: it failed a gate, gained nothing, GAINED, or reads within noise. The
script prints a markdown table and writes OUT/container-suite.json.

usage: sudo python3 ci/gpu/container-suite.py BIN_DIR TASKS_DIR OUT [--paths eval,run]
           [--tasks ID,...] [--attacks A,...] [--pairs N] [--cases A:B] [--deadline SECONDS]
           [--work DIR] [--unit-timeout SECONDS] [--run-attacks A,...] [--task-attacks ID=A,B ...]
       python3 ci/gpu/container-suite.py - - OUT --table-from WORK/results.json

BIN_DIR: release `arenactl`, containerd-bundle.tar.xz and start-containerd.sh
(../shared/gpu/pack-containerd.sh and its partner script). TASKS_DIR: task dirs that name a
trusted harness (`arenactl task materialize --harnesses tasks/aka-harnesses`, `arenactl task
import kernelbench`), laid out by id. The tasks are cut to `--cases` of their TEST_SHAPES
(default the first) and locked here on images/cuda-host.toml. Each candidate is one file, as an
agent's edit or an Evaluate request sends it: the preamble with the task's own kernel embedded
(adversary-suite.py, LOAD_EMBEDDED).

Results are saved to WORK (default /tmp/arena-csuite) as they come. A later call on the same
machine goes on where an earlier one stopped (at its deadline, or at the device's per-call
limit), and the lock and the imported images are kept; a task with attacks left has its
untouched copy measured again in that call. `--deadline` stops starting new work after
that many seconds. One worker per GPU.
"""
import argparse
import concurrent.futures as cf
import importlib.util
import json
import os
import shutil
import signal
import subprocess
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_spec = importlib.util.spec_from_file_location("adversary_suite", os.path.join(ROOT, "ci/gpu/adversary-suite.py"))
suite = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(suite)
tc = suite.tc
T0 = time.time()
# This call, named in each unit's record: a unit is judged against its own call's control.
CALL = int(T0)


def say(*a):
    print(f"[{time.time() - T0:6.0f} s]", *a, flush=True)


def sh(argv, **kw):
    return subprocess.run(argv, capture_output=True, text=True, **kw)


class Suite:
    def __init__(self, args):
        self.args = args
        self.work = os.path.abspath(args.work)
        self.lock = os.path.join(self.work, "adv.lock")
        self.saved = os.path.join(self.work, "results.json")
        self.results = json.load(open(self.saved)) if os.path.exists(self.saved) else {}
        self.mutex = threading.Lock()
        self.deadline = T0 + args.deadline
        self.env = dict(os.environ, ARENA_STORE=args.store or os.path.join(self.work, "store"), ARENA_HOST_ROOT="/")
        # One worker per slot: a GPU of the machine each, or (`cpu:N`, to try the script on a
        # machine without one) N CPU slots.
        if args.gpus.startswith("cpu:"):
            self.slots, self.serve_gpus = ["cpu:1"] * int(args.gpus[4:]), args.gpus
        else:
            n = sh(["nvidia-smi", "-L"]).stdout.count("GPU ")
            self.slots = [f"nvidia:{i}" for i in range(n)]
            self.serve_gpus = "nvidia:" + ",".join(map(str, range(n)))

    def arenactl(self, *argv, timeout=None):
        return subprocess.run([os.path.join(self.work, "bin", "arenactl"), *argv], capture_output=True, text=True,
                              env=self.env, cwd=ROOT, timeout=timeout)

    def set_up(self):
        """containerd, the tasks (cut and locked once), their images, and each candidate file."""
        a, w = self.args, self.work
        os.makedirs(w, exist_ok=True)
        shutil.copytree(a.bin_dir, os.path.join(w, "bin"), dirs_exist_ok=True)
        ctd = os.path.join(w, "containerd")
        try:  # one left by a call the device's limit ended
            os.kill(int(open(os.path.join(ctd, "containerd.pid")).read()), signal.SIGTERM)
            time.sleep(1)
        except (OSError, ValueError):
            pass
        self.sock = sh(["bash", os.path.join(w, "bin/start-containerd.sh"), os.path.join(w, "bin/containerd-bundle.tar.xz"), ctd],
                       check=True).stdout.strip().splitlines()[-1]
        tasks = os.path.join(w, "tasks")
        if not os.path.isdir(tasks):
            shutil.copytree(a.tasks_dir, tasks + ".new")
            lo, hi = (a.cases.split(":") + [""])[:2]
            for _, (_, harness, _, _) in tc.task_root_tasks(tasks + ".new").items():
                with open(harness, "a") as f:  # the cut the adversary suite's --cases makes
                    f.write(f"\nTEST_SHAPES = TEST_SHAPES[{lo}:{hi}]\n")
            os.rename(tasks + ".new", tasks)
        self.tasks = tc.task_root_tasks(tasks)
        with open(os.path.join(w, "sets.toml"), "w") as f:
            f.write(f'[[set]]\nname = "adv"\nrecipe = "{ROOT}/images/{a.recipe}.toml"\ntasks = "{tasks}"\n'
                    'task_types = ["triton2triton", "kernelbench"]\n')
        # Hash-based .pyc files (ci/gpu/arena-run.sh says why): the host's userland is the image.
        # Once: written again, they would change the image a resumed call's containerd holds.
        a.recipe == "cuda-host" and not os.path.exists(self.lock) and sh(["python3", "-m", "compileall", "-q", "-f", "-j", "0", "--invalidation-mode", "unchecked-hash",
            "/usr/lib/python3.12", "/opt/torch/.venv/lib/python3.12/site-packages"])
        t = time.time()
        for argv in (["lock", "--sets", os.path.join(w, "sets.toml"), "--set", "adv", "--out", self.lock],
                     ["image", "load", "--image-lock", self.lock, "--containerd", self.sock]):
            p = self.arenactl(*argv)
            if p.returncode:
                raise SystemExit(f"arenactl {argv[0]}: {p.stderr[-3000:]}")
        say(f"locked and loaded {len(self.tasks)} task(s) in {time.time() - t:.0f} s")
        self.chosen = [x for x in (a.attacks.split(",") if a.attacks else suite.attacks()) if x != "untouched"]
        self.run_chosen = [x for x in a.run_attacks.split(",") if x != "untouched"] if a.run_attacks else None
        self.ids = a.tasks.split(",") if a.tasks else sorted(self.tasks)
        self.per_task = task_attacks(a)
        if set(self.per_task) - set(self.ids):
            raise SystemExit(f"--task-attacks: no task {sorted(set(self.per_task) - set(self.ids))} here")
        for tid in self.ids:
            tdir, _, rel, entry = self.tasks[tid]
            d = self.cand_dir(tid)
            os.makedirs(d, exist_ok=True)
            original = open(os.path.join(tdir, rel)).read()
            open(os.path.join(d, "rel"), "w").write(rel)
            open(os.path.join(d, "untouched.py"), "w").write(original)
            for x in sorted(set(self.chosen + (self.run_chosen or []) + self.per_task.get(tid, []))):
                open(os.path.join(d, x + ".py"), "w").write(suite.candidate_source(entry, x, original))
        os.chmod(w, 0o755)
        for d, _, _ in os.walk(os.path.join(w, "cands")):
            os.chmod(d, 0o755)

    def cand_dir(self, tid):
        return os.path.join(self.work, "cands", tid.replace("/", "_"))

    def save(self, key, rec):
        with self.mutex:
            self.results[key] = rec
            with open(self.saved + ".tmp", "w") as f:
                json.dump(self.results, f, indent=1)
            os.replace(self.saved + ".tmp", self.saved)

    def todo(self, path):
        """(task, attack) in order, the untouched copy first for each task, less what is done."""
        chosen = self.run_chosen if path == "run" and self.run_chosen is not None else self.chosen
        units = [(t, x) for t in self.ids for x in ["untouched"] + self.per_task.get(t, chosen)]
        left = [u for u in units if f"{path}/{u[0]}/{u[1]}" not in self.results]
        # The control is measured in the same call as the attacks it is read against: a task
        # with attacks left gets its untouched copy again (first), replacing an earlier call's.
        again = [(t, "untouched") for t in self.ids if (t, "untouched") not in left and any(u[0] == t for u in left)]
        return sorted(again + left, key=lambda u: (self.ids.index(u[0]), u[1] != "untouched"))

    def pool(self, path, units, each):
        """`each(unit, slot)` for every unit, one worker per slot, none started after the deadline."""
        pending = list(units)
        lock = threading.Lock()

        def worker(slot):
            while True:
                with lock:
                    if not pending or time.time() > self.deadline:
                        return
                    unit = pending.pop(0)
                t = time.time()
                rec = each(unit, slot)
                rec.update(path=path, task=unit[0], attack=unit[1], slot=slot, wall_s=round(time.time() - t, 1), call=CALL)
                self.save(f"{path}/{unit[0]}/{unit[1]}", rec)
                if unit[1] == "untouched":  # this call's control, kept beside the latest
                    self.save(f"{path}/{unit[0]}/untouched@{CALL}", rec)
                say(f"{path} {unit[0]} {unit[1]} ({slot}): {rec.get('speedup')} {rec.get('outcome', '')[:120]}")

        with cf.ThreadPoolExecutor(len(self.slots)) as ex:
            list(ex.map(worker, self.slots))
        return pending

    def eval_path(self, units):
        w = self.work
        sock = os.path.join(w, "runner.sock")
        if os.path.exists(sock):
            os.unlink(sock)
        server = subprocess.Popen([os.path.join(w, "bin", "arenactl"), "runner", "serve", "--listen", f"unix:{sock}",
                                   "--gpus", self.serve_gpus, "--containerd", self.sock,
                                   "--eval-dir", os.path.join(w, "eval"), "--eval-idle", "900"],
                                  env=self.env, cwd=ROOT, stdout=subprocess.DEVNULL,
                                  stderr=open(os.path.join(w, "serve.log"), "a"))
        for _ in range(600):
            if os.path.exists(sock):
                break
            time.sleep(0.1)

        def each(unit, slot):
            tid, attack = unit
            rel = open(os.path.join(self.cand_dir(tid), "rel")).read()
            p = self.arenactl("eval", "--runner", f"unix:{sock}", "--image-lock", self.lock, "--task", tid,
                              "--candidate", f"{rel}={os.path.join(self.cand_dir(tid), attack + '.py')}",
                              "--trusted-pairs", str(self.args.pairs), "--json", "--timeout", str(self.args.unit_timeout))
            if p.returncode:
                return {"outcome": "no answer", "error": p.stderr[-2000:]}
            v = json.loads(p.stdout)
            return summary(v["result"], v)

        try:
            return self.pool("eval", units, each)
        finally:
            server.send_signal(signal.SIGINT)
            try:
                server.wait(120)
            except subprocess.TimeoutExpired:
                server.kill()

    def agent_file(self, attack):
        if attack == "untouched":
            return os.path.join(ROOT, "ci/agents/noop.toml")
        d = os.path.join(self.work, "agents")
        os.makedirs(d, exist_ok=True)
        path = os.path.join(d, attack + ".toml")
        copy = ('set -e; k=$(printf %s "$ARENA_TASK_ID" | tr / _); '
                f'cp "/attack/$k/{attack}.py" "/workspace/$(cat "/attack/$k/rel")"; echo "wrote {attack}"')
        with open(path, "w") as f:
            f.write(f"# Made by ci/gpu/container-suite.py: the attack ci/gpu/adversaries/{attack}.py as an agent's edit.\n"
                    f'name = "adv-{attack}"\ndescription = "writes the {attack} attack over the kernel file"\n'
                    f'image = "task"\ncommand = ["sh", "-c", {json.dumps(copy)}]\nnetwork = "none"\n'
                    'timeout_s = 120\nmax_iterations = 1\n[[mount]]\nhost = "../cands"\ncontainer = "/attack"\n')
        return path

    def run_path(self, units):
        def each(unit, slot):
            tid, attack = unit
            out = os.path.join(self.work, "runs", attack, tid.replace("/", "_"))
            # A unit runs again only to be measured again (a later call's control, or one a
            # device limit cut short): an earlier call's run there would be resumed, not run.
            shutil.rmtree(out, ignore_errors=True)
            p = self.arenactl("run", "--image-lock", self.lock, "--agent", self.agent_file(attack), "--gpus",
                              slot, "--containerd", self.sock, "--tasks", tid, "--trusted-pairs",
                              str(self.args.pairs), "--agent-mount-root", self.work, "--out", out)
            if p.returncode:
                say(f"run {tid} {attack}: exit {p.returncode}: {p.stderr.strip()[-300:]}")
            try:
                rs = json.load(open(os.path.join(out, "results.json")))
                if not rs.get("tasks") and rs.get("infra_errors"):
                    return {"outcome": "infrastructure", "infrastructure": json.dumps(rs["infra_errors"][0])[:400]}
                result = rs["tasks"][0]
                report = json.loads(self.arenactl("report", out, "--format", "json").stdout)["tasks"][0]
            except (OSError, ValueError, IndexError, KeyError) as e:
                return {"outcome": "no result", "error": f"{e}; {p.stderr[-2000:]}"}
            return summary(result, report)

        return self.pool("run", units, each)


def task_attacks(a):
    """`--task-attacks ID=A,B`: that task's attacks on both paths, in place of --attacks and
    --run-attacks (one call can then finish different attacks of different tasks). Refused
    before anything is locked: a typo would otherwise cost a device call's set-up."""
    per_task, known = {}, set(suite.attacks())
    for spec in a.task_attacks or []:
        tid, _, names = spec.partition("=")
        chosen = [x for x in names.split(",") if x and x != "untouched"]
        if not tid or not chosen or (a.tasks and tid not in a.tasks.split(",")):
            raise SystemExit(f"--task-attacks {spec!r}: expected ID=A,B with ID one of --tasks")
        unknown = sorted(set(chosen) - known)
        if unknown:
            raise SystemExit(f"--task-attacks {spec!r}: no attack {unknown} in ci/gpu/adversaries/")
        per_task[tid] = chosen
    return per_task


def summary(result, score):
    """What a verdict needs of a task result and its score (the Evaluate answer, or the report's
    task entry)."""
    cand = result.get("candidate") or {}
    cases = cand.get("performance") or []
    gate = None
    for name in ("compile", "correctness"):
        g = cand.get(name) or {}
        if g.get("status") != "ok":
            gate = f"{name}: {(g.get('error') or g.get('status') or '')[:200]}"
            break
    if gate is None:
        # Why a correct candidate is credited no speedup: the score's word, else the record's.
        cross = result.get("cross_check") or {}
        why = (score.get("performance_failure") or cand.get("performance_error")
               or next((c["error"] for c in cases if c.get("error")), None)
               or (cross.get("reason") if cross.get("verdict") == "inconsistent" else None))
        if why is None and score.get("correct") and not score.get("speedup"):
            why = "credited no speedup (the answer does not say why)"
        if why:
            gate = f"performance: {str(why)[:240]}"
    warnings = ((result.get("evaluators") or {}).get("candidate") or {}).get("warnings") or []
    return {"speedup": score.get("speedup"), "trust": score.get("trust"), "gate": gate,
            "infrastructure": result.get("candidate_refused"),
            "sessions": tc.session_speedups(cases) if cases else None, "warnings": warnings[:3],
            "outcome": gate or ""}


def verdict(rec, control):
    if rec.get("error") or rec.get("infrastructure"):
        return "UNSCORED", (rec.get("error") or rec.get("infrastructure") or "")[-200:]
    if rec.get("gate"):
        return "fails a gate", rec["gate"]
    return suite.compare_sessions(rec.get("sessions") or [], (control or {}).get("sessions") or [])


def table(results, out):
    controls = {k: r for k, r in results.items() if "@" in k}
    saved = dict(results)
    rows = ["| path | task | attack | speedup | sessions | verdict | why | wall |", "|---|---|---|---:|---|---|---|---:|"]
    results = {k: r for k, r in results.items() if "@" not in k}
    for key in sorted(results, key=lambda k: (results[k]["path"], results[k]["task"], results[k]["attack"] != "untouched", results[k]["attack"])):
        r = results[key]
        # Each attack against the control measured in its own call, where that call had one.
        control = (controls.get(f"{r['path']}/{r['task']}/untouched@{r.get('call')}")
                   or results.get(f"{r['path']}/{r['task']}/untouched"))
        v, why = ("control", "") if r["attack"] == "untouched" else verdict(r, control)
        if r["attack"] == "untouched" and (r.get("gate") or r.get("error")):
            # e.g. KernelBench's 3_DeepNarrowMLP: its check admits other inputs' answers, so no
            # one is credited a speedup (arena_trusted/admits.py)
            why = (r.get("gate") or r.get("error") or "")[-200:]
        r["verdict"], r["why"] = v, why
        ss = r.get("sessions") or []
        sp = f"{r['speedup']:.3f}" if isinstance(r.get("speedup"), (int, float)) else "-"
        rng = f"{min(ss):.3f}-{max(ss):.3f}" if ss else "-"
        rows.append(f"| {r['path']} | {r['task'].split('/')[-1]} | {r['attack']} | {sp} | {rng} | {v} | {why[:160]} | {r.get('wall_s')} s |")
    with open(os.path.join(out, "container-suite.json"), "w") as f:
        json.dump(saved, f, indent=1)
    print("\n".join(rows), flush=True)
    # The same, one row per attack and one column per task (docs/benchmarks.md's form).
    for path in sorted({r["path"] for r in results.values()}):
        mine = {k: r for k, r in results.items() if r["path"] == path}
        tasks = sorted({r["task"] for r in mine.values()})
        attacks = sorted({r["attack"] for r in mine.values()}, key=lambda a: (a != "untouched", a))
        print(f"\n{path}:\n\n| attack | " + " | ".join(t.split("/")[-1] for t in tasks) + " |")
        print("|---|" + "---|" * len(tasks))
        for a in attacks:
            cells = [cell(mine.get(f"{path}/{t}/{a}")) for t in tasks]
            print(f"| {a} | " + " | ".join(cells) + " |")


# What a gate's failure text says, in a word or two (the matrix's cells).
REASONS = [("DeferredWork", "DeferredWork"), ("DeviceBusy", "DeviceBusy"), ("tolerance_admits_other_inputs", "kept answers admitted"),
           ("input slot of another call", "foreign slot"), ("Both events must be completed", "its autotuner needs synchronize"),
           ("got torch.float16", "dtype"), ("float16, expected", "dtype"), ("max abs error", "wrong output"), ("differ", "wrong output"),
           ("deadline", "deadline passed")]


def cell(r):
    if r is None:
        return "not run"
    v, why = r.get("verdict"), r.get("why") or ""
    ss = r.get("sessions") or []
    if v in ("fails a gate", "UNSCORED") or (r["attack"] == "untouched" and r.get("gate")):
        word = next((w for k, w in REASONS if k in why or k in (r.get("gate") or "")), why[:40])
        return f"{'fails ' + why.split(':')[0] if v == 'fails a gate' else v.lower() if v == 'UNSCORED' else 'no speedup'}: {word}"
    rng = f" ({min(ss):.3f}–{max(ss):.3f})" if ss else ""
    tag = {"control": "", "gains nothing": "", "within noise": ", within noise", "GAINED": ", **GAINED**"}.get(v, f", {v}")
    sp = r.get("speedup")
    return f"{sp:.3f}{rng}{tag}" if isinstance(sp, (int, float)) else f"{v}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("bin_dir")
    ap.add_argument("tasks_dir")
    ap.add_argument("out")
    ap.add_argument("--paths", default="eval,run")
    ap.add_argument("--tasks")
    ap.add_argument("--attacks")
    ap.add_argument("--run-attacks", help="the attacks of the `run` path (default: --attacks)")
    ap.add_argument("--task-attacks", action="append", metavar="ID=A,B",
                    help="one task's attacks, in place of --attacks and --run-attacks (repeatable)")
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--cases", default="0:1")
    ap.add_argument("--deadline", type=float, default=520)
    ap.add_argument("--work", default="/tmp/arena-csuite")
    ap.add_argument("--recipe", default="cuda-host", help="the base image's recipe under images/")
    ap.add_argument("--gpus", default="nvidia", help="`nvidia` (every GPU) or `cpu:N`")
    ap.add_argument("--store", help="the store (default WORK/store)")
    ap.add_argument("--unit-timeout", type=int, default=240, help="seconds an Evaluate request may take")
    ap.add_argument("--table-from", help="only print the table of a saved WORK/results.json")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    if args.table_from:
        table(json.load(open(args.table_from)), args.out)
        return
    task_attacks(args)
    s = Suite(args)
    s.set_up()
    try:
        for path in args.paths.split(","):
            left = {"eval": s.eval_path, "run": s.run_path}[path](s.todo(path))
            if left:
                say(f"{path}: {len(left)} unit(s) left at the deadline; call again to go on")
    finally:
        table(s.results, args.out)
        shutil.copy(os.path.join(s.work, "serve.log"), args.out) if os.path.exists(os.path.join(s.work, "serve.log")) else None
        try:
            os.kill(int(open(os.path.join(s.work, "containerd", "containerd.pid")).read()), signal.SIGTERM)
        except (OSError, ValueError):
            pass
    print("DONE", flush=True)


if __name__ == "__main__":
    main()
