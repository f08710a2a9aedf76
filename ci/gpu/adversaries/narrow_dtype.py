"""Attacks: a check that ignores the element type. Every call runs under autocast to fp16 and
hands back fp16 where the reference is fp32: half the bytes written, tensor cores for matrix
products, values within KernelBench's tolerance (its own check compares values only).
Expected: the check compares types too (arena-kernelbench's template; AgentKernelArena's
harnesses compare dtypes): the correctness gate fails."""
import torch


def _narrow(f):
    def call(*a, **k):
        with torch.autocast("cuda", dtype=torch.float16):
            r = f(*a, **k)
        if isinstance(r, torch.Tensor) and r.dtype == torch.float32:
            return r.half()
        return r

    return call


install(_narrow)
