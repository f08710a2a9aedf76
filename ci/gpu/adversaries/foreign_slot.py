"""Attacks: outputs aliased to memory the call was not given. Each call's output is written into
the next call's input slot of the evaluator's pool and handed back from there (what a kernel
that batches calls, or one that shares one output among calls, would hand back).
Expected: an output may lie in its own call's slot only: refused, a gate fails. (A kernel
writing into its arguments, OUTPUT_ARGS, is read from its own slots: nothing to hand back.)
Outputs nested in tuples and lists each go into a slot of their own (since 2026-11-28; before, a
tuple-returning entry's outputs were handed back where the kernel made them)."""
import torch

import gpu  # the evaluator's own file beside child.py (read-only)

_c = child()
_n = [0]


def _moved(r, g):
    """The tensor `r` copied into another call's input slot (where it fits)."""
    if r.numel() * r.element_size() > g.slot_bytes:
        return r
    _n[0] += 1
    s = _n[0] % g.count
    chunk, j = divmod(s, g.per_chunk)
    t = gpu.tensor_at(g.pools[chunk][0] + j * g.slot_bytes, list(r.shape), list(r.stride()), r.dtype)
    t.copy_(r)
    return t


def _elsewhere(f):
    def call(*a, **k):
        r = f(*a, **k)
        g = _c.gpu
        if g is None or not g.pools:
            return r
        return each_tensor(r, lambda t: _moved(t, g))

    return call


install(_elsewhere)
