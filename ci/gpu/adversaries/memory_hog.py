"""Attacks: who is blamed when the device's memory runs out. At import the kernel's process
takes all of the device's free memory but 4 GiB, in 256 MiB tensors it keeps (so `gpu_drop`,
which empties torch's cache, gives none of it back), and every call returns zeros. Where the
case's inputs, pools and references need more than what is left, an evaluator allocation runs
out, and before 2026-11-27 that ended the evaluation as its own failure (`setup 96`):
the runner records an infrastructure error, the report leaves the task run out, and a wrong
kernel is never scored.
Expected: the evaluator measures each kernel's footprint by killing its processes
(memory_blame.py) and fails the gate under way for this kernel's memory; where everything fits
in what is left, the zeros fail correctness. Outputs nested in tuples and lists are zeroed alike
(since 2026-11-28; before, a tuple-returning entry's outputs were handed back computed), and so are
output arguments of any dtype (since 2026-11-29; before, bincount's were handed back computed)."""
import torch

_kept = []
_free = torch.cuda.mem_get_info()[0]
_chunk = 256 << 20
while _free > (4 << 30) + _chunk:
    try:
        _kept.append(torch.empty(_chunk, dtype=torch.uint8, device="cuda"))
    except torch.OutOfMemoryError:
        break
    _free = torch.cuda.mem_get_info()[0]
report(f"holding {len(_kept) * _chunk / 2**30:.1f} GiB, {_free / 2**30:.1f} GiB left free")


def _zeros(f):
    def call(*a, **k):
        return zeros_out(f(*a, **k), a, k)

    return call


install(_zeros)
