#!/usr/bin/env python3
"""Soak test of resumable runs: one `arenactl run` of the CPU sample tasks with many
repeats, its client killed with SIGKILL at random moments and containerd restarted once in the
middle, the same command run again after each kill until the run completes. Then it counts:
every task run's result present exactly once, none half written, and nothing of the run left
in containerd (containers, tasks, active snapshots, leases) or mounted below the run.

usage: sudo python3 ci/bench/soak.py [--task-runs 200] [--kills 12] [--seed 1] [--json]
    [--arenactl target/release/arenactl] [--agent ci/agents/noop.toml] [--keep DIR]

Needs root, containerd, runc and ctr (ci/setup.sh), and the store of lockfiles/cpu.lock that the
tests build (target/arena-run-test-store; built here from target/arena-debs when missing).
Exit status 0 only when complete, no duplicates and no leaks.
"""
import argparse
import collections
import json
import os
import random
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LOCK = "lockfiles/cpu.lock"
TASKS = 3  # the CPU lock's tasks: matmul, prefix_sum (trusted), sum_squares (self-reported)


def sh(*args, check=True, **kw):
    return subprocess.run(args, check=check, cwd=REPO, capture_output=True, text=True, **kw)


def containerd(cmd, d):
    return sh("bash", "ci/containerd.sh", cmd, d).stdout.strip()


def restart_containerd(d):
    """Only the daemon, as a restart would: its shims (running containers) live on."""
    with open(os.path.join(d, "containerd.pid")) as f:
        pid = int(f.read())
    os.kill(pid, signal.SIGKILL)
    while os.path.exists(f"/proc/{pid}"):
        time.sleep(0.05)
    return containerd("start", d)


def leftovers(sock, run_dir):
    """What of the run containerd still holds, and what is mounted below the run directory."""
    def ctr(*what):
        out = sh("ctr", "--address", sock, "-n", "arena", *what, check=False).stdout
        return [l for l in out.splitlines()[1:] if l.strip()]

    active = [l for l in ctr("snapshots", "ls") if " Active" in l]
    mounts = [m for m in open("/proc/self/mounts").read().splitlines() if f" {run_dir}" in m]
    return {
        "containers": len(ctr("containers", "ls")),
        "tasks": len(ctr("tasks", "ls")),
        "active_snapshots": len(active),
        "leases": len(ctr("leases", "ls")),
        "mounts": len(mounts),
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--task-runs", type=int, default=200)
    ap.add_argument("--kills", type=int, default=12)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--arenactl", default=os.path.join(REPO, "target/release/arenactl"))
    ap.add_argument("--agent", default="ci/agents/noop.toml")
    ap.add_argument("--keep", help="run under this directory and leave it")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    rng = random.Random(a.seed)
    repeats = -(-a.task_runs // TASKS)
    store = os.path.join(REPO, "target/arena-run-test-store")
    env = dict(os.environ, ARENA_DEB_DIR=os.environ.get("ARENA_DEB_DIR", os.path.join(REPO, "target/arena-debs")))
    sh(a.arenactl, "image", "verify", "--image-lock", LOCK, "--store", store, env=env)
    work = a.keep or tempfile.mkdtemp(prefix="arena-soak-")
    os.makedirs(work, exist_ok=True)
    ctd = os.path.join(work, "ctd")
    sock = containerd("start", ctd)
    run_dir = os.path.join(work, "run")
    cmd = [a.arenactl, "run", "--image-lock", LOCK, "--agent", a.agent, "--gpus", "cpu:2",
           "--runs", str(repeats), "--containerd", sock, "--store", store, "--out", run_dir, "--json"]
    t0 = time.monotonic()
    kills, attempts, restarted, log = 0, 0, False, []
    try:
        while True:
            attempts += 1
            out = open(os.path.join(work, f"attempt-{attempts}.log"), "w")
            p = subprocess.Popen(cmd, cwd=REPO, stdout=out, stderr=subprocess.STDOUT)
            kill_at = rng.uniform(3, 45) if kills < a.kills else None
            # containerd restarts once, halfway through the kills, while a client runs.
            restart_at = rng.uniform(2, 10) if not restarted and kills == a.kills // 2 else None
            start = time.monotonic()
            while p.poll() is None:
                now = time.monotonic() - start
                if restart_at is not None and now >= restart_at:
                    sock2 = restart_containerd(ctd)
                    assert sock2 == sock, (sock, sock2)
                    restarted, restart_at = True, None
                    log.append(f"attempt {attempts}: containerd restarted at {now:.1f} s")
                if kill_at is not None and now >= kill_at:
                    p.send_signal(signal.SIGKILL)
                    p.wait()
                    kills += 1
                    log.append(f"attempt {attempts}: client killed at {now:.1f} s")
                    break
                time.sleep(0.2)
            out.close()
            if p.returncode == 0:
                break
            if p.returncode != -signal.SIGKILL:
                log.append(f"attempt {attempts}: exit {p.returncode} (run again)")
            if attempts > a.kills + 20:
                log.append("gave up: too many attempts")
                break
        wall = time.monotonic() - t0
        counts, half = collections.Counter(), []
        tasks_dir = os.path.join(run_dir, "tasks")
        for t in sorted(os.listdir(tasks_dir)) if os.path.isdir(tasks_dir) else []:
            for r in sorted(os.listdir(os.path.join(tasks_dir, t))):
                f = os.path.join(tasks_dir, t, r, "result.json")
                if os.path.exists(f):
                    try:
                        res = json.load(open(f))
                        counts[(res["task_id"], res.get("repeat", 0))] += 1
                    except ValueError:
                        half.append(f)
        try:
            listed = json.load(open(os.path.join(run_dir, "results.json")))["tasks"]
        except (OSError, ValueError):
            listed = []
        in_set = collections.Counter((t["task_id"], t.get("repeat", 0)) for t in listed)
        want = TASKS * repeats
        report = {
            "task_runs": want,
            "results": len(counts),
            "results_listed": len(in_set),
            "duplicates_listed": sum(n - 1 for n in in_set.values() if n > 1),
            "half_written": len(half),
            "client_kills": kills,
            "containerd_restarts": int(restarted),
            "attempts": attempts,
            "wall_s": round(wall, 1),
            # The runner runs inside each `arenactl run` (the local engine): the largest peak
            # resident memory of any process this script waited for (the clients, and the
            # small `ctr` and script calls beside them), in MiB.
            "runner_peak_rss_mib": round(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024, 1),
            "leaks": leftovers(sock, run_dir),
            "log": log,
        }
        ok = (report["results"] == want and report["results_listed"] == want
              and report["duplicates_listed"] == 0 and not half
              and not any(report["leaks"].values()))
        report["ok"] = ok
        if a.json:
            print(json.dumps(report, indent=1))
        else:
            for line in log:
                print(line)
            print(f"task runs {want}: results {report['results']}, in results.json {report['results_listed']}, "
                  f"duplicates {report['duplicates_listed']}, half written {len(half)}; "
                  f"{kills} client kills, {int(restarted)} containerd restart, {attempts} attempts, {wall:.0f} s; "
                  f"runner peak memory {report['runner_peak_rss_mib']} MiB")
            print("left in containerd or mounted:", report["leaks"])
            print("OK" if ok else "NOT OK")
        return 0 if ok else 1
    finally:
        containerd("stop", ctd)
        if not a.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
