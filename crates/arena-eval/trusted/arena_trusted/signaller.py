"""Signals every process of a kernel's user at once, as that user:
python3 -I -S -B signaller.py SOCKET_FD

Why not by pid: a listing of /proc can be outrun. A process that forks a child and exits at
once, its child doing the same, is never the one listed while it runs (its parent was listed,
and is gone by the time the signal is sent). kill(-1, sig) sent by a process of the kernel's
user reaches every process of that user in the container's pid namespace in one step: Linux
signals them under the task list's lock, and a fork under way meanwhile either fails and is
restarted after the signal or hands the signal on to the child it makes (kernel/fork.c,
copy_process: "signals sent to multiple processes during a fork"; kill(2)). No process of the
user is born unsignalled. It reaches no process of another user, nor the container's first
process, nor the sender.

Started by the evaluator (jail.py) before anything heavy is loaded, so that forking it is cheap;
it keeps the evaluator's user (root) and capabilities. For each request (uid, signal) it forks
a child that closes the socket, drops every group and takes the kernel's user (which drops every
capability), calls kill(-1, signal) and exits; the answer is "ok", "none" (the user has no
process) or why not. That child belongs to the user for a moment, and the user's processes may
stop or kill it: it is waited for a bounded time, then killed as root, and the answer says so.

Requests and answers are one message each on a SOCK_SEQPACKET socket: "UID SIGNAL" / a word.
"""
import os
import signal
import socket
import sys
import time

# How long a child may take to signal: a few hundred microseconds when nothing is in the way.
CHILD_S = 0.5


def send_as(uid, sig, sock_fd):
    """Forks the child that signals as `uid`; returns the answer."""
    try:
        pid = os.fork()
    except OSError as e:
        return f"fork: {e.strerror}"
    if pid == 0:
        code = 1
        try:
            os.close(sock_fd)
            os.setgroups([])
            os.setresgid(uid, uid, uid)
            os.setresuid(uid, uid, uid)
            try:
                os.kill(-1, sig)
                code = 0
            except ProcessLookupError:
                code = 3
        finally:
            os._exit(code)
    end = time.monotonic() + CHILD_S
    pause = 0.00002
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() > end:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            return "stalled: the signalling process was held up"
        time.sleep(pause)
        pause = min(2 * pause, 0.001)
    if os.WIFEXITED(status):
        return {0: "ok", 3: "none"}.get(os.WEXITSTATUS(status), f"exit {os.WEXITSTATUS(status)}")
    return f"killed by signal {os.WTERMSIG(status)}"


def main(sock_fd):
    # Its children are waited for one by one; nothing else is: the evaluator's signals are not
    # for it (it ends when the evaluator closes the socket).
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    s = socket.socket(fileno=sock_fd)
    while True:
        try:
            msg = s.recv(64)
        except OSError:
            return
        if not msg:
            return
        try:
            uid, sig = (int(x) for x in msg.split())
            if uid <= 0 or sig not in (signal.SIGSTOP, signal.SIGCONT, signal.SIGKILL):
                raise ValueError(msg)
            answer = send_as(uid, sig, sock_fd)
        except ValueError:
            answer = "refused: not a request"
        s.send(answer.encode())


if __name__ == "__main__":
    main(int(sys.argv[1]))
