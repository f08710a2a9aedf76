"""A task's trusted harness: the module that says what the kernel is and how to judge it.

It defines SOURCE (the kernel file), ENTRY (the function; or a class, KernelBench's `ModelNew`:
then each call's first argument is the JSON of {"args", "seed", ...} that the kernel process
builds one instance from, per distinct value: child.Instances), TEST_SHAPES (the visible
configurations), make_inputs(config, seed) (the call's arguments, a tuple), reference(*args)
(the right output) and optionally check(got, want) (raises AssertionError; default: equality)
and, where a reference is not an output but keeps the original's (`outputs_kept()`, a derived
harness's), check_kept(other, want), which offers `want`'s check the outputs `other` keeps
(the probes of admits.py; a reference that keeps outputs without it is the harness's error)
and DEVICE ("cpu" or "cuda"), or DEVICES, the devices it runs on in the order preferred: the
evaluator then picks the GPU where its container has one, else the CPU, and sets DEVICE in the
module; optionally PRELOAD, the modules every kernel imports first (loaded once in the
process kernel processes are forked from: zygote.py); and optionally COMPILED_BASELINE,
torch.compile's keyword arguments: the original is then also timed compiled, a second
baseline (KernelBench's torch.compile column); and optionally OUTPUT_ARGS, for a GPU kernel
that writes its output into arguments it is given (vLLM's in-place kernels): the indices of
those arguments, which the evaluator reads from its own input slots after each batch (what
the call returns is then ignored; the reference is given copies of them); optionally
KERNEL_PART, for a SOURCE that holds the kernel above a rule and its tests below
(AgentKernelArena's rocmbench files): the kernel process runs only the kernel part; and
optionally RETURNS, for a kernel that writes into OUTPUT_ARGS and returns an output too (each
call's output is then the pair); and optionally LAUNCH, for an ENTRY that is a bare `@triton.jit` kernel: each call's first
argument is {"grid": [...], "meta": {...}} and the call is ENTRY[grid](*rest, **meta)
(entry.py; it writes into arguments, so LAUNCH needs OUTPUT_ARGS). Only the evaluator imports
it; kernel processes cannot read it.
"""
import importlib.util
import os
import sys


def tensor_check(atol, rtol):
    """Shape, dtype and allclose, for tensors."""

    def check(got, want):
        import torch

        if not isinstance(got, torch.Tensor):
            raise AssertionError(f"expected a tensor, got a {type(got).__name__}")
        if got.shape != want.shape or got.dtype != want.dtype:
            raise AssertionError(f"got {tuple(got.shape)} {got.dtype}, expected {tuple(want.shape)} {want.dtype}")
        if not torch.allclose(got.float(), want.float(), atol=atol, rtol=rtol, equal_nan=False):
            err = (got.float() - want.float()).abs().nan_to_num(float("inf")).max().item()
            raise AssertionError(f"max abs error {err:.3e} exceeds atol={atol}, rtol={rtol}")

    return check


def default_check(got, want):
    if type(got) is not type(want):
        raise AssertionError(f"expected a {type(want).__name__}, got a {type(got).__name__}")
    if got == want:
        return
    if isinstance(want, list) and len(got) != len(want):
        raise AssertionError(f"expected {len(want)} items, got {len(got)}")
    if isinstance(want, list):
        bad = next(i for i, (g, w) in enumerate(zip(got, want)) if g != w)
        raise AssertionError(f"item {bad} differs")
    raise AssertionError("output differs from the reference")


def pick_device(m, path, accelerator):
    """The device the task runs on here: DEVICE, or the first of DEVICES this evaluator has
    (a GPU where `accelerator`), which is then set as the module's DEVICE."""
    devices = getattr(m, "DEVICES", None)
    if devices is None:
        return getattr(m, "DEVICE", "cpu")
    have = ["cuda", "cpu"] if accelerator else ["cpu"]
    for d in devices:
        if d in have:
            m.DEVICE = d
            return d
    raise ValueError(
        f"{path}: the task runs on {', '.join(devices)}, and this evaluator has "
        f"{'a GPU and a CPU' if accelerator else 'no GPU'}"
    )


