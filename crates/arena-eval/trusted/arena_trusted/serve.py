"""A warm evaluator: the trusted side of the runner's Evaluate API, kept alive between
evaluations of one task so that they cost the evaluation and not a container, a Python start,
the harness's imports and the device's set-up.

evaluate.py runs it when the job names a socket (`serve`): it loads the harness and the
device's data once, listens on the socket (in a directory only root may enter), takes one
connection (the runner's) and answers its requests in order, until the runner says `exit` or
goes away. Each `evaluate` request is one evaluation as a run's evaluator makes it: fresh kernel
processes, a new secret seed, fresh inputs for every call, reports under `out/<id>/`. After each,
every process of its kernels' users is killed, the device memory shared with them is freed, and
what they left in the shared /tmp and /dev/shm, their System V IPC objects and (for users not
named in `keep_scratch`) their scratch are removed as those users; if anything of them is left,
the evaluator says so (`retire`) and ends after its answer (the runner starts a fresh one): it
could not vouch for the next evaluation.
"""
import dataclasses
import os
import re
import signal
import socket
import subprocess
import sys
import time
import traceback

import evaluation as ev
import jail
import wire
from clean import CLEANER, leftovers
from deadline import Deadline, install as install_deadline
from harness import Harness
from perf_settings import PerfSettings

# A request's id becomes a directory name: nothing but these.
ID = re.compile(r"^[0-9a-z][0-9a-z-]{0,63}$")
# The most timed pairs a request may ask for (the runner refuses more before it asks).
MAX_PAIRS = 100
# The most outputs of a timed batch a request may ask to be checked: a batch's most calls
# (the runner's MAX_CHECKED_CALLS is the same, and its tests hold it so).
MAX_CHECKED_CALLS = PerfSettings.max_calls
# What a request may ask of its own evaluation's timing, and its bounds: its timed pairs (a
# cheaper screening) and its sample of each timed batch's outputs (0: every one checked).
# The job's own values stay the default of the next request.
REQUEST_PERF = {"pairs": (1, MAX_PAIRS), "checked_calls": (0, MAX_CHECKED_CALLS)}


def listen(path, wait_s):
    """The socket the runner connects to, readable by root alone (the kernels' users cannot
    enter its directory either); the first connection, or None if none comes in `wait_s`."""
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(path)
    os.chmod(path, 0o600)
    sock.listen(1)
    sock.settimeout(wait_s)
    try:
        conn, _ = sock.accept()
    except socket.timeout:
        return None
    finally:
        sock.close()
    conn.settimeout(None)
    return conn


def empty_fs(path):
    """Whether the file system at `path` (a kernel's scratch: a tmpfs of its own, which root
    here may not list) holds nothing but its root directory."""
    try:
        st = os.statvfs(path)
    except OSError:
        return False
    return st.f_files - st.f_ffree <= 1


# Per role: its scratch's change time when root last found it as the cleaner leaves it. A mode,
# a time or an extended attribute set on the scratch since (nothing in it) moves it.
_CLEAN_CTIME = {}


