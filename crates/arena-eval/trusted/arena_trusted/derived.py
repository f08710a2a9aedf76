"""A trusted harness derived from an AgentKernelArena task's own runner, with no code of its own
per task (issue: trusted evaluation for every AgentKernelArena Triton task).

A task's `scripts/task_runner.py` checks its kernel in `run_correctness()`: for each element of
a module-level list (TEST_SHAPES, SEEDS, TEST_CASES), it seeds torch, builds the inputs, calls
`mod.<entry>(…)` on the module `load_module()` gives, computes a reference and compares. The
evaluator runs exactly that, in its own process, once per fresh call:
- the list holds only the configuration asked for, and `torch.manual_seed(s)` seeds from the
  evaluator's secret and `s`: the inputs are the runner's, never seen before;
- `load_module()` gives a stand-in for the kernel's module: `<entry>` records its arguments
  (copies, before anything runs: these go to the kernel process) and runs the task's original
  kernel on them, so that the runner goes on exactly as it does for the original;
- what the runner then does with the outputs, up to each comparison, is recorded
  (lineage.py): the check of a candidate's outputs is the runner's own comparisons, with its
  tolerance and its reference, applied to the candidate's outputs.
The kernel under test never runs here: it runs in its jailed process, given the recorded
arguments, timed and checked as for a hand-written harness (measure.py).

arena writes a task's `arena_harness.py` as two lines that call `from_runner` (arena_task's
`derive`), where the runner has this form; anything the evaluator then meets that it cannot
follow is a NotDerivable that names the file and the construct.
"""
import hashlib
import importlib.util
import inspect
import os
import sys

import torch

import lineage
from derived_check import Same, Want, looser, output_name, same_as
from copies import same_bits


class NotDerivable(ValueError):
    """The runner does something a derived harness cannot follow (the message says what)."""


# What a kernel argument may be on its way to the kernel process (gpu.py's layout: a tensor,
# or a value that travels as JSON).
_PLAIN = (int, float, bool, str, type(None))


def from_runner(ns, runner, source, entry, cases):
    """Fills the harness module `ns` (its globals) with the trusted harness interface
    (harness.py), derived from the runner at `runner` (relative to the harness's directory)."""
    d = Derived(os.path.dirname(os.path.abspath(ns["__file__"])), runner, source, entry, cases)
    ns.update(
        SOURCE=source,
        ENTRY=entry,
        DEVICE=d.device,
        TEST_SHAPES=d.cases,
        make_inputs=d.make_inputs,
        reference=d.reference,
        make_case=d.make_case,
        check=d.check,
        # The kept-answer and zeros probes' check (admits.py): a reference here is the runner's
        # comparisons, so what is offered to it is the original's outputs, kept.
        check_kept=d.check_kept,
        DERIVED=d,
        WARNINGS=d.warnings,
    )
    if d.output_args:
        ns["OUTPUT_ARGS"] = d.output_args
    if d.returns:
        ns["RETURNS"] = True


class _Inputs(BaseException):
    """Ends an inputs-only pass at the entry's call (a BaseException: the runner's own
    `except Exception` does not catch it)."""


