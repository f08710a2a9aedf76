#!/usr/bin/env python3
"""arena's derived trusted harnesses (crates/arena-eval/trusted/arena_trusted/derived.py),
checked on a machine without a GPU: Triton's interpreter runs each task's kernel on CPU tensors,
and the runner's "cuda" tensors are made on the CPU. For every task given whose arena_harness.py
is derived (`arenactl task materialize` wrote it), and each of its visible configurations:
- the task's own kernel, given the inputs the derived harness makes, passes its check;
- the same kernel's output for other inputs fails it, and so do zeros (outputs of the right
  shape and dtype) and, where one has the output's shape, a copy of an input: the check can fail;
- the evaluator's probe (admits.py) on each configuration, as its correctness gate runs it:
  where the check passes zeros, or the original's outputs on three other inputs, the row names
  the configuration and why (`admits_other_inputs`): the evaluator credits no speedup there.
The kernel under test is never imported here: a kernel cannot patch the runner's reference or
its comparison, as the runner runs only in the evaluator.
A task whose runner arena cannot follow is `not_derivable` (it stays self-reported, the
reason named); one this machine cannot run (the interpreter's limits, a runner that asks for the
NVIDIA driver) is `cpu_cannot_run`; a task whose own tolerance passes zeros is `ok` with the
warning the evaluator gives (tolerance_admits_zeros). Prints one line per task and a summary;
--json for scripts. Exit 1 where a derived harness fails (`fail`, `error`).

With --unseen DIR (`arenactl unseen generate --tasks … --out DIR`), the first
--unseen-cases hidden configurations of each task are checked the same way.

usage: python3 ci/aka-derived-check.py [--json] [--cases N] [--budget-s S] [--unseen DIR]
           [--unseen-cases N] TASK_DIR...
"""
import argparse
import contextlib
import json
import os
import signal
import sys
import time

os.environ["TRITON_INTERPRET"] = "1"
import torch  # noqa: E402
import triton  # noqa: E402
from torch.overrides import TorchFunctionMode  # noqa: E402

import triton.runtime.interpreter as _interp  # noqa: E402

# Triton 3.6's interpreter takes `int()` of a one-element array, which NumPy 2.4 refuses
# ("only 0-dimensional arrays can be converted"): `range(0, n, BLOCK)` in a kernel then fails
# on the CPU only. The same, through `.item()`.
_patch_lang_tensor = _interp._patch_lang_tensor


def _patch_index(tensor, scope):
    _patch_lang_tensor(tensor, scope)
    scope.set_attr(tensor, "__index__", lambda self: int(self.handle.data.item()))


_interp._patch_lang_tensor = _patch_index
_autotune = triton.autotune
triton.autotune = lambda configs, key, **kw: _autotune(configs=configs[:1], key=key, **kw)
torch.cuda.device = lambda index: contextlib.nullcontext()
torch.cuda.synchronize = lambda *a, **k: None
torch.cuda.manual_seed = lambda s: None
torch.cuda.manual_seed_all = lambda s: None
here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "../crates/arena-eval/trusted/arena_trusted"))
import admits  # noqa: E402
import derived  # noqa: E402
import harness as evaluator_harness  # noqa: E402


def _cpu(d):
    if isinstance(d, torch.device):
        return torch.device("cpu") if d.type == "cuda" else d
    if isinstance(d, str) and d.startswith("cuda"):
        return "cpu"
    return d