def clean_ctime(path, uid):
    """The change time of a kernel's scratch if it is as the cleaner leaves it (empty, its
    user's, mode 0700, times 0), else None (root may stat it, not enter it)."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    clean = (empty_fs(path) and st.st_uid == uid and st.st_mode & 0o7777 == 0o700
             and st.st_mtime_ns == 0)
    return st.st_ctime_ns if clean else None


def tidy(job, data, roles, kept):
    """After an evaluation: the device memory shared with its kernel processes, then every
    trace of their users (each user's cleaner at once) but those of a kept process (the
    original's, kept for the next evaluation: its user's processes are it). Returns what of
    them could not be removed."""
    data.end_session()
    keep = set(job.get("keep_scratch", []))
    cleaners, left = [], []
    for role in roles:
        if role in kept:
            continue
        ids = job["users"][role]
        uid, gid = ids["uid"], ids["gid"]
        if not jail.kill_all(uid):
            left.append(f"{role}: processes that could not be stopped")
        rels = [] if role in keep else ["*"]
        path = job["scratch"][role]
        ctime = clean_ctime(path, uid) if rels else None
        untouched = not rels or (ctime is not None and ctime == _CLEAN_CTIME.get(role))
        if not leftovers(uid) and untouched:
            continue  # nothing to remove: no cleaner to start
        p = jail.spawn(
            [sys.executable, "-I", "-S", "-c", CLEANER, path, *rels],
            uid,
            gid,
            job.get("groups", []),
            {"PATH": "/usr/local/bin:/usr/bin:/bin"},
            "/",
            [],
            quiet=True,
        )
        cleaners.append((role, uid, p, path if rels else None))
    for role, uid, p, emptied_scratch in cleaners:
        try:
            p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            pass
        if not jail.kill_all(uid):
            left.append(f"{role}: processes that could not be stopped")
        left += [f"{role}: {x}" for x in leftovers(uid)]
        # Root checks the scratch too (stat and statvfs need no way into it): the next kernel
        # of this user gets it as its HOME and caches, mode and times as a fresh one has them.
        if emptied_scratch is not None:
            ctime = clean_ctime(emptied_scratch, uid)
            if ctime is not None:
                _CLEAN_CTIME[role] = ctime
            else:
                _CLEAN_CTIME.pop(role, None)
                left.append(f"{role}: its scratch is not as a fresh one")
    return left


def one(job, harness, data, configs, msg, zygote, kept):
    """One `evaluate` request: {"id", "roles", "deadline_s"[, "pairs"][, "checked_calls"]}."""
    rid = str(msg.get("id", ""))
    roles = msg.get("roles")
    if not ID.match(rid):
        return {"ok": False, "error": f"request id {rid[:80]!r} is not [0-9a-z-]"}
    if not isinstance(roles, list) or not roles or any(r not in job["roles"] for r in roles):
        return {"ok": False, "error": f"roles {roles!r}: not among {job['roles']}"}
    for field, (low, high) in REQUEST_PERF.items():
        v = msg.get(field)
        if v is None:
            continue
        if type(v) is not int or not low <= v <= high:
            return {"ok": False, "error": f"{field} {v!r}: not an integer from {low} to {high}"}
        job = dict(job, perf=dataclasses.replace(job["perf"], **{field: v}))
    out = os.path.join(job["out"], rid)
    os.mkdir(out, 0o700)
    record = ev.new_record(harness)
    record["warm"] = {"request": rid}
    t0 = time.monotonic()
    done = False
    try:
        # To the millisecond: a request may have less than a second left.
        signal.setitimer(signal.ITIMER_REAL, max(0.001, float(msg.get("deadline_s", job["deadline_s"]))))
        try:
            ev.evaluate_into(job, harness, data, configs, False, roles, out, record, zygote, kept)
            done = True
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
    except Deadline:
        # After the evaluation returned (before the alarm's end), its report stands. Before its
        # own handling began (a request that arrives with a millisecond left) or while it wrote
        # its record, there is no evaluation to report: the deadline is the answer, never an
        # empty report that would read as failed gates.
        if not done:
            record["error"] = "the evaluator's deadline passed"
            ev.write_json(out, "evaluator.json", record)
    t1 = time.monotonic()
    # The compiled original's user, where the evaluation had one, is tidied as the others.
    users = roles + ([ev.COMPILED] if ev.compiled_baseline(job, harness, roles) is not None else [])
    left = tidy(job, data, users, kept)
    # Where the evaluator's time went besides the gates (the runner records it).
    times = {"evaluation_s": t1 - t0, "tidy_s": time.monotonic() - t1}
    if left:
        # The evaluation stands (it was judged before); the next one cannot be vouched for.
        return {"ok": True, "id": rid, "times": times, "retire": "left after the evaluation: " + "; ".join(left[:8])}
    return {"ok": True, "id": rid, "times": times}


def serve(job):
    install_deadline("the evaluator")
    zygote = ev.early_zygote(job)
    try:
        harness = Harness(job["harness"], job.get("accelerator", True))
        configs, hidden = ev.configs_of(job, harness)
        if hidden:
            raise ValueError("a warm evaluator serves the visible configurations only")
        data = ev.make_data(job, harness)
        zygote = ev.zygote_for(job, harness, zygote)
        if zygote is not None:
            zygote.ready()
        answer(job, harness, data, configs, zygote)
    finally:
        if zygote is not None:
            zygote.close()


def answer(job, harness, data, configs, zygote):
    """Takes the runner's connection and answers its requests until it says `exit` or goes."""
    conn = listen(job["serve"], float(job.get("connect_s", 300)))
    if conn is None:
        return
    fd = conn.fileno()
    wire.send(fd, {"ok": True, "ready": True, "device": harness.device})
    # The kernel processes of `keep_processes` roles (the original's) left by one evaluation
    # for the next: role -> kernel.
    kept = {}
    while True:
        try:
            msg = wire.recv(fd)
        except (EOFError, wire.WireError, OSError):
            return  # the runner went away: so does its evaluator
        op = msg.get("op") if isinstance(msg, dict) else None
        if op == "exit":
            return
        if op != "evaluate":
            wire.send(fd, {"ok": False, "error": f"unknown op {op!r}"})
            continue
        try:
            reply = one(job, harness, data, configs, msg, zygote, kept)
        except Exception:
            reply = {"ok": False, "fatal": True, "error": traceback.format_exc()[-2000:]}
        wire.send(fd, reply)
        if reply.get("fatal") or reply.get("retire"):
            return