class Derived:
    def __init__(self, root, runner, source, entry, cases):
        self.root = root
        self.path = os.path.join(root, runner)
        self.entry = entry
        self.cases_name = cases
        self.runner = self._load_runner()
        for name in ("run_correctness", "load_module"):
            if not callable(getattr(self.runner, name, None)):
                raise NotDerivable(f"{self.path}: defines no {name}()")
        self.cases = list(getattr(self.runner, cases, None) or [])
        if not self.cases:
            raise NotDerivable(f"{self.path}: {cases} is not a non-empty list")
        self.original = self.runner.load_module()
        fn = getattr(self.original, entry, None)
        if not callable(fn):
            raise NotDerivable(f"{os.path.join(root, source)}: defines no function {entry}")
        self.signature = inspect.signature(fn)
        self.device = "cuda"
        self.output_args = None
        self.returns = False
        self._pending = None
        self.warnings = []
        self._discover()

    def _load_runner(self):
        cwd = os.getcwd()
        sys.path.insert(0, os.path.dirname(self.path))
        try:
            spec = importlib.util.spec_from_file_location("arena_derived_runner", self.path)
            m = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(m)  # the runner changes into its task's directory
            return m
        finally:
            os.chdir(cwd)
            sys.path.pop(0)

    def _discover(self):
        """One pass per visible configuration with the original: which arguments it writes
        (OUTPUT_ARGS, where the runner compares them), and that every pass compares an output."""
        written, returned = set(), False
        self.tolerance, partial, self.compared = {}, set(), set()
        for k, config in enumerate(self.cases):
            rec = self._pass(config, _mix(b"discover", k), discover=True)
            self._self_check(config, rec)
            keys = lineage.roots_of(rec.tracker.compares)
            self.compared |= keys
            written |= {key[1] for key in keys if key[0] == "arg"}
            returned |= any(key[0] == "ret" for key in keys)
            for key, tol in lineage.tolerances(rec.tracker.compares).items():
                self.tolerance[key] = looser(self.tolerance.get(key), tol)
            partial |= {k for k in lineage.partly_compared(rec.tracker.compares) if k[0] == "ret"}
            partial |= {k for k in lineage.partly_compared(rec.tracker.compares, select_ok=True) if k[0] == "arg"}
            self._refuse_read_out(rec, keys)
        # A returned output compared in part may hold memory the kernel never wrote (different
        # in every process), and any output compared through arithmetic (a sum, a difference)
        # has a tolerance that is not per element: their timed calls keep the runner's whole
        # check. An argument written, compared through a selection of its elements, is
        # compared whole: both kernels start from the same copy of it. An output compared only
        # through a truth value has no tolerance to compare it with.
        self.partial = bool(partial)
        roots = [("arg", j) for j in sorted(written)] + [k for k in self.tolerance if k[0] == "ret" and (returned or not written)]
        self.partial |= any(k not in self.tolerance for k in roots) or not roots
        self.output_args = tuple(sorted(written)) or None
        # Both compared: each call's output is (what it returned, the arguments written).
        self.returns = bool(written and returned)

    def _refuse_read_out(self, rec, compared):
        """An output the runner reads with `.item()` (its value leaves torch, and what the
        runner does with it is not followed) must also be compared in a way arena follows:
        else a kernel could put anything there (vLLM's fp8 scales, a scatter's positions)."""
        for name, keys in rec.tracker.followed_out:
            lost = sorted(k for k in keys if k not in compared)
            if lost:
                raise NotDerivable(
                    f"{self.path}: run_correctness reads output {output_name(lost[0])} of {self.entry} with "
                    f".{name}() and compares it in no way arena follows"
                )

    def _self_check(self, config, rec):
        """The runner's comparisons, as recorded, hold for the task's own kernel (every one
        answered True while it ran): else the derivation, or this machine, is not what the
        runner expects. Where they hold for zeros too, the task's own check cannot tell an
        empty answer from a right one: a warning, as for a constant reference."""
        try:
            lineage.replay(rec.tracker.compares, rec.values)
        except AssertionError as e:
            raise NotDerivable(f"{self.path}: the task's own kernel fails its runner's check for {config!r} as arena replays it: {e}")
        zeros = {k: torch.zeros_like(v) if isinstance(v, torch.Tensor) else v for k, v in rec.values.items()}
        try:
            lineage.replay(rec.tracker.compares, zeros)
        except Exception:
            return
        self.warnings.append(
            f"tolerance_admits_zeros: for {config!r}, zeros pass the runner's own comparison "
            f"({self.path}): correctness cannot tell an empty output from a right one"
        )

    def _pass(self, config, seed, discover=False, inputs_only=False):
        """run_correctness() on configuration `config` alone, seeded from `seed`, the entry
        recorded and run as the original; `inputs_only`: ended at the entry's call (neither the
        original nor the reference runs)."""
        rec = _Recorder(self, discover, inputs_only)
        r = self.runner
        saved = {n: getattr(r, n) for n in (self.cases_name, "load_module")}
        seeds = {n: getattr(torch, n) for n in ("manual_seed",)}
        cuda_seeds = {n: getattr(torch.cuda, n) for n in ("manual_seed", "manual_seed_all")}
        # What the runner's torch.manual_seed does here: the same generators seeded the same
        # way, without the cost of the original's other backends (_seed_torch).
        seeded = {"manual_seed": _seed_torch}
        assert_close = torch.testing.assert_close
        cwd = os.getcwd()
        try:
            setattr(r, self.cases_name, [config])
            r.load_module = lambda: rec.proxy
            for table, orig in ((torch, seeded), (torch.cuda, cuda_seeds)):
                for n, f in orig.items():
                    setattr(table, n, lambda s, f=f: f(_mix(seed, s)))
            torch.testing.assert_close = rec.tracker.assert_close(assert_close)
            _seed_torch(_mix(seed, "start"))
            os.chdir(self.root)
            if inputs_only:
                try:
                    r.run_correctness()
                except _Inputs:
                    pass
                ok, err = True, None
            else:
                with rec.tracker:
                    ok, err = r.run_correctness()
        finally:
            os.chdir(cwd)
            for n, v in saved.items():
                setattr(r, n, v)
            for table, orig in ((torch, seeds), (torch.cuda, cuda_seeds)):
                for n, f in orig.items():
                    setattr(table, n, f)
            torch.testing.assert_close = assert_close
        if rec.error is not None:
            raise rec.error
        if rec.args is None:
            raise NotDerivable(f"{self.path}: run_correctness did not call {self.entry} for {config!r} ({err or 'no error given'})")
        if inputs_only:
            return rec
        if not ok:
            # Every comparison of an output answers True here: what failed is the runner
            # itself (its inputs, its reference, or the original kernel on them).
            raise NotDerivable(f"{self.path}: run_correctness failed with the task's own kernel for {config!r}: {err}")
        if not rec.tracker.compares:
            out = rec.tracker.followed_out
            how = f" (it reads the output with .{out[0][0]}())" if out else ""
            raise NotDerivable(f"{self.path}: run_correctness compares no output of {self.entry} in a way arena follows{how}")
        return rec

    # The harness interface (harness.py).

    def make_case(self, config, seed, purpose):
        """A call's arguments and what its output must satisfy. For the correctness gate, the
        runner's whole check (make_inputs, reference). For every other call (timing, sizing,
        warm-up), the runner's inputs and the original's outputs on them (Same): a runner's
        reference can be a Python loop of seconds per call (awq_dequantize's), and a timed
        batch holds thousands; where the runner compares a returned output only in part
        (the rest of it may be memory the kernel never wrote), its whole check as well."""
        if purpose == "correctness" or self.partial:
            args = self.make_inputs(config, seed)
            return args, self.reference(*args)
        rec = self._pass(config, _mix(b"inputs", seed), inputs_only=True)
        given = tuple(a.clone() if isinstance(a, torch.Tensor) else a for a in rec.args)
        out = getattr(self.original, self.entry)(*given)
        roots = {}
        if self.output_args:
            roots = {("arg", j): given[j] for j in self.output_args}
        if self.returns or not self.output_args:
            roots.update(self._returned(out))
        # Only what the runner compares: a returned value it ignores (layernorm_gated's mean
        # and rstd) is not the kernel's to match bit for bit.
        roots = {k: v for k, v in roots.items() if k in self.compared}
        if not roots:
            raise RuntimeError(f"{self.path}: no output of {self.entry} that the runner compares (derived.py)")
        torch.cuda.synchronize()
        return rec.args, Same(roots, self.tolerance)

    def make_inputs(self, config, seed):
        """The runner's inputs for `config` from `seed`, and its comparisons for reference().
        A seed on which the task's own kernel fails the runner's own check (a tolerance the
        original only just meets) is passed over for the next, as the runner would fail there
        too; three in a row is the harness's failure, not the kernel's."""
        for attempt in range(3):
            rec = self._pass(config, _mix(b"inputs", seed, attempt))
            torch.cuda.synchronize()
            try:
                lineage.replay(rec.tracker.compares, rec.values)
            except AssertionError as e:
                why = e
                continue
            self._pending = Want(rec.tracker.compares, rec.meta, dict(rec.values))
            return rec.args
        raise NotDerivable(f"{self.path}: the task's own kernel fails its runner's check for {config!r} on three fresh seeds: {why}")

    def reference(self, *args):
        """The comparisons recorded with the inputs make_inputs gave last (measure.py asks for
        the reference right after the inputs)."""
        want, self._pending = self._pending, None
        if want is None:
            raise RuntimeError("derived harness: reference() without make_inputs() before it")
        return want

    def check(self, got, want):
        self._check_roots(self.roots_of(got), want)

    def check_kept(self, other, want):
        """`want`'s check applied to the original's outputs on other inputs (`other`: a
        correctness call's Want, or another call's Same): the kept-answer probe (admits.py).
        Raises AssertionError where the check tells them apart, as check() does."""
        roots = other.outputs_kept()
        if not roots:
            raise AssertionError("no outputs of the original were kept for the probe")
        # Another call's Same keeps only the outputs the runner compares: only those are asked.
        self._check_roots(roots, want, only=self.compared)

    def _check_roots(self, roots, want, only=None):
        if isinstance(want, Same):
            return same_as(roots, want)
        for key, (shape, dtype) in want.meta.items():
            if only is not None and key not in only:
                continue
            t = roots.get(key)
            if not isinstance(t, torch.Tensor):
                raise AssertionError(f"output {output_name(key)}: expected a tensor, got {type(t).__name__}")
            if tuple(t.shape) != shape or t.dtype != dtype:
                raise AssertionError(f"output {output_name(key)}: got {tuple(t.shape)} {t.dtype}, expected {shape} {dtype}")
        lineage.replay(want.compares, roots)

    def roots_of(self, got):
        """The kernel's outputs as the comparisons name them: what it returned, the arguments
        it wrote (OUTPUT_ARGS), or both ((returned, written) with RETURNS)."""
        if not self.output_args:
            return self._returned(got)
        returned = None
        if self.returns:
            returned, got = got
        got = got if isinstance(got, tuple) else (got,)
        roots = {("arg", j): t for j, t in zip(self.output_args, got)}
        if self.returns:
            roots.update(self._returned(returned))
        return roots

    @staticmethod
    def _returned(got):
        if isinstance(got, (tuple, list)):
            return {("ret", i): t for i, t in enumerate(got)}
        return {("ret",): got}


