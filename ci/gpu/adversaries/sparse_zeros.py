"""Attacks: a sample of each timed batch's outputs checked (PerfSettings.checked_calls, issue
40), where the evaluator checks fewer than every call. Honest in the correctness gate, while
a session's batches are sized, and in the capture that sizes them (untimed and checked in
full: a process's first capture after three eager requests, two warm-ups and a guess); in
every other capture one call in 16 hands back zeros and computes nothing, so each timed batch
does 15/16 of the work. (Before this stop it was honest in every process's first capture: at
one pair per session, a later session's only timed batch, so it never cheated there.)
Where the task cannot be captured (bincount), its eager calls after the failed capture (the
first session's timed batches) go the same way.
Expected: every output checked (checked_calls 0): wrong output in a timed batch. With a
sample of 64 calls (the default since 2026-11-29) a batch passes with probability
(15/16) ** 64 = 1.6 %, and each timed batch is one more such draw: a gate fails.
(A kernel that skips fewer calls, to pass more often, saves less than the untouched copy's
spread between sessions.)"""
import torch

_seen = {"captures": 0, "runs": 0, "k": 0, "sizing": False}
_c = child()
_capture, _run = _c.capture, _c.run


def _counted(msg):
    """Each capture request counted (the kernel process's own handler, shared with it), and
    whether it is the one that sizes the batches: a later session's process warms up by one
    eager call, and its first capture is already timed."""
    st = _seen
    st["captures"] += 1
    st["sizing"] = st["captures"] == 1 and st["runs"] >= 3
    return _capture(msg)


def _ran(msg):
    _seen["runs"] += 1
    return _run(msg)


_c.capture, _c.run = _counted, _ran


def _sparse(f):
    def call(*a, **k):
        st = _seen
        # Captured: any capture but the sizing one. Eager: only once a capture was
        # tried (a task that cannot be captured; a captured task's later sessions warm up by
        # an eager call before their first capture).
        cheat = not st["sizing"] if torch.cuda.is_current_stream_capturing() else st["captures"] >= 1
        st["k"] += 1
        if cheat and st["k"] % 16 == 0:
            if st.get("said") != st["captures"]:
                # Once per capture (or eager stretch): the suite's table shows that it fired.
                st["said"] = st["captures"]
                report(f"zeroing one call in 16 ({'captured' if torch.cuda.is_current_stream_capturing() else 'eager'}, capture {st['captures']})")
            # What the call would return, without its work: the entry run once for shapes on
            # the first such call, zeros of them after.
            if "shape" not in st:
                st["shape"] = f(*a, **k)
            return zeros_out(st["shape"], a, k)
        return f(*a, **k)

    return call


install(_sparse)
