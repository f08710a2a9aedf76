"""How inputs reach a kernel process and outputs come back, per device.

CPU kernels take Python values: each call's arguments are encoded into the kernel process's
shared memory, written while it is stopped, and decoded by it inside the timed window (a
kernel that wants to cheat the decoding only times itself); each output goes into a window
the evaluator poisons first, and is decoded under bounds. Before each timed batch the
evaluator writes a buffer twice the size of the last-level cache (timing.CacheFlush).
"""
import hashlib

import wire
from timing import CacheFlush


class CheckableError(Exception):
    pass


class CpuData:
    # `assign` lays the inputs out: a batch's inputs cannot be written again (timing.py).
    rewrites_inputs = False
    # Each call's output window is sized by its reference output (prepare): a call with no
    # reference would get a window the kernel could tell apart, so every call is checked.
    checks_a_sample = False

    def __init__(self):
        # Written before each timed batch (timing.py, where the rest of the timed window is).
        self.flush = CacheFlush()

    def dropped_inputs(self, kernel):
        """The evaluator's copies of a batch's inputs are gone (GpuData gives a large case's
        memory back to the device); nothing is held for them here."""

    def big(self, kernel):
        """No case is large for a CPU kernel: its inputs cross by the wire, per batch."""
        return False

    def forget(self, kernel):
        """Nothing to give back: a CPU kernel's window is the one mapping, remade per batch."""

    def end_session(self):
        """Nothing is shared with kernel processes past their evaluation."""

    def prepare(self, kernel, args_list, wants, timeout):
        inputs = [bytes(wire.encode(tuple(a))) for a in args_list]
        caps = [2 * len(wire.encode(w)) + 1024 for w in wants]
        return kernel.lay_out(inputs, caps, timeout)

    def assign(self, kernel, args_list, timeout, wants=None):
        """The batch's calls, their inputs laid out in the kernel's window already (a CPU
        kernel process is stopped while they are written, and nothing is captured first)."""
        return self.prepare(kernel, args_list, wants, timeout)

    def stage(self, kernel, calls, args_list):
        """Nothing to work out: `assign` laid the inputs out."""

    def fill(self, kernel, calls, args_list):
        """Nothing left to write: `assign` laid the inputs out."""

    # The watch, the sample of the outputs and their check again are a GPU's
    # (gpu_guard.py, samples.py): a CPU kernel process is stopped once it answers, and its
    # outputs are in a window it can no longer write.
    def arm(self, kernel):
        pass

    def disarm(self, kernel, failing=False, last=True):
        return True

    def plan(self, kernel, calls, described, rng, output_args, returns=False):
        return None

    def probe(self, kernel, plan, reply):
        pass

    def confirm(self, plan):
        pass

    def outputs(self, kernel, calls, reply, output_args=None, returns=False, wanted=None):
        """Each call's output, decoded from its window (`output_args` is a GPU task's: the
        harness refuses it on a CPU). Every call's, whatever `wanted` says: a CPU batch checks
        every output (checks_a_sample)."""
        out = []
        for c in calls:
            try:
                out.append(kernel.output(c))
            except wire.WireError as e:
                out.append(_Garbled(str(e)))
        return out

    def after(self, kernel, graph=False):
        pass

    def calls_cap(self, args):
        """Inputs are encoded per call into a window sized for the batch: no cap of ours."""
        return 1 << 30

    def fingerprint(self, value):
        return hashlib.sha256(bytes(wire.encode(value))).hexdigest()


class _Garbled:
    """An output that did not decode: equal to nothing."""

    def __init__(self, why):
        self.why = why

    def __eq__(self, other):
        return False

    def __repr__(self):
        return f"<undecodable output: {self.why}>"
