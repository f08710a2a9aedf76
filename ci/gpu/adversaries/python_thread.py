"""Attacks: the end of a timed request, from a Python thread. After the first calls (which
show the output's shape), each call returns an empty output at once and a thread fills it
later, so the request is answered before the work is even launched.
Expected: the process is stopped after it answers and its outputs are read and checked by the
evaluator: wrong outputs, a gate fails."""
import threading

import torch

_shape = {}


def _later(f):
    def call(*a, **k):
        if torch.cuda.is_current_stream_capturing() or "out" not in _shape:
            r = f(*a, **k)
            if isinstance(r, torch.Tensor):
                _shape["out"] = r
            return r
        out = torch.empty_like(_shape["out"])

        def fill():
            r = f(*a, **k)
            if isinstance(r, torch.Tensor):
                out.copy_(r)

        threading.Thread(target=fill).start()
        return out if isinstance(_shape.get("out"), torch.Tensor) else None

    return call


install(_later)
