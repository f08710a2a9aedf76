"""Attacks: behaving differently while captured. Right when called eagerly (the compile and
correctness gates), zeros while a CUDA graph is being captured (the timed batches).
Expected: every replayed output is checked against the evaluator's reference: the performance
gate fails. On an eager-timed task (bincount) nothing is captured, and this is the untouched
kernel behind a wrapper: it reads as noop_wrap does."""
import torch


def _cheat(f):
    def call(*a, **k):
        r = f(*a, **k)
        if torch.cuda.is_current_stream_capturing():
            return zeros_out(r, a, k)
        return r

    return call


install(_cheat)
