"""The evaluator's handle on one kernel process: starts it in its jail, sends it requests,
times each batch of calls from outside with the evaluator's own clock, and reads back what it
wrote. The process is stopped whenever it is not being timed."""
import mmap
import os
import select
import socket
import sys

import jail
import timing
import wire
from exports import PER_MESSAGE

HERE = os.path.dirname(os.path.abspath(__file__))
POISON = (b"\xa5", b"\x5a")


class KernelFailed(Exception):
    """The kernel process failed a request (its error) or stopped answering."""


class Kernel:
    def __init__(self, role, job, env, zygote=None):
        """The kernel process of `role`: forked by `zygote` where there is one (zygote.py),
        else started afresh."""
        self.role = role
        # torch.compile's options where the process runs ENTRY compiled (see `optional`).
        self.compiled = None
        ids = job["users"][role]
        self.uid, self.gid = ids["uid"], ids["gid"]
        self.timeout = None
        req_r, self.req_w = os.pipe()
        self.rep_r, rep_w = os.pipe()
        self.memfd = os.memfd_create(f"arena-{role}", 0)
        # Device memory goes both ways as file descriptors (driver.py): the evaluator's input
        # pools to the process, its outputs' memory back.
        self.sock, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.sock.settimeout(1)
        # Descriptors of device memory the process sent with its replies (key -> (fd, size)).
        self.received = {}
        fds = [req_r, rep_w, self.memfd, theirs.fileno()]
        quiet = bool(job.get("quiet_kernels"))
        self.proc = None
        self.pid = None
        try:
            self._start(job, env, zygote, fds, quiet)
        except BaseException:
            # Nothing of a process that did not start is kept: its descriptors are closed
            # and the process (it may not have taken its user yet) is killed by its pid.
            try:
                if self.proc is not None:
                    self.proc.kill()
                    self.proc.wait(timeout=5)
                elif self.pid is not None:
                    os.kill(self.pid, 9)
            except Exception:
                pass
            for fd in (req_r, rep_w, self.memfd, self.req_w, self.rep_r):
                try:
                    os.close(fd)
                except OSError:
                    pass
            self.sock.close()
            theirs.close()
            raise
        os.close(req_r)
        os.close(rep_w)
        theirs.close()
        self.size = 0
        self.shm = None
        self.poison = 0
        self.frozen = False

    def _start(self, job, env, zygote, fds, quiet):
        if zygote is not None:
            self.pid = zygote.spawn(self.uid, self.gid, job.get("groups", []), env, fds, quiet)
            if not jail.wait_user(self.pid, self.uid):
                raise KernelFailed(f"{self.role} kernel process did not take its user")
        else:
            for fd in fds:
                os.set_inheritable(fd, True)
            argv = [sys.executable, "-I", "-B", os.path.join(HERE, "child.py")]
            argv += [str(fd) for fd in fds]
            self.proc = jail.spawn(
                argv,
                self.uid,
                self.gid,
                job.get("groups", []),
                env,
                # The evaluator (root without DAC capabilities) cannot enter the scratch, which
                # is the kernel user's alone: the kernel process goes there itself.
                "/",
                fds,
                quiet=quiet,
            )
            self.pid = self.proc.pid

    @property
    def optional(self):
        """Whether its failure is its own (the compiled original's): the evaluation goes on
        without it, and says why."""
        return self.compiled is not None

    def alive(self):
        """Whether its process still runs, as its user (a kept process may have been ended)."""
        try:
            st = os.stat(f"/proc/{self.pid}")
        except OSError:
            return False
        return st.st_uid == self.uid and jail._state(self.pid) not in "ZX"

    def freeze(self):
        if not jail.freeze(self.uid):
            raise KernelFailed(f"{self.role} kernel process could not be stopped")
        self.frozen = True

    def thaw(self):
        jail.thaw(self.uid)
        self.frozen = False

    def request(self, msg, timeout_s, on_reply=None):
        """Sends `msg` and waits for the reply (thawed only meanwhile). Returns the reply and
        the seconds between sending and receiving, by the evaluator's clock (timing.py's).

        `on_reply(reply)`, where given, runs once a good reply is in and before the process is
        stopped, and its time is part of the request's: the evaluator's own check that the
        work is done (gpu.py's probe), which ends a timed batch's window."""
        self.thaw()
        seconds = timing.stopwatch()
        try:
            wire.send(self.req_w, msg)
            ready, _, _ = select.select([self.rep_r], [], [], timeout_s)
            if not ready:
                raise KernelFailed(f"{self.role} kernel gave no answer within {timeout_s:.0f} s")
            try:
                reply = wire.recv(self.rep_r)
            except (EOFError, wire.WireError) as e:
                raise KernelFailed(f"{self.role} kernel process ended or garbled its answer: {e}")
            if not isinstance(reply, dict):
                raise KernelFailed(f"{self.role} kernel answered something that is not a reply")
            if not reply.get("ok"):
                raise KernelFailed(str(reply.get("error", "failed"))[:2000])
            if reply.get("shared"):
                self._take_descriptors(reply["shared"])
            if on_reply is not None:
                on_reply(reply)
            elapsed = seconds()
        finally:
            self.freeze()
        return reply, elapsed

    def give(self, fds):
        """Hands `fds` to the process (before the request that names them)."""
        socket.send_fds(self.sock, [b"fds"], list(fds))

    def _take_descriptors(self, shared):
        """The descriptors a reply says were sent with it ([[key, size], ...], in order, in
        messages of at most PER_MESSAGE), read from the socket: they were sent before the
        reply was written."""
        if not isinstance(shared, list) or len(shared) > 1 << 14 or not all(
            isinstance(x, list) and len(x) == 2 and isinstance(x[0], str) and type(x[1]) is int and x[1] > 0 for x in shared
        ):
            raise KernelFailed(f"{self.role} kernel described the memory it shared wrongly")
        fds = []
        try:
            for i in range(0, len(shared), PER_MESSAGE):
                want = min(PER_MESSAGE, len(shared) - i)
                _, got, _, _ = socket.recv_fds(self.sock, 16, want)
                fds += got
                if len(got) != want:
                    raise OSError(f"{len(got)} memory descriptors in a message of {want}")
        except OSError as e:
            for fd in fds:
                os.close(fd)
            raise KernelFailed(f"{self.role} kernel did not send the memory it said it shared: {e}")
        for (key, size), fd in zip(shared, fds):
            old = self.received.pop(key, None)
            if old is not None:
                os.close(old[0])
            self.received[key] = (fd, size)

    def shared(self, key):
        """The descriptor and size the process sent for `key` (kept until `drop_shared`:
        mappings closed meanwhile are made again from it), or None."""
        return self.received.get(key)

    def drop_shared(self):
        """Closes what the process sent: it is told to share anew (its `release`)."""
        for fd, _ in self.received.values():
            os.close(fd)
        self.received = {}

    def ensure_size(self, size, timeout_s):
        if size <= self.size:
            return
        size = max(size, 2 * self.size, 1 << 16)
        os.ftruncate(self.memfd, size)
        if self.shm is not None:
            self.shm.close()
        self.shm = mmap.mmap(self.memfd, size)
        self.size = size
        self.request({"op": "map", "size": size}, timeout_s)

    def lay_out(self, inputs, out_caps, timeout_s):
        """Writes encoded inputs into shared memory, poisons each output window (a new pattern
        each time), and returns the calls: where each input is and where its output goes."""
        total = sum(len(b) for b in inputs) + sum(out_caps)
        self.ensure_size(total, timeout_s)
        calls, pos = [], 0
        pattern = POISON[self.poison % 2]
        self.poison += 1
        for data, cap in zip(inputs, out_caps):
            self.shm[pos:pos + len(data)] = data
            calls.append({"in": [pos, len(data)], "out": [pos + len(data), cap]})
            self.shm[pos + len(data):pos + len(data) + cap] = pattern * cap
            pos += len(data) + cap
        return calls

    def output(self, call):
        """Decodes what the kernel wrote for `call` (bounded; garbage fails decoding)."""
        off, cap = call["out"]
        n = int.from_bytes(self.shm[off:off + 8], "little")
        if n > cap - 8:
            raise wire.WireError("no output written (the window still holds its poison)")
        return wire.decode_all(self.shm[off + 8:off + 8 + n])

    def close(self):
        # Killed, not asked to exit: nothing of it needs to run again, and an interpreter's
        # own teardown (a torch process's above all) is time the next evaluation waits for.
        jail.kill_all(self.uid)
        if self.proc is not None:
            try:
                self.proc.wait(timeout=5)
            except Exception:
                pass
        for fd in (self.req_w, self.rep_r, self.memfd):
            try:
                os.close(fd)
            except OSError:
                pass
        self.drop_shared()
        self.sock.close()
