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
The signals are sent by kill(-1) as the user (signaller.py), which no fork can outrun; that
every process of the user is stopped is then read from /proc, twice, with nothing of the user
run or born in between (freeze).
"""
import os
import signal
import socket
import subprocess
import sys
import threading
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




class _Signaller:
    """The evaluator's end of signaller.py: a process of its own, root, that signals a user's
    processes all at once as that user."""

    def __init__(self):
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        here = os.path.dirname(os.path.abspath(__file__))
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-I", "-S", "-B", os.path.join(here, "signaller.py"), str(theirs.fileno())],
                pass_fds=[theirs.fileno()],
                cwd="/",
                stdin=subprocess.DEVNULL,
            )
        except BaseException:
            mine.close()
            raise
        finally:
            theirs.close()
        self.sock = mine
        self.sock.settimeout(5)

    def send(self, uid, sig):
        self.sock.send(f"{uid} {int(sig)}".encode())
        return self.sock.recv(256).decode(errors="replace") or "the signaller is gone"

    def close(self):
        self.sock.close()
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


_signaller = None
_lock = threading.Lock()


def start_signaller():
    """Starts the signaller now (the evaluator does, before it loads anything heavy: forking a
    small process is what each signal costs); else it starts when first needed."""
    global _signaller
    with _lock:
        if _signaller is None:
            _signaller = _Signaller()


def _signal(uid, sig):
    """kill(-1, sig) as `uid`: "ok", "none" (the user has no process), or why not."""
    global _signaller
    with _lock:
        try:
            if _signaller is None:
                _signaller = _Signaller()
            return _signaller.send(uid, sig)
        except OSError as e:
            # Started again next time (a signaller that cannot start leaves every signal to
            # the per-process way: freeze's check below still holds, it may just not finish).
            if _signaller is not None:
                _signaller.close()
                _signaller = None
            return f"signaller: {e}"


def _each(uid, sig):
    """`sig` to every listed process of `uid`, from here (root): where kill(-1) could not be
    sent (no process could be forked to send it, the pid limit reached)."""
    for pid in pids_of(uid):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass


def _last_pid():
    """The last pid given out in this pid namespace (None where it cannot be read): unchanged,
    no process or thread was born meanwhile."""
    try:
        with open("/proc/sys/kernel/ns_last_pid", "rb") as f:
            return int(f.read())
    except (OSError, ValueError):
        return None


def _stopped_threads(uid):
    """Every live thread of `uid`'s processes with its context switches, where each one is
    stopped; None where one is not."""
    out = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            if os.stat(f"/proc/{name}").st_uid != uid:
                continue
            tids = os.listdir(f"/proc/{name}/task")
        except OSError:
            continue
        for tid in tids:
            try:
                with open(f"/proc/{name}/task/{tid}/status", "rb") as f:
                    fields = dict(line.split(b":", 1) for line in f.read().splitlines() if b":" in line)
                state = fields[b"State"].split()[0]
                switches = (int(fields[b"voluntary_ctxt_switches"]), int(fields[b"nonvoluntary_ctxt_switches"]))
            except (OSError, KeyError, ValueError, IndexError):
                continue  # gone: a listing of its own would differ from the other's
            if state in (b"Z", b"X"):
                continue  # ended
            if state not in (b"T", b"t"):
                return None
            out[tid] = (state, switches)
    return out


def _held(uid):
    """Whether nothing of `uid` runs or can run again without a signal from outside: two
    listings find the same threads, every one stopped, none switched in or out between them
    (a thread stopped at both that ran in between was switched out again to stop), and no
    pid was given out in the namespace from before the first to after the second (no process
    or thread born, listed or not). So nothing of the user ran between the listings, and
    nothing runs after them: only a running process can wake or make another."""
    before = _last_pid()
    first = _stopped_threads(uid)
    if first is None:
        return False
    return _stopped_threads(uid) == first and _last_pid() == before


def freeze(uid, deadline_s=2.0):
    """Stops every process of `uid` and waits until none runs. Returns False if that could not
    be established in time (the kernel's failure: an honest kernel stops at once).

    SIGSTOP goes to the whole user at once (kill(-1) as the user: no fork outruns it), again
    every few milliseconds while the user's processes are not all found held (_held)."""
    end = time.monotonic() + deadline_s
    while True:
        if _signal(uid, signal.SIGSTOP) not in ("ok", "none"):
            _each(uid, signal.SIGSTOP)
        again = time.monotonic() + 0.005
        while True:
            if _held(uid):
                return True
            now = time.monotonic()
            if now > end:
                return False
            if now > again:
                break
            time.sleep(0.0002)


def thaw(uid):
    if _signal(uid, signal.SIGCONT) not in ("ok", "none"):
        _each(uid, signal.SIGCONT)


def kill_all(uid):
    """SIGKILL to every process of `uid`, until none is left; False if some survived a
    second of it. Once kill(-1) as the user has reached them all, no process of the user can
    make another: none listed is none left."""
    end = time.monotonic() + 1.0
    pause = 0.0002
    reached = False
    while True:
        if not reached:
            reached = _signal(uid, signal.SIGKILL) in ("ok", "none")
            if not reached:
                _each(uid, signal.SIGKILL)
        reap()
        if reached and not pids_of(uid):
            return True
        if time.monotonic() > end:
            return False
        # A killed process is gone within a fraction of a millisecond mostly: look again
        # soon, then less often.
        time.sleep(pause)
        pause = min(2 * pause, 0.01)
