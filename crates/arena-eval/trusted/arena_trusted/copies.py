"""Copies of a call's arguments, and whether an argument is still what its copy was: the
evaluator tells a reference that changes its inputs in place (measure.py, Session.fresh)."""
import copy
import sys


def _tensor(a):
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(a, torch.Tensor)


def _copy(a):
    """A copy of an argument that nothing done to `a` reaches: a tensor cloned, a Python
    value copied deeply (a string or number is its own)."""
    if _tensor(a) or hasattr(a, "clone"):
        return a.clone()
    return copy.deepcopy(a)


# An argument at least this large is kept in host memory to be compared after the reference
# ran (`_kept`): on the device, its copy would double the case's inputs.
HOST_COPY_BYTES = 1 << 30
# Bytes compared at a time between a host copy and the device (one such block on the device).
COMPARE_BLOCK = 1 << 28


def _kept(a):
    """A copy of argument `a` to tell afterwards whether the reference changed it: in host
    memory for a tensor of HOST_COPY_BYTES or more (KernelBench's level 1 has 4-16 GiB
    inputs), else as `_copy` makes it."""
    if _tensor(a) and a.is_cuda and a.numel() * a.element_size() >= HOST_COPY_BYTES:
        return a.to("cpu")
    return _copy(a)


def _returned(kept, like):
    """The argument `kept` stands for, where `like` (what the reference changed) lies: a copy
    kept in host memory goes back to the device."""
    if _tensor(kept) and _tensor(like) and kept.device != like.device:
        return kept.to(like.device)
    return kept


def same_bits(a, b):
    """Whether argument `b` still is what its copy `a` was (bit for bit for a tensor, so
    that a NaN left in place counts as unchanged). A copy in host memory is compared block
    by block, so that the device never holds a second copy of `b`."""
    if _tensor(a):
        import torch

        if a.shape != b.shape or a.dtype != b.dtype:
            return False
        if not a.numel():
            return True
        x, y = a.reshape(-1).view(torch.uint8), b.reshape(-1).view(torch.uint8)
        if x.device == y.device:
            return bool(torch.equal(x, y))
        return all(
            torch.equal(x[k : k + COMPARE_BLOCK], y[k : k + COMPARE_BLOCK].to(x.device)) for k in range(0, x.numel(), COMPARE_BLOCK)
        )
    try:
        return bool(a == b) or repr(a) == repr(b)
    except Exception:
        return False
