"""Kernel processes, kept apart from the evaluator.

A kernel process runs as a user of its own (one for the original kernel, another for the
agent's), without capabilities, in a process group of its own, with an environment of only
what it needs, a scratch directory it owns and nothing else writable. (no_new_privs is the
container's, inherited; when the evaluator, the container's first process, ends, the kernel
takes every other process of the container with it.)
It cannot read the evaluator's files (hidden configurations, harness, reports: root's, 0700),
signal or trace it (another user), nor the other kernel process (another user again).

Between the calls it is timed on, every process of its user is stopped (SIGSTOP): it can
neither run work late nor run work early, and it cannot slow the other kernel down while that
one is timed. Stopping is by user, not by process group, so a forked helper is stopped too.
"""
import os
import signal
import subprocess
import time

def spawn(argv, uid, gid, groups, env, cwd, pass_fds, quiet=False, stdout=None, stderr=None):
    """Starts a kernel process as `uid`:`gid` (with `groups`), in its own process group;
    `quiet`: its output goes nowhere; else `stdout`/`stderr` (default: this process's)."""
    out = subprocess.DEVNULL if quiet else stdout
    err = subprocess.DEVNULL if quiet else stderr
    return subprocess.Popen(
        argv,
        user=uid,
        group=gid,
        extra_groups=list(groups),
        env=env,
        cwd=cwd,
        pass_fds=tuple(pass_fds),
        close_fds=True,
        process_group=0,
        stdin=subprocess.DEVNULL,
        stdout=out,
        stderr=err,
    )


def wait_user(pid, uid, deadline_s=10.0):
    """Waits until process `pid` runs as `uid` (a forked kernel process takes its user before
    anything else); False if it does not in time or ended."""
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        try:
            with open(f"/proc/{pid}/status") as f:
                for line in f:
                    if line.startswith("Uid:"):
                        if all(int(x) == uid for x in line.split()[1:]):
                            return True
                        break
        except OSError:
            return False
        time.sleep(0.0002)
    return False


def pids_of(uid):
    """Every process of `uid` that still runs something (read from /proc; a process may
    vanish while it is read). A zombie whose threads have all ended is not: it runs nothing,
    and only its parent (or, orphaned, this process, the container's first) can remove it.
    But a process whose first thread called exit while another thread runs shows as a zombie
    too (state Z, its other threads running): it is one, and it is stopped and killed like any
    other (a signal to its pid reaches the threads left)."""
    out = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            st = os.stat(f"/proc/{name}")
        except OSError:
            continue
        if st.st_uid == uid and _runs(int(name)):
            out.append(int(name))
    return out


def _runs(pid):
    """Whether `pid` still runs something: its first thread, or, where that one has ended
    (state Z), another of its threads."""
    return _state(pid) not in "ZX" or any(c not in "ZX" for c in _thread_states(pid))


def _thread_states(pid):
    """The state of each of `pid`'s threads (none for a process that is gone)."""
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return []
    return [_stat_state(f"/proc/{pid}/task/{t}/stat") for t in tids]


def _stopped(pid):
    """Whether every thread of `pid` that still runs is stopped (or the process is gone)."""
    return all(c in "TtZX" for c in _thread_states(pid))


def reap():
    """Collects every child of this process that has ended: as the container's first process
    it inherits every orphan, and unreaped ones would fill the pid limit."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _state(pid):
    return _stat_state(f"/proc/{pid}/stat")


def _stat_state(path):
    """The state letter of a process's or thread's stat file (X where it cannot be read)."""
    try:
        with open(path, "rb") as f:
            text = f.read()
        return chr(text[text.rindex(b")") + 2])
    except (OSError, ValueError, IndexError):
        return "X"


def freeze(uid, deadline_s=2.0):
    """Stops every process of `uid` and waits until none runs. Returns False if some process
    could not be stopped in time.

    Done only when one listing finds every process of the user stopped already: a process
    forked by one that was still running while the last listing was read is not in it, and
    is found (and stopped) by the next."""
    end = time.monotonic() + deadline_s
    while True:
        pids = pids_of(uid)
        if all(_stopped(pid) for pid in pids):
            return True
        for pid in pids:
            try:
                os.kill(pid, signal.SIGSTOP)
            except ProcessLookupError:
                continue
        if time.monotonic() > end:
            return False
        time.sleep(0.0002)


def thaw(uid):
    for pid in pids_of(uid):
        try:
            os.kill(pid, signal.SIGCONT)
        except ProcessLookupError:
            pass


def kill_all(uid):
    """SIGKILL to every process of `uid`, until none is left; False if some survived a
    second of it."""
    end = time.monotonic() + 1.0
    pause = 0.0002
    while time.monotonic() < end:
        reap()
        pids = pids_of(uid)
        if not pids:
            return True
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        # A killed process is gone within a fraction of a millisecond mostly: look again
        # soon, then less often.
        time.sleep(pause)
        pause = min(2 * pause, 0.01)
    reap()
    return not pids_of(uid)