class OnCpu(TorchFunctionMode):
    """A runner's "cuda" tensors made on the CPU (`device=`, `.cuda()`, `.to("cuda")`)."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = dict(kwargs or {})
        if "device" in kwargs:
            kwargs["device"] = _cpu(kwargs["device"])
        name = getattr(func, "__name__", "")
        if name == "cuda":
            return args[0]
        if name == "to":
            args = tuple(_cpu(a) for a in args)
        return func(*args, **kwargs)


def own_runner_fails(task_dir):
    """Whether the task's own run_correctness, run as it is (no arena), fails on this machine
    too: then what the derivation met is this machine's limit, not the derivation's."""
    import importlib.util

    cwd = os.getcwd()
    try:
        spec = importlib.util.spec_from_file_location("own_runner", os.path.join(task_dir, "scripts/task_runner.py"))
        m = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(m)
        ok, _ = m.run_correctness()
        return not ok
    except Exception:
        return True
    finally:
        os.chdir(cwd)


def outputs(d, args):
    """The original kernel's outputs on `args` (copies), as the evaluator reads a kernel's."""
    args = tuple(a.clone() if isinstance(a, torch.Tensor) else a for a in args)
    out = getattr(d.original, d.entry)(*args)
    if d.output_args:
        got = tuple(args[j] for j in d.output_args)
        got = got[0] if len(got) == 1 else got
        return (out, got) if d.returns else got
    return out


def must_fail(d, got, want, what):
    try:
        d.check(got, want)
    except AssertionError:
        return None
    return f"{what} passed the check"


def _equal(a, b):
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        return a.shape == b.shape and a.dtype == b.dtype and torch.equal(a, b)
    if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)):
        return len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b))
    return a == b


# arena_task::derive::DERIVED_MARKER: the first line of a derived harness.
DERIVED_MARKER = "# arena: trusted harness derived from the task's runner"

# What only this machine cannot run (Triton's interpreter, no GPU driver), not the derivation.
CPU_LIMITS = (
    "InterpreterError",
    "NVIDIA driver",
    "to ir type",
    "primitive_bitwidth",
    "'tensor' object has no attribute",
)


def check_task(task_dir, cases, hidden=None):
    path = os.path.join(task_dir, "arena_harness.py")
    h = evaluator_harness.Harness(path, accelerator=True)
    d = h.module.DERIVED
    problems, kept = [], []
    for k, config in enumerate(d.cases[:cases]):
        # The correctness gate's calls (the runner's whole check), then a timed call's (the
        # original's outputs on the same inputs, within the runner's tolerance).
        for purpose in ("correctness", "performance"):
            problems += check_purpose(d, config, 1000 + k, purpose)
        # Through the evaluator's own harness object (its check_kept as the loader passes it
        # on), not the Derived behind it: what the evaluator probes.
        why = admits_other_inputs(h, config, 2000 + k)
        if why:
            kept.append(f"{config!r} ({why})")
    d.admits_other_inputs = kept
    # Unseen configurations reach only the evaluator: the derived harness puts each into the
    # runner's list as it puts a visible one (evaluate.py's configs_of reads the same file).
    unseen = 0
    for k, config in enumerate(hidden or []):
        problems += [f"unseen {k}: {p}" for p in check_purpose(d, config, 3000 + k, "correctness")]
        unseen += 1
    return d, problems, unseen


def hidden_of(unseen_dir, task_dir, n):
    """The first `n` hidden configurations `arenactl unseen generate` sealed for the task."""
    import ast

    if not unseen_dir:
        return []
    rel = os.path.relpath(os.path.realpath(task_dir), os.path.realpath(os.path.join(task_dir, "../../..")))
    f = os.path.join(unseen_dir, rel.replace("/", "__") + ".json")
    if not os.path.isfile(f):
        return []
    with open(f) as fh:
        sealed = json.load(fh)
    return [ast.literal_eval(c["entry"]) for c in sealed["configs"][:n]]


class _Session:
    """What admits.probe asks of measure.py's session, over one configuration."""

    def __init__(self, h, config, seed):
        self.h, self.config, self.seed = h, config, seed
        self.admits, self.warnings = {}, []

    def fresh(self, i, purpose):
        self.seed += 1
        return self.h.make_case(self.config, self.seed, purpose)

    def name(self, i):
        return repr(self.config)


def admits_other_inputs(h, config, seed):
    """The evaluator's probe (admits.py) on this configuration, as its correctness gate runs it
    (two correctness calls): False, or why the evaluator credits no speedup on it (its check
    passes zeros, or the original's outputs on other inputs)."""
    s, kept = _Session(h, config, seed), {}
    for _ in range(2):
        _, want = s.fresh(0, "correctness")
        admits.probe(s, 0, want, kept)
    return s.admits.get(0, False)


