"""What a derived harness's calls are checked against (derived.py): the runner's recorded
comparisons (Want, for the correctness gate), or the task's original kernel's outputs on the
same inputs within the runner's tolerance (Same, for timed calls)."""
import hashlib

import torch

import lineage
from copies import same_bits


class Want:
    """What a call's output must satisfy: the runner's comparisons, and the outputs' shapes and
    dtypes as the original gave them; `values`, the original's outputs on these inputs (what
    the kept-answer probe offers another input's comparisons, admits.py)."""

    def __init__(self, compares, meta, values=None):
        self.compares = compares
        self.meta = meta
        self.values = values or {}

    def outputs_kept(self):
        return self.values

    def __repr__(self):
        # measure.py fingerprints references to notice a constant one: the values here that
        # are not the kernel's (the reference) are what differ between inputs.
        h = hashlib.sha256()
        for t in lineage.constants(self.compares):
            h.update(repr((tuple(t.shape), str(t.dtype))).encode())
            h.update(t.detach().float().cpu().contiguous().numpy().tobytes())
        return f"Want({h.hexdigest()[:16]})"


class Same:
    """What a timed call's output must satisfy: the original's outputs on the same inputs, each
    within the tolerance the runner compares that output with (exactly, where it uses
    torch.equal)."""

    def __init__(self, outputs, tolerance):
        self.outputs = outputs
        self.tolerance = tolerance

    def outputs_kept(self):
        return self.outputs

    def __repr__(self):
        h = hashlib.sha256()
        for key in sorted(self.outputs):
            t = self.outputs[key]
            h.update(repr((key, tuple(t.shape), str(t.dtype))).encode())
            h.update(t.detach().float().cpu().contiguous().numpy().tobytes())
        return f"Same({h.hexdigest()[:16]})"


def same_as(roots, want):
    """Each output as the original's on the same inputs (Same), within its tolerance."""
    for key, ref in want.outputs.items():
        t = roots.get(key)
        if not isinstance(ref, torch.Tensor):
            if t != ref:
                raise AssertionError(f"output {output_name(key)}: {t!r}, expected {ref!r}")
            continue
        if not isinstance(t, torch.Tensor):
            raise AssertionError(f"output {output_name(key)}: expected a tensor, got {type(t).__name__}")
        if t.shape != ref.shape or t.dtype != ref.dtype:
            raise AssertionError(f"output {output_name(key)}: got {tuple(t.shape)} {t.dtype}, expected {tuple(ref.shape)} {ref.dtype}")
        tol = want.tolerance.get(key)
        a, b = t.to(ref.device), ref
        if tol is None or tol == (0.0, 0.0) or a.is_complex() or b.dtype == torch.bool:
            if not same_bits(a, b) and not torch.equal(a, b):
                raise AssertionError(f"output {output_name(key)} differs from the task's own kernel's")
            continue
        atol, rtol = tol
        if not torch.allclose(a.double(), b.double(), atol=atol, rtol=rtol, equal_nan=True):
            err = (a.double() - b.double()).abs().nan_to_num(float("inf")).max().item()
            raise AssertionError(
                f"output {output_name(key)}: max abs error {err:.3e} from the task's own kernel's exceeds atol={atol}, rtol={rtol}"
            )


def looser(a, b):
    """The looser of two tolerances (None: exact)."""
    if a is None or b is None:
        return a if b is None else b
    return (max(a[0], b[0]), max(a[1], b[1]))


def output_name(key):
    return "returned" if key == ("ret",) else (f"returned item {key[1]}" if key[0] == "ret" else f"argument {key[1]}")
