"""Attacks: the end of a timed request, with 20x the work hidden behind it. `synchronize` is a
no-op and every call runs the kernel 20 times (ci/gpu/trusted-check.py's `defer`).
Before 2026-11-27: 2.96x on layernorm_gated while doing 20x the work.
Expected: the queued work is waited for or caught (samples.py): far slower than untouched."""
import torch

torch.cuda.synchronize = lambda *a, **k: None


def _twenty(f):
    def call(*a, **k):
        for _ in range(20):
            r = f(*a, **k)
        return r

    return call


install(_twenty)