def check_purpose(d, config, seed, purpose):
    where = f"{config!r} ({purpose})"
    args, want = d.make_case(config, seed, purpose)
    got = outputs(d, args)
    try:
        d.check(got, want)
    except AssertionError as e:
        return [f"{where}: the task's own kernel fails: {e}"]
    problems = []
    if any(w.startswith("tolerance_admits_zeros") and repr(config) in w for w in d.warnings):
        return []  # the task's own check passes zeros: said as a warning, nothing to fail here
    other_args, _ = d.make_case(config, seed + 1, purpose)
    other = outputs(d, other_args)
    bad = [("zeros", admits.zeros_of(got)[0])]
    if not _equal(other, got):  # an output that does not depend on the seed: the same right answer
        bad.append(("another input's output", other))
    for what, b in bad:
        p = must_fail(d, b, want, what)
        if p:
            problems.append(f"{where}: {p}")
    if isinstance(got, torch.Tensor):
        same = [a for a in args if isinstance(a, torch.Tensor) and a.shape == got.shape and a.dtype == got.dtype]
        if same and not torch.equal(same[0], got):
            p = must_fail(d, same[0].clone(), want, "a copy of an input")
            if p:
                problems.append(f"{where}: {p}")
    return problems


class TooSlow(BaseException):
    """A task over its --budget-s (a BaseException: a runner's `except Exception` lets it by)."""


def _too_slow(signum, frame):
    raise TooSlow()


def main():
    signal.signal(signal.SIGALRM, _too_slow)
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--cases", type=int, default=2, help="visible configurations checked per task")
    ap.add_argument("--budget-s", type=int, default=300, help="seconds a task may take (the interpreter is slow)")
    ap.add_argument("--unseen", help="a directory of `arenactl unseen generate`: its first configurations per task checked too")
    ap.add_argument("--unseen-cases", type=int, default=1)
    ap.add_argument("tasks", nargs="+")
    a = ap.parse_args()
    rows, failed = [], 0
    with OnCpu():
        for t in a.tasks:
            t0 = time.time()
            row = {"task": os.path.basename(t.rstrip("/"))}
            head = open(os.path.join(t, "arena_harness.py")).read(200) if os.path.isfile(os.path.join(t, "arena_harness.py")) else ""
            if not head.startswith(DERIVED_MARKER):
                row.update(status="not_derived", reason="no derived arena_harness.py")
                rows.append(row)
                continue
            signal.alarm(a.budget_s)
            try:
                d, problems, unseen = check_task(t, a.cases, hidden_of(a.unseen, t, a.unseen_cases))
                row.update(
                    unseen_checked=unseen,
                    status="ok" if not problems else "fail",
                    warnings=d.warnings,
                    admits_other_inputs=d.admits_other_inputs,
                    output_args=d.output_args,
                    timed_check="runner" if d.partial else "original",
                    problems=problems,
                )
            except TooSlow:
                row.update(status="cpu_cannot_run", reason=f"over {a.budget_s} s in Triton's interpreter")
            except derived.NotDerivable as e:
                cpu = any(m in str(e) for m in CPU_LIMITS) or own_runner_fails(t)
                row.update(status="cpu_cannot_run" if cpu else "not_derivable", reason=str(e))
            except Exception as e:
                row.update(status="error", reason=f"{type(e).__name__}: {str(e)[:300]}")
            finally:
                signal.alarm(0)
            row["seconds"] = round(time.time() - t0, 1)
            failed += row["status"] == "fail" or row["status"] == "error"
            rows.append(row)
            if not a.json:
                said = row.get("reason") or "; ".join(row.get("problems") or []) or "; ".join(w.split(":")[0] for w in row.get("warnings") or [])
                if row.get("admits_other_inputs"):
                    said += f"  no speedup credited: {', '.join(row['admits_other_inputs'])}"
                print(f"{row['status']:14} {row['task']}  {row['seconds']} s  {said}", flush=True)
    if a.json:
        print(json.dumps(rows, indent=1))
    else:
        counts = {}
        for r in rows:
            counts[r["status"]] = counts.get(r["status"], 0) + 1
        print(", ".join(f"{n} {s}" for s, n in sorted(counts.items())) + f" of {len(rows)} tasks")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
