"""Attacks: a sample of each timed batch's outputs checked (PerfSettings.checked_calls, issue
40), where the evaluator checks fewer than every call. Honest in the correctness gate, while
a session's batches are sized, and in the first batch it captures in each process (the
untimed capture that sizes the batches is checked in full); in every later capture one call
in 16 hands back zeros and computes nothing, so each timed batch does 15/16 of the work.
Where the task cannot be captured (bincount), its eager calls after the failed capture (the
first session's timed batches) go the same way.
Expected: every output checked (checked_calls 0, the default): wrong output in a timed batch.
With a sample of 64 calls a batch passes with probability (15/16) ** 64 = 1.6 %: a gate fails.
(A kernel that skips fewer calls, to pass more often, saves less than the untouched copy's
spread between sessions.)"""
import torch

_seen = {"captures": 0, "k": 0}
_c = child()
_capture = _c.capture


def _counted(msg):
    """Each capture request counted (the kernel process's own handler, shared with it)."""
    _seen["captures"] += 1
    return _capture(msg)


_c.capture = _counted


def _sparse(f):
    def call(*a, **k):
        st = _seen
        # Captured: any capture after the process's first. Eager: only once a capture was
        # tried (a task that cannot be captured; a captured task's later sessions warm up by
        # an eager call before their first capture).
        cheat = st["captures"] > 1 if torch.cuda.is_current_stream_capturing() else st["captures"] >= 1
        st["k"] += 1
        if cheat and st["k"] % 16 == 0:
            # What the call would return, without its work: the entry run once for shapes on
            # the first such call, zeros of them after.
            if "shape" not in st:
                st["shape"] = f(*a, **k)
            return zeros_out(st["shape"], a, k)
        return f(*a, **k)

    return call


install(_sparse)
