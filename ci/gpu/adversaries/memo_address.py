"""Attacks: the same inputs twice. Outputs are kept by the address and shape of the first
tensor argument, and a call whose inputs sit where an earlier call's did gets the earlier
output back (input slots rotate, so addresses come back).
Expected: every call has fresh inputs from a secret seed: stale outputs, a gate fails."""
import torch

_seen = {}


def _memo(f):
    def call(*a, **k):
        first = next((t for t in a if isinstance(t, torch.Tensor)), None)
        key = None if first is None else (first.data_ptr(), tuple(first.shape))
        if key is not None and key in _seen:
            return _seen[key]
        r = f(*a, **k)
        if key is not None:
            _seen[key] = r
        return r

    return call


install(_memo)
