"""How inputs reach a kernel process and outputs come back, per device.

CPU kernels take Python values: each call's arguments are encoded into the kernel process's
shared memory, written while it is stopped, and decoded by it inside the timed window (a
kernel that wants to cheat the decoding only times itself); each output goes into a window
the evaluator poisons first, and is decoded under bounds.
"""
import hashlib

import wire


class CheckableError(Exception):
    pass


class CpuData:
    def prepare(self, kernel, args_list, wants, timeout):
        inputs = [bytes(wire.encode(tuple(a))) for a in args_list]
        caps = [2 * len(wire.encode(w)) + 1024 for w in wants]
        return kernel.lay_out(inputs, caps, timeout)

    def settle(self, elapsed):
        """The kernel process is stopped once it answers: nothing runs on after it."""
        return 0.0

    def outputs(self, kernel, calls, reply):
        out = []
        for c in calls:
            try:
                out.append(kernel.output(c))
            except wire.WireError as e:
                out.append(_Garbled(str(e)))
        return out

    def after(self, kernel):
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
