"""The deadline of a job, for the evaluator (evaluate.py, serve.py) and the gate runner of
self-reported tasks (gates.py): SIGALRM raises Deadline wherever the process is.

One class for every module: the evaluator runs as __main__ and is imported again by serve.py,
and a Deadline defined in evaluate.py would be two classes, of which `except` catches one."""
import signal


class Deadline(BaseException):
    """The job's deadline passed: whatever runs is stopped, and the process ends.

    Not an Exception: the alarm fires wherever the process is, and the `except Exception` that
    turns a harness's or a kernel's error into a failed gate (or the floor probe's) must not
    turn the deadline into one (a request out of time would be answered with failed gates,
    not the deadline)."""


def install(who):
    """From here on, SIGALRM raises Deadline naming `who` ("the evaluator")."""

    def on_alarm(signum, frame):
        raise Deadline(f"{who}'s deadline passed")

    signal.signal(signal.SIGALRM, on_alarm)
