"""The gates of a task whose harness is its own (self-reported): python3 -I -S -B gates.py JOB.json

Runs as the evaluator container's first process (root, with only the capabilities to start
and stop other users' processes). Each kernel gets a tree of its own: a copy of the image's
pristine task (`/task`), the agent's sources laid over the candidate's, on a sized file system
whose files the kernel's user can read but not replace (it may add files; `build/` is its
own). Each step's commands run through `sh -c` in its tree as that kernel's user, each under
its gate's timeout; every process of that user is killed when a step ends, and what it left in
the shared /tmp and /dev/shm is removed, so that nothing of one kernel's run reaches the
other's. The steps run in order and stop at the first that fails (unless it says to go on).

What the harness reports is copied — regular files only, capped, never through a link — to
where only this process writes, with the exit code and the wall time of every command by this
process's clock, and (where asked) the commands' output, capped: the times the harness
reports are the harness's word, checked against these.
"""
import collections
import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import jail  # noqa: E402
from clean import CLEANER, leftovers  # noqa: E402
from deadline import Deadline, install as install_deadline  # noqa: E402

REPORT_CAP = 4 << 20
CAPTURE_CAP = 1 << 20
# The harness's reports: the AgentKernelArena convention's three under build/, then the
# other places AKA's evaluator looks for a performance report, in its order. The copies keep
# these names with '/' made '-' (build/ itself is flat).
GATE_REPORTS = ("compile_report.json", "correctness_report.json", "performance_report.json")
PERF_ELSEWHERE = ("performance_report.json", "build/perf_report.json", "perf_report.json",
                  "perf/benchmark_results.json")
ALL_REPORTS = tuple(f"build/{n}" for n in GATE_REPORTS) + PERF_ELSEWHERE