class _Recorder:
    """One pass: the stand-in module, what its entry was called with, and the tracker."""

    def __init__(self, d, discover, inputs_only=False):
        self.d = d
        self.discover = discover
        self.inputs_only = inputs_only
        self.tracker = lineage.Tracker()
        self.args = None
        self.meta = {}
        self.values = {}  # output key -> the original's tensor (its self-check)
        self.error = None
        self.proxy = _Proxy(d.original, d.entry, self.call)

    def fail(self, why):
        self.error = NotDerivable(f"{self.d.path}: {why}")
        raise self.error

    def call(self, *args, **kwargs):
        d = self.d
        if self.args is not None:
            self.fail(f"run_correctness calls {d.entry} more than once per configuration")
        try:
            bound = d.signature.bind(*args, **kwargs)
        except TypeError as e:
            self.fail(f"{d.entry} called with arguments its signature does not take: {e}")
        if any(p.kind in (p.KEYWORD_ONLY, p.VAR_KEYWORD, p.VAR_POSITIONAL) for p in d.signature.parameters.values() if p.name in bound.arguments):
            self.fail(f"{d.entry} takes keyword-only or variadic arguments; arena passes arguments by position")
        # Every argument up to the last one given, by position (defaults filled in between).
        names = list(d.signature.parameters)
        last = max((names.index(n) for n in bound.arguments), default=-1)
        bound.apply_defaults()
        positional = [bound.arguments[n] for n in names[: last + 1]]
        self._check_args(positional)
        self.args = tuple(a.clone() if isinstance(a, torch.Tensor) else a for a in positional)
        if self.inputs_only:
            raise _Inputs()
        before = [a.clone() if isinstance(a, torch.Tensor) else None for a in positional] if self.discover else None
        self.tracker.paused = True
        try:
            out = getattr(d.original, d.entry)(*positional)
        finally:
            self.tracker.paused = False
        self._roots(out, positional, before)
        return out

    def _check_args(self, args):
        storages = {}
        for j, a in enumerate(args):
            if isinstance(a, torch.Tensor):
                if not a.is_contiguous() and not gpu_dense(a):
                    self.fail(f"argument {j} of {self.d.entry} is a view with gaps or overlaps; arena gives the kernel dense copies")
                if a.numel():
                    ptr = a.untyped_storage().data_ptr()
                    if ptr in storages:
                        self.fail(f"arguments {storages[ptr]} and {j} of {self.d.entry} share memory; arena gives each its own")
                    storages[ptr] = j
            elif isinstance(a, torch.dtype):
                if str(a).replace("torch.", "") not in gpu_types():
                    self.fail(f"argument {j} of {self.d.entry} is the element type {a}, which arena cannot pass")
            elif not isinstance(a, _PLAIN) and not (isinstance(a, (list, tuple)) and all(isinstance(v, _PLAIN) for v in a)):
                self.fail(f"argument {j} of {self.d.entry} is a {type(a).__name__}; arena passes tensors and plain values")

    def _roots(self, out, args, before):
        t = self.tracker
        if self.discover:
            # Every argument the original changed may be an output; the comparisons say which.
            for j, (a, b) in enumerate(zip(args, before)):
                if b is not None and not same_bits(a, b):
                    self._root(a, ("arg", j))
        elif self.d.output_args:
            for j in self.d.output_args:
                self._root(args[j], ("arg", j))
            if not self.d.returns:
                return
        if isinstance(out, torch.Tensor) and t.node(out) is None:
            self._root(out, ("ret",))
        elif isinstance(out, (tuple, list)):
            for i, v in enumerate(out):
                if isinstance(v, torch.Tensor) and t.node(v) is None:
                    self._root(v, ("ret", i))

    def _root(self, tensor, key):
        self.tracker.root(tensor, key)
        self.meta[key] = (tuple(tensor.shape), tensor.dtype)
        self.values[key] = tensor


