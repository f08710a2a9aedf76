"""How a kernel process finds what it calls: the kernel's module, loaded from its file (or
only the kernel part of a file that holds the kernel and its tests), and its entry, called
directly or, for a bare `@triton.jit` kernel, launched on the grid each call names.

Used by the kernel process (child.py) and by ci/aka-harness-check.py, so that the CPU check
of a harness loads a kernel exactly as the evaluator's kernel process does.
"""
import importlib.util
import sys
import types

# arena_task::split::RULE_MIN: a line of at least this many `#` alone is the rule between a
# rocmbench file's kernel (above) and its pytest tests (below).
RULE_MIN = 80


def kernel_part(text):
    """What lies above the first rule (all of `text` without one): arena_task::split::kernel_part."""
    out = []
    for line in text.splitlines(keepends=True):
        body = line.rstrip()
        if len(body) >= RULE_MIN and set(body) == {"#"}:
            break
        out.append(line)
    return "".join(out)


def load_module(path, kernel_only=False):
    """The module of the file at `path`, as `kernel_under_test`; `kernel_only`: only its kernel
    part is run (the tests below the rule import what the kernel process does not have). The
    part is a prefix of the file, so that Triton, which reads a kernel's source from the file,
    finds every line where it was."""
    if not kernel_only:
        spec = importlib.util.spec_from_file_location("kernel_under_test", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    with open(path) as f:
        text = kernel_part(f.read())
    module = types.ModuleType("kernel_under_test")
    module.__file__ = path
    sys.modules["kernel_under_test"] = module
    exec(compile(text, path, "exec"), module.__dict__)
    return module


class Launch:
    """ENTRY is a bare `@triton.jit` kernel (LAUNCH in the harness): each call's first argument
    is {"grid": [...], "meta": {constexpr: value}} from the harness's make_inputs, and the
    call is `kernel[grid](*rest, **meta)`."""

    def __init__(self, kernel):
        self.kernel = kernel

    def __call__(self, spec, *args):
        grid = tuple(int(g) for g in spec["grid"])
        return self.kernel[grid](*args, **dict(spec.get("meta") or {}))
