"""The zygote: kernel processes forked from one pristine process instead of started afresh.

A kernel process that imports PyTorch spends seconds on the import before it does anything
(two of them per evaluation, twenty in a CPU evaluation's sessions). The zygote is a process of
its own, started by the evaluator (python3 -I -B zygote.py SOCKET_FD MODULE...) from nothing
but arena's own files: it imports the modules named (torch, triton: never initializing a
device, which does not survive a fork), then forks a kernel process whenever the evaluator asks.

It is root with the evaluator's capabilities (to give each child its user), and never runs
anything of a kernel's or of the task's: its memory holds what a fresh `python3 -c "import
torch"` holds, no harness, no seed, no input. Each child, before it runs anything else, closes
every descriptor but its own four (the zygote's socket first: with it a kernel could have
processes forked as another kernel's user), takes its user, groups and environment (losing
every capability: it checks), and then serves the evaluator as child.py would. The kernels of
both roles are forks of the same process: neither starts from memory laid out differently
(a warm evaluator's original is the exception: its process is kept from one evaluation to the
next, so it is older than the candidate it is paired with; see docs/trusted-evaluation.md).

Messages on the socket (a SOCK_SEQPACKET pair: one message each): a request is JSON (uid, gid,
groups, env, quiet) with the child's four descriptors attached (SCM_RIGHTS); the answer is JSON,
{"pid": N} or {"error": ...}.
"""
import importlib
import json
import os
import signal
import socket
import subprocess
import sys
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))


def _capabilities_dropped():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(("CapPrm:", "CapEff:", "CapAmb:")) and int(line.split()[1], 16):
                return False
    return True


def _become(spec, fds):
    """In the forked child: only its own descriptors, its user, its environment; then serve."""
    code = 1
    try:
        # What the zygote set for itself is not the kernel's: a fresh process has SIGCHLD at
        # its default (with it ignored, subprocess and multiprocessing, which Triton's and
        # Inductor's compilers use, read every child's exit as 0).
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        os.setpgid(0, 0)
        keep = {0, 1, 2, *fds}
        for name in os.listdir("/proc/self/fd"):
            fd = int(name)
            if fd not in keep:
                try:
                    os.close(fd)
                except OSError:
                    pass
        if spec.get("quiet"):
            null = os.open(os.devnull, os.O_RDWR)
            os.dup2(null, 1)
            os.dup2(null, 2)
            os.close(null)
        os.setgroups(list(spec.get("groups", [])))
        os.setgid(int(spec["gid"]))
        os.setuid(int(spec["uid"]))
        if os.getuid() != spec["uid"] or os.geteuid() != spec["uid"] or not _capabilities_dropped():
            raise PermissionError("the kernel process kept privileges it must not have")
        os.environ.clear()
        os.environ.update(spec["env"])
        # A directory the imports already looked up (as root, without TMPDIR) is looked up
        # again from this environment: the kernel's temporary files go to its scratch.
        import tempfile

        tempfile.tempdir = None
        os.chdir(spec["env"].get("HOME", "/"))
        import child

        child.Child(*fds).serve()
        code = 0
    except BaseException:
        traceback.print_exc()
    finally:
        os._exit(code)


def main(sock_fd, modules):
    # Children are reaped by the kernel: the zygote never waits for one.
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    sys.path.insert(0, HERE)
    import child  # noqa: F401  (and wire: loaded once, here)

    loaded, failed = [], []
    for m in modules:
        try:
            importlib.import_module(m)
            loaded.append(m)
        except Exception as e:  # a module the image lacks: the kernel imports what it needs
            failed.append(f"{m}: {type(e).__name__}: {e}"[:300])
    s = socket.socket(fileno=sock_fd)
    s.send(json.dumps({"ready": True, "loaded": loaded, "failed": failed}).encode())
    while True:
        try:
            msg, fds, _, _ = socket.recv_fds(s, 1 << 20, 4)
        except OSError:
            return
        if not msg:
            return  # the evaluator is gone: so is the zygote
        try:
            spec = json.loads(msg)
            if len(fds) != 4:
                raise ValueError(f"{len(fds)} descriptors, not 4")
            pid = os.fork()
            if pid == 0:
                _become(spec, fds)
            answer = {"pid": pid}
        except Exception as e:
            answer = {"error": f"{type(e).__name__}: {e}"}
        for fd in fds:
            os.close(fd)
        s.send(json.dumps(answer).encode())


class Zygote:
    """The evaluator's side: starts the zygote (with `env`: what every kernel process's
    environment shares, the library path above all, which a process reads only when it starts)
    and asks it for kernel processes. It is not waited for until it is first needed
    (`ready`): its imports run beside whatever the evaluator does meanwhile."""

    def __init__(self, modules, env, timeout_s=300):
        self.modules = list(modules)
        self.loaded = self.failed = None
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.proc = subprocess.Popen(
            [sys.executable, "-I", "-B", os.path.join(HERE, "zygote.py"), str(theirs.fileno()), *modules],
            pass_fds=[theirs.fileno()],
            env=env,
            cwd="/",
            stdin=subprocess.DEVNULL,
        )
        theirs.close()
        self.sock = mine
        self.sock.settimeout(timeout_s)

    def ready(self):
        """Waits until the zygote has imported its modules; OSError if it did not start."""
        if self.loaded is not None:
            return
        hello = json.loads(self.sock.recv(1 << 16) or b"{}")
        if not hello.get("ready"):
            raise OSError("the zygote did not start")
        self.loaded, self.failed = hello["loaded"], hello["failed"]

    def spawn(self, uid, gid, groups, env, fds, quiet):
        """A kernel process of `uid` serving on `fds` (requests, replies, shared memory, the
        socket of device memory)."""
        self.ready()
        spec = {"uid": uid, "gid": gid, "groups": list(groups), "env": env, "quiet": quiet}
        socket.send_fds(self.sock, [json.dumps(spec).encode()], list(fds))
        answer = json.loads(self.sock.recv(1 << 16) or b"{}")
        if "pid" not in answer:
            raise OSError(f"the zygote could not fork: {answer.get('error', 'no answer')}")
        return answer["pid"]

    def close(self):
        try:
            self.sock.close()
        finally:
            self.proc.kill()
            self.proc.wait()


if __name__ == "__main__":
    main(int(sys.argv[1]), sys.argv[2:])