def open_beneath(root, rel, flags):
    """Opens root/rel without following a link at any component below root."""
    parts = [p for p in rel.split("/") if p]
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        for p in parts[:-1]:
            nfd = os.open(p, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
            os.close(fd)
            fd = nfd
        return os.open(parts[-1], flags | os.O_NOFOLLOW, dir_fd=fd)
    finally:
        os.close(fd)


def copy_report(tree, rel, dst_dir, name):
    """Copies tree/rel to dst_dir/name if it is a regular file of at most REPORT_CAP bytes."""
    try:
        fd = open_beneath(tree, rel, os.O_RDONLY | os.O_NONBLOCK)
    except (FileNotFoundError, NotADirectoryError):
        return "missing"
    except OSError as e:
        return f"refused: {e.strerror}"
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
    write_file(os.path.join(dst_dir, name), data)
    return "copied"


def write_file(path, data):
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


def exists_beneath(tree, rel):
    try:
        fd = open_beneath(tree, rel, os.O_RDONLY | os.O_NONBLOCK | os.O_PATH)
    except (FileNotFoundError, NotADirectoryError):
        return False
    except OSError:
        return True  # a link or something unreadable where a report goes
    os.close(fd)
    return True


def tree_dir(path, gid):
    """A directory of a kernel's tree: root's, the kernel's group may add files to it (a
    harness writes beside its test file, or into a directory the task ships), the sticky bit
    keeps it from removing or replacing the task's; the other kernel cannot enter."""
    os.makedirs(path, exist_ok=True)
    os.chown(path, -1, gid)
    os.chmod(path, 0o1770)


def make_tree(job, tree):
    """The kernel's tree: the image's task copied (its build/ and any report it ships left
    out), the overlay's files laid over it; root's files, readable by the kernel's user."""
    src = job["task_root"]
    dst = tree["path"]
    gid = tree["gid"]
    skip = set(ALL_REPORTS)
    for dirpath, dirnames, filenames in os.walk(src):
        rel_dir = os.path.relpath(dirpath, src)
        rel_dir = "" if rel_dir == "." else rel_dir
        if rel_dir == "":
            # build/ is a file system of the kernel's user, mounted there already.
            dirnames[:] = [d for d in dirnames if d != "build"]
        for d in list(dirnames):
            s = os.path.join(dirpath, d)
            t = os.path.join(dst, rel_dir, d)
            if os.path.islink(s):
                os.symlink(os.readlink(s), t)
                dirnames.remove(d)
            else:
                tree_dir(t, gid)
        for f in filenames:
            rel = os.path.join(rel_dir, f)
            if rel in skip:
                continue
            s = os.path.join(dirpath, f)
            t = os.path.join(dst, rel)
            if os.path.islink(s):
                os.symlink(os.readlink(s), t)
            else:
                shutil.copyfile(s, t)
                os.chmod(t, 0o755 if os.stat(s).st_mode & 0o111 else 0o644)
    lay_over(dst, gid, tree.get("overlay", []))


def lay_over(dst, gid, overlay):
    """Root's copies of the overlay's files in the tree at dst (over what was there)."""
    for o in overlay:
        t = os.path.join(dst, o["rel"])
        parts = o["rel"].split("/")[:-1]
        for n in range(1, len(parts) + 1):
            tree_dir(os.path.join(dst, *parts[:n]), gid)
        if os.path.lexists(t):
            os.unlink(t)
        # Created anew, never through a link (a kernel's user may add entries to the tree's
        # directories, though none of its processes runs between steps).
        with open(o["from"], "rb") as src:
            data = src.read()
        fd = os.open(t, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.chmod(t, 0o644)


def spawn_as(argv, step, job, cwd, capture):
    user = step["user"]
    env = dict(job["env"])
    env.update(step.get("env", {}))
    out = subprocess.PIPE if capture else (subprocess.DEVNULL if job.get("quiet") else None)
    return jail.spawn(argv, user["uid"], user["gid"], job.get("groups", []), env, cwd, [],
                      stdout=out, stderr=subprocess.STDOUT if capture else out)


class Tail:
    """Reads a process's output while it runs, keeping the last CAPTURE_CAP bytes (and passing
    it on to this process's own output unless the job is quiet)."""

    def __init__(self, stream, echo):
        self.buf = collections.deque()
        self.size = 0
        self.total = 0
        self.thread = threading.Thread(target=self._read, args=(stream, echo), daemon=True)
        self.thread.start()

    def _read(self, stream, echo):
        while True:
            chunk = stream.read1(65536) if hasattr(stream, "read1") else stream.read(65536)
            if not chunk:
                break
            self.total += len(chunk)
            if echo:
                try:
                    sys.stdout.buffer.write(chunk)
                    sys.stdout.buffer.flush()
                except OSError:
                    pass
            self.buf.append(chunk)
            self.size += len(chunk)
            while self.size - len(self.buf[0]) >= CAPTURE_CAP:
                self.size -= len(self.buf.popleft())

    def bytes(self):
        self.thread.join(timeout=5)
        data = b"".join(self.buf)
        return data[-CAPTURE_CAP:]


def run_command(cmd, step, job, capture):
    """One command as the step's user; returns (exit code, wall seconds, output or None)."""
    t0 = time.monotonic()
    p = spawn_as(["/bin/sh", "-c", cmd], step, job, step["cwd"], capture)
    tail = Tail(p.stdout, not job.get("quiet")) if capture else None
    try:
        code = p.wait(timeout=step["timeout"])
    except subprocess.TimeoutExpired:
        code = 137
    wall = time.monotonic() - t0
    # Whatever the command left behind (a forked helper, a stopped child) goes too; a step
    # whose processes cannot all be stopped fails (98): they would run on into the next.
    if not jail.kill_all(step["user"]["uid"]) and code == 0:
        code = 98
    if code < 0:
        code = 128 - code
    return code, wall, tail.bytes() if tail else None


def clean_after(step, job):
    """As the step's user: its reports (copied by now) and its files in /tmp and /dev/shm.
    Without site (-S): an image's Python that processes a large site-packages on every start
    spent 0.4 s per step here on an H100 host, most of arena's own time in a task run.
    Returns what of the user could not be removed."""
    p = spawn_as([sys.executable, "-I", "-S", "-c", CLEANER, step["tree"], *ALL_REPORTS], step,
                 dict(job, quiet=True), "/", False)
    try:
        p.wait(timeout=30)
    except subprocess.TimeoutExpired:
        pass
    jail.kill_all(step["user"]["uid"])
    return leftovers(step["user"]["uid"])


class Floor:
    """The device's floor: how long the cheapest call on it takes, measured by floor.py as
    a user of its own while the first steps run (it times nothing of theirs)."""

    def __init__(self, job):
        spec = job.get("floor")
        self.result = None
        self.proc = None
        if not spec:
            return
        here = os.path.dirname(os.path.abspath(__file__))
        env = dict(job["env"])
        env.update({"HOME": "/tmp", "TMPDIR": "/tmp", "PYTHONDONTWRITEBYTECODE": "1"})
        self.timeout = spec.get("timeout", 120)
        self.uid = spec["user"]["uid"]
        self.t0 = time.monotonic()
        self.proc = jail.spawn([sys.executable, "-I", "-B", os.path.join(here, "floor.py")],
                               self.uid, spec["user"]["gid"], job.get("groups", []), env, "/", [],
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)

    def wait(self):
        if self.proc is None or self.result is not None:
            return self.result
        try:
            out, _ = self.proc.communicate(timeout=max(1, self.timeout - (time.monotonic() - self.t0)))
            self.result = json.loads(out.decode().strip().splitlines()[-1])
        except Exception as e:  # the probe is arena's, but the image's Python runs it
            self.result = {"error": f"{type(e).__name__}: {str(e)[:200]}"}
        jail.kill_all(self.uid)
        return self.result


def run_step(step, job, out, record, gates):
    """Runs a step's commands in order; returns whether it passed."""
    tree = step.get("tree")
    keeps = bool(step.get("reports") or step.get("capture"))
    if keeps and tree:
        stale = [r for r in ALL_REPORTS if exists_beneath(tree, r)]
        if stale:
            gates.write(f"{step['name']} 97\n")
            record["stale"] = {step["name"]: stale}
            return False
    if step.get("overlay") and tree:
        # One tree serves several configurations in turn: this one's files first.
        lay_over(tree, step["user"]["gid"], step["overlay"])
    failed, output = False, []
    for i, cmd in enumerate(step["commands"]):
        code, wall, text = run_command(cmd, step, job, bool(step.get("capture")))
        if text is not None:
            output.append(text)
        record["commands"].append({"step": step["name"], "index": i, "exit": code, "wall_s": wall})
        if code != 0:
            gates.write(f"{step['name']} {code}\n")
            failed = True
            break
    if step.get("reports") and tree:
        dst = os.path.join(out, step["reports"])
        os.makedirs(os.path.join(dst, "alt"), exist_ok=True)
        for name in GATE_REPORTS:
            record["reports"][f"{step['reports']}/{name}"] = copy_report(tree, f"build/{name}", dst, name)
        for rel in PERF_ELSEWHERE:
            alt = "alt/" + rel.replace("/", "-")
            status = copy_report(tree, rel, dst, alt)
            if status != "missing":
                record["reports"][f"{step['reports']}/{alt}"] = status
    if step.get("capture"):
        path = os.path.join(out, step["capture"])
        os.makedirs(os.path.dirname(path), exist_ok=True)
        write_file(path, b"".join(output)[-CAPTURE_CAP:])
    if tree:
        left = clean_after(step, job)
        if left:
            # It would be found by the other kernel's next run: the step fails (99).
            record.setdefault("left_behind", {})[step["name"]] = left[:20]
            if not failed:
                gates.write(f"{step['name']} 99\n")
                failed = True
    if not failed:
        gates.write(f"{step['name']} 0\n")
    return not failed


def main(job_path):
    with open(job_path) as f:
        job = json.load(f)
    # The container's own limit holds even if nobody outside is left to enforce it.
    install_deadline("the gate runner")
    jail.start_signaller()
    signal.alarm(int(job.get("deadline_s", 3600)))
    out = job["out"]
    record = {"mode": "self_reported", "commands": [], "reports": {}}
    gates = open(os.path.join(out, "gates"), "w", buffering=1)
    floor = None
    users = [s["user"]["uid"] for s in job["steps"]]
    try:
        t = time.monotonic()
        trees = job.get("trees", [])
        if trees:
            # Members of every kernel's group, this process reads their trees and build/
            # (which the other kernel cannot enter) and gives their directories the group.
            os.setgroups(sorted({tree["gid"] for tree in trees}))
        for tree in trees:
            make_tree(job, tree)
        record["setup_s"] = time.monotonic() - t
        # The floor probe runs beside the step that says so (the original's compile: nothing
        # of the agent's runs then), or from the start.
        starts = any(s.get("floor_start") for s in job["steps"])
        floor = None if starts else Floor(job)
        for step in job["steps"]:
            if step.get("floor_start") and floor is None:
                floor = Floor(job)
            if step.get("floor_first") and floor is not None and floor.proc is not None:
                record["floor"] = floor.wait()
            if not run_step(step, job, out, record, gates) and not step.get("go_on"):
                break
    except Deadline as e:
        for uid in set(users):
            jail.kill_all(uid)
        record["deadline"] = str(e)
    except Exception as e:
        record["error"] = f"{type(e).__name__}: {e}"
        gates.write("setup 96\n")
    finally:
        # What is left is bounded by the probe's own timeout; an alarm here would leave no record.
        signal.alarm(0)
        if floor is not None and floor.proc is not None:
            record["floor"] = floor.wait()
        gates.close()
        write_file(os.path.join(out, "evaluator.json"), json.dumps(record, indent=1).encode())


if __name__ == "__main__":
    main(sys.argv[1])