def compiled_options(m, path):
    """COMPILED_BASELINE: torch.compile's keyword arguments (a dict of plain values, {} for its
    defaults) for a second baseline, the original compiled; None where the harness has none."""
    opts = getattr(m, "COMPILED_BASELINE", None)
    if opts is None:
        return None
    plain = (str, int, float, bool, type(None))
    if not isinstance(opts, dict) or not all(
        isinstance(k, str) and (isinstance(v, plain) or (isinstance(v, dict) and all(isinstance(x, plain) for x in v.values())))
        for k, v in opts.items()
    ):
        raise ValueError(f"{path}: COMPILED_BASELINE must be a dict of torch.compile's keyword arguments (plain values), not {opts!r}")
    return opts


def output_args(m, path, device):
    """OUTPUT_ARGS: the indices of the arguments a kernel writes its output into (a tuple of
    distinct non-negative ints, GPU tasks only); None where the kernel returns its output."""
    idx = getattr(m, "OUTPUT_ARGS", None)
    if idx is None:
        return None
    if (
        not isinstance(idx, (tuple, list))
        or not idx
        or not all(type(i) is int and i >= 0 for i in idx)
        or len(set(idx)) != len(idx)
    ):
        raise ValueError(f"{path}: OUTPUT_ARGS must be a non-empty tuple of distinct argument indices, not {idx!r}")
    if device != "cuda":
        # A CPU kernel's arguments are decoded in its own process: nothing it writes into
        # them comes back.
        raise ValueError(f"{path}: OUTPUT_ARGS (outputs written into arguments) needs a GPU task; this one runs on {device}")
    return tuple(idx)


class Harness:
    def __init__(self, path, accelerator=True):
        sys.path.insert(0, os.path.dirname(path))
        spec = importlib.util.spec_from_file_location("arena_task_harness", path)
        m = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(m)
        missing = [n for n in ("SOURCE", "ENTRY", "TEST_SHAPES", "make_inputs", "reference") if not hasattr(m, n)]
        if missing:
            raise ValueError(f"{path}: the trusted harness interface lacks {', '.join(missing)}")
        self.module = m
        self.source = m.SOURCE
        self.entry = m.ENTRY
        self.shapes = list(m.TEST_SHAPES)
        self.make_inputs = m.make_inputs
        self.reference = m.reference
        self.device = pick_device(m, path, accelerator)
        default = default_check
        if self.device == "cuda":
            default = tensor_check(getattr(m, "ATOL", 1e-5), getattr(m, "RTOL", 1e-5))
        self.check = getattr(m, "check", default)
        # For a reference that is not an output (it has outputs_kept(): a derived harness's),
        # the probes' check (admits.py): check_kept(other, want) with `other` another
        # reference, or zeros of its outputs, standing for the kernel's output.
        self.check_kept = getattr(m, "check_kept", None)
        self.make_case = getattr(m, "make_case", None)
        # What the harness found out about the task itself (a derived one: derived.py), said
        # in the evaluation's warnings.
        self.warnings = [str(w) for w in getattr(m, "WARNINGS", [])]
        self.compiled_baseline = compiled_options(m, path)
        self.output_args = output_args(m, path, self.device)
        self.kernel_part = bool(getattr(m, "KERNEL_PART", False))
        self.launch = bool(getattr(m, "LAUNCH", False))
        # RETURNS: a kernel that writes into OUTPUT_ARGS and returns an output as well; each
        # call's output is then (what it returned, the arguments written).
        self.returns = bool(getattr(m, "RETURNS", False))
        if self.returns and not self.output_args:
            raise ValueError(f"{path}: RETURNS (an output returned beside the arguments written) needs OUTPUT_ARGS")
        if self.launch and not self.output_args:
            raise ValueError(f"{path}: LAUNCH (ENTRY a bare Triton kernel, which returns nothing) needs OUTPUT_ARGS")
        self.path = path

    def check_output_args(self, args):
        """A harness error (not the kernel's): OUTPUT_ARGS names an argument that
        make_inputs does not give as a tensor."""
        for i in self.output_args or ():
            if i >= len(args) or type(args[i]).__name__ != "Tensor":
                raise ValueError(
                    f"{self.path}: OUTPUT_ARGS names argument {i}, which is not a tensor of the "
                    f"{len(args)} arguments make_inputs gives"
                )
