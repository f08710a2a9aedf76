"""The gates of a task whose harness is its own (self-reported): python3 -I -B gates.py JOB.json

Runs as the evaluator container's first process. Each step's commands run through `sh -c`,
from the step's directory, as the harness user (no capabilities, its own scratch as HOME),
each under its gate's timeout, with every process of that user killed when it runs out. The
steps run in order and stop at the first that fails (unless the step says to go on). What
the harness reports is copied — regular files only, capped, never through a link — to where
only this process writes, with the exit code and the wall time of every command by this
process's clock: the times the harness reports are the harness's word, checked against it.
"""
import json
import os
import signal
import stat
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import jail  # noqa: E402

REPORT_CAP = 4 << 20
REPORTS = ("compile_report.json", "correctness_report.json", "performance_report.json")


def copy_report(src_dir, name, dst_dir):
    """Copies src_dir/name to dst_dir if it is a regular file of at most REPORT_CAP bytes."""
    try:
        dfd = os.open(src_dir, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError:
        return "missing"
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=dfd)
    except FileNotFoundError:
        return "missing"
    except OSError as e:
        return f"refused: {e.strerror}"
    finally:
        os.close(dfd)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return "refused: not a regular file"
        if st.st_size > REPORT_CAP:
            return f"refused: {st.st_size} bytes"
        data = os.read(fd, REPORT_CAP + 1)
        if len(data) > REPORT_CAP:
            return "refused: too large"
    finally:
        os.close(fd)
    tmp = os.path.join(dst_dir, name + ".tmp")
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, os.path.join(dst_dir, name))
    return "copied"


def run_command(cmd, job, cwd, timeout):
    """One command as the harness user; returns (exit code, wall seconds)."""
    user = job["user"]
    env = dict(job["env"])
    t0 = time.monotonic()
    p = jail.spawn(["/bin/sh", "-c", cmd], user["uid"], user["gid"], job.get("groups", []), env, cwd, [],
                   quiet=bool(job.get("quiet")))
    try:
        code = p.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        code = 137
    # Whatever the command left behind (a forked helper, a stopped child) goes too.
    jail.kill_all(user["uid"])
    if code < 0:
        code = 128 - code
    return code, time.monotonic() - t0


class Deadline(Exception):
    """The job's deadline passed: the harness is stopped, and the gate runner ends."""


def _deadline(signum, frame):
    raise Deadline("the gate runner's deadline passed")


def main(job_path):
    with open(job_path) as f:
        job = json.load(f)
    # The container's own limit holds even if nobody outside is left to enforce it.
    signal.signal(signal.SIGALRM, _deadline)
    signal.alarm(int(job.get("deadline_s", 3600)))
    out = job["out"]
    record = {"mode": "self_reported", "commands": [], "reports": {}}
    gates = open(os.path.join(out, "gates"), "w", buffering=1)
    try:
        for step in job["steps"]:
            failed = False
            for i, cmd in enumerate(step["commands"]):
                code, wall = run_command(cmd, job, step["cwd"], step["timeout"])
                record["commands"].append({"step": step["name"], "index": i, "exit": code, "wall_s": wall})
                if code != 0:
                    gates.write(f"{step['name']} {code}\n")
                    failed = True
                    break
            if not failed:
                gates.write(f"{step['name']} 0\n")
            if step.get("reports"):
                dst = os.path.join(out, step["reports"])
                os.makedirs(dst, exist_ok=True)
                src = job["build"]
                for name in REPORTS:
                    record["reports"][f"{step['reports']}/{name}"] = copy_report(src, name, dst)
            if failed and not step.get("go_on"):
                break
    except Deadline as e:
        jail.kill_all(job["user"]["uid"])
        record["deadline"] = str(e)
    except Exception as e:
        record["error"] = f"{type(e).__name__}: {e}"
        gates.write("setup 96\n")
    finally:
        gates.close()
        with open(os.path.join(out, "evaluator.json.tmp"), "w") as f:
            json.dump(record, f, indent=1)
        os.replace(os.path.join(out, "evaluator.json.tmp"), os.path.join(out, "evaluator.json"))


if __name__ == "__main__":
    main(sys.argv[1])