class _Proxy:
    """The kernel's module as the runner sees it: the entry recorded, anything else (a helper
    such as `_get_fp8_dtype`) the original's."""

    def __init__(self, original, entry, call):
        self._original, self._entry, self._call = original, entry, call

    def __getattr__(self, name):
        if name == self._entry:
            return self._call
        return getattr(self._original, name)


def gpu_dense(t):
    """Whether arena's slots keep `t`'s strides (gpu.py's is_dense)."""
    import gpu

    return gpu.is_dense(t)


def gpu_types():
    """The element types arena passes by name (gpu.py's DTYPES)."""
    import gpu

    return gpu.DTYPES


def _seed_torch(s):
    """torch.manual_seed(s) for the generators a task can use: the CPU's, and every CUDA
    device's where CUDA is there. The same generators seeded with the same value, so the same
    draws. torch.manual_seed also seeds XPU and MTIA, and where those are absent each call
    queues a lazy call for them with its formatted Python stack (and, on a machine without
    CUDA, one for CUDA too), dearer the deeper the stack: twice per timed call of a derived
    harness, a third of an evaluation on an H200 (42 -> 28 s for rms_norm; docs/benchmarks.md,
    2026-11-28), and a queue that never empties."""
    s = int(s)
    if torch.cuda.is_available() and not torch.cuda._is_in_bad_fork():
        torch.cuda.manual_seed_all(s)
    return torch.default_generator.manual_seed(s)


def _mix(seed, *parts):
    h = hashlib.sha256(repr(seed).encode() if not isinstance(seed, bytes) else seed)
    for s in parts:
        h.update(b"\0" + repr(s).encode())
    return int.from_bytes(h.digest()[:8], "little") >> 1


