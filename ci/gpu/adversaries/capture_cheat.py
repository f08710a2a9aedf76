"""Attacks: behaving differently while captured. Right when called eagerly (the compile and
correctness gates), zeros while a CUDA graph is being captured (the timed batches).
Expected: every replayed output is checked against the evaluator's reference: the performance
gate fails."""
import torch


def _cheat(f):
    def call(*a, **k):
        r = f(*a, **k)
        if torch.cuda.is_current_stream_capturing():
            if isinstance(r, tuple):
                return tuple(torch.zeros_like(t) for t in r)
            if isinstance(r, torch.Tensor):
                return torch.zeros_like(r)
            for t in a:  # a kernel writing into its arguments: zero them instead
                if isinstance(t, torch.Tensor) and t.is_floating_point():
                    t.zero_()
        return r

    return call


install(_cheat)
