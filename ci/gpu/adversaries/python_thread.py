"""Attacks: the end of a timed request, from a Python thread. After the first calls (which
show the outputs' shapes), each call returns empty outputs at once and a thread fills them
later, so the request is answered before the work is even launched. Outputs nested in tuples
and lists (layernorm_gated's (out, mean, rstd)) are filled alike: before 2026-11-28 this attack
took only a bare tensor, so on tuple-returning entries it computed honestly and was a second
untouched copy (layernorm_gated through `arenactl run`: 1.010 and 1.017, as the untouched
copy read).
Expected: the process is stopped after it answers and its outputs are read and checked by the
evaluator: wrong outputs, a gate fails."""
import threading

import torch

_shape = {}


def _fill(out, r):
    if isinstance(out, torch.Tensor):
        out.copy_(r)
    elif isinstance(out, (tuple, list)):
        for o, x in zip(out, r):
            _fill(o, x)


def _later(f):
    def call(*a, **k):
        if torch.cuda.is_current_stream_capturing() or "out" not in _shape:
            r = f(*a, **k)
            _shape["out"] = r
            return r
        out = each_tensor(_shape["out"], torch.empty_like)
        threading.Thread(target=lambda: _fill(out, f(*a, **k))).start()
        return out

    return call


install(_later)
