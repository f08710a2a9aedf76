"""What a task's runner does with a kernel's output before it compares it, recorded so that
the evaluator can do the same to another kernel's output (derived.py).

While a runner checks the task's original kernel in the evaluator, a torch function mode
follows every tensor made from the kernel's outputs (its return value, or the arguments it
writes into): `.float().cpu()`, a slice of a paged cache, a reshape. Where such a tensor
reaches a comparison (`torch.allclose`, `torch.equal`, `torch.testing.assert_close`, or a
tensor's truth value), the comparison is kept as an expression over the outputs, everything
else in it (the reference the runner computed from the inputs) kept as a value. A candidate's
outputs then go through the same expressions: the runner's own transformations, tolerance and
reference, with the candidate's outputs in place of the original's.

Only the evaluator runs this; the runner is the task's own file, never the agent's.
"""
import torch
from torch.overrides import TorchFunctionMode

# Comparisons whose answer the check needs: each must hold for a candidate's outputs.
_COMPARE = {torch.allclose, torch.Tensor.allclose, torch.equal, torch.Tensor.equal}


class Root:
    """A kernel output: ("ret",) its return value, ("ret", i) the i-th of a returned tuple,
    ("arg", j) argument j as the kernel left it."""

    def __init__(self, key):
        self.key = key


class Op:
    """`func(*args, **kwargs)` where some arguments are nodes; `index` picks an item of a
    tuple result; `inplace`: func changes its first argument (replayed on a copy)."""

    def __init__(self, func, args, kwargs, index=None, inplace=False):
        self.func, self.args, self.kwargs, self.index, self.inplace = func, args, kwargs, index, inplace


class Compare:
    """A comparison that held for the original; `expect` is the truth value it must have
    (a tensor's truth value tested by the runner: what it was for the original)."""

    def __init__(self, func, args, kwargs, expect=True):
        self.func, self.args, self.kwargs, self.expect = func, args, kwargs, expect


def _inplace(func):
    name = getattr(func, "__name__", "")
    return name == "__setitem__" or (name.endswith("_") and not name.startswith("_"))


class Tracker(TorchFunctionMode):
    """Follows tensors made from the roots while it is entered; `paused` while the original
    kernel itself runs (its internals are not the runner's)."""

    def __init__(self):
        super().__init__()
        self.nodes = {}  # id(tensor) -> (node, tensor): the tensor kept so that its id stays its own
        self.compares = []
        self.paused = False
        self.followed_out = []  # where an output left torch (`.item()`, `.tolist()`): not followed

    def root(self, tensor, key):
        self.nodes[id(tensor)] = (Root(key), tensor)

    def node(self, x):
        hit = self.nodes.get(id(x))
        return hit[0] if hit is not None and hit[1] is x else None

    def template(self, x):
        """`x` with every followed tensor replaced by its node (containers walked)."""
        if isinstance(x, torch.Tensor):
            n = self.node(x)
            return n if n is not None else x
        if isinstance(x, (list, tuple)):
            return type(x)(self.template(v) for v in x)
        if isinstance(x, dict):
            return {k: self.template(v) for k, v in x.items()}
        return x

    def followed(self, x):
        if isinstance(x, torch.Tensor):
            return self.node(x) is not None
        if isinstance(x, (list, tuple)):
            return any(self.followed(v) for v in x)
        if isinstance(x, dict):
            return any(self.followed(v) for v in x.values())
        return False

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if self.paused or not (self.followed(args) or self.followed(kwargs)):
            return func(*args, **kwargs)
        if func in _COMPARE:
            self.compares.append(Compare(func, self.template(args), self.template(kwargs)))
            return True  # the original's answer is not what is recorded: every comparison is
        if func is torch.Tensor.__bool__:
            value = func(*args, **kwargs)
            self.compares.append(Compare(func, self.template(args), {}, expect=value))
            return value
        if getattr(func, "__name__", "") in ("item", "tolist", "__index__", "__int__", "__float__"):
            # The value leaves torch: what the runner does with it is not followed. The
            # outputs it came from are named, so that one compared only this way is refused.
            self.followed_out.append((getattr(func, "__name__", "?"), _roots_in(self.template(args))))
            return func(*args, **kwargs)
        inplace = _inplace(func) and bool(args) and isinstance(args[0], torch.Tensor)
        before = None
        if inplace and self.node(args[0]) is None:
            before = args[0].clone()  # an untracked tensor a followed one is written into
        targs, tkw = self.template(args), self.template(kwargs)
        if before is not None:
            targs = (before,) + tuple(targs[1:])
        out = func(*args, **kwargs)
        if inplace:
            self.nodes[id(args[0])] = (Op(func, targs, tkw, inplace=True), args[0])
            return out
        self._register(out, lambda index: Op(func, targs, tkw, index))
        return out

    def _register(self, out, make):
        if isinstance(out, torch.Tensor):
            self.nodes[id(out)] = (make(None), out)
        elif isinstance(out, (tuple, list)):
            for i, v in enumerate(out):
                if isinstance(v, torch.Tensor):
                    self.nodes[id(v)] = (make(i), v)

    def assert_close(self, original):
        """torch.testing.assert_close as the runner calls it: recorded where it compares a
        followed tensor (not run: the original's answer is not what is recorded)."""

        def assert_close(*args, **kwargs):
            if self.paused or not (self.followed(args) or self.followed(kwargs)):
                return original(*args, **kwargs)
            self.compares.append(Compare(original, self.template(args), self.template(kwargs)))

        return assert_close


def replay(compares, roots):
    """Each comparison again with the outputs `roots` ({key: tensor}) in place of the
    original's; AssertionError names the first that does not hold."""
    for k, c in enumerate(compares):
        cache = {}
        args = _value(c.args, roots, cache)
        kwargs = _value(c.kwargs, roots, cache)
        if c.func is torch.testing.assert_close or getattr(c.func, "__name__", "") == "assert_close":
            c.func(*args, **kwargs)  # raises AssertionError
            continue
        got = c.func(*args, **kwargs)
        if bool(got) != c.expect:
            what = _describe(c, kwargs)
            raise AssertionError(f"the task's comparison {k + 1} ({what}) does not hold")


def _describe(c, kwargs):
    name = getattr(c.func, "__name__", "comparison")
    tol = ", ".join(f"{k}={v}" for k, v in kwargs.items() if k in ("atol", "rtol"))
    return f"{name}{' ' + tol if tol else ''}"


def _value(t, roots, cache):
    if isinstance(t, Root):
        if t.key not in roots:
            raise AssertionError(f"the kernel gave no output {t.key!r}")
        return roots[t.key]
    if isinstance(t, Op):
        if id(t) not in cache:
            args = _value(t.args, roots, cache)
            kwargs = _value(t.kwargs, roots, cache)
            if t.inplace:
                # A copy: an output (or a value kept) is never changed by its replay.
                first = args[0].clone()
                t.func(first, *args[1:], **kwargs)
                cache[id(t)] = first
            else:
                out = t.func(*args, **kwargs)
                cache[id(t)] = out if t.index is None else out[t.index]
        return cache[id(t)]
    if isinstance(t, (list, tuple)):
        return type(t)(_value(v, roots, cache) for v in t)
    if isinstance(t, dict):
        return {k: _value(v, roots, cache) for k, v in t.items()}
    return t


def _leaves(t):
    """Every output (Root) and every value tensor an expression holds, through its ops and
    containers."""
    if isinstance(t, (Root, torch.Tensor)):
        yield t
    elif isinstance(t, Op):
        yield from _leaves(t.args)
        yield from _leaves(t.kwargs)
    elif isinstance(t, (list, tuple)):
        for v in t:
            yield from _leaves(v)
    elif isinstance(t, dict):
        for v in t.values():
            yield from _leaves(v)


def _roots_in(t):
    return {x.key for x in _leaves(t) if isinstance(x, Root)}


def constants(compares):
    """The values the comparisons hold that are not the kernel's (the reference, mostly):
    what tells one input's expected output from another's."""
    return [x for c in compares for x in _leaves((c.args, c.kwargs)) if isinstance(x, torch.Tensor)]


def roots_of(compares):
    """The output keys the comparisons read."""
    keys = set()
    for c in compares:
        keys |= _roots_in((c.args, c.kwargs))
    return keys


# Ops that keep every element of a tensor (a type, a device, a layout): an output that reaches
# a comparison only through these is compared whole.
_WHOLE = {
    "float", "double", "half", "bfloat16", "to", "cpu", "cuda", "contiguous", "clone", "detach",
    "view", "reshape", "flatten", "view_as", "reshape_as", "squeeze", "unsqueeze", "permute",
    "transpose", "t", "type", "numpy",
}

# torch.testing.assert_close's defaults per dtype (rtol, atol), where the runner gives none.
_ASSERT_CLOSE = {torch.float16: (1e-3, 1e-5), torch.bfloat16: (1.6e-2, 1e-5), torch.float32: (1.3e-6, 1e-5)}


def tolerances(compares):
    """Per output key: the (atol, rtol) the runner compares it with ((0, 0) for torch.equal),
    the loosest where it is compared several times."""
    out = {}
    for c in compares:
        name = getattr(c.func, "__name__", "")
        if name == "allclose":
            params = inspect_params(c, ("rtol", "atol"), (1e-5, 1e-8))
            tol = (params["atol"], params["rtol"])
        elif name == "equal":
            tol = (0.0, 0.0)
        elif name == "assert_close":
            rtol, atol = _ASSERT_CLOSE.get(_dtype_of(c.args), (0.0, 0.0))
            tol = (float(c.kwargs.get("atol", atol) or 0.0), float(c.kwargs.get("rtol", rtol) or 0.0))
        else:
            continue
        for key in roots_of([c]):
            old = out.get(key)
            out[key] = tol if old is None else (max(old[0], tol[0]), max(old[1], tol[1]))
    return out


def inspect_params(c, names, defaults):
    """allclose(a, b, rtol, atol) as called: positional or keyword."""
    got = dict(zip(names, defaults))
    for name, value in zip(names, list(c.args)[2:]):
        got[name] = value
    for name in names:
        if name in c.kwargs:
            got[name] = c.kwargs[name]
    return {k: float(v) for k, v in got.items()}


def _dtype_of(args):
    for a in args:
        if isinstance(a, torch.Tensor):
            return a.dtype
    return None


# Ops that pick elements without changing them: an argument the kernel writes, compared through
# these, is compared element for element (both kernels start from the same copy of it).
_SELECT = {"__getitem__", "select", "narrow", "index_select", "gather", "masked_select", "take", "diagonal"}


def partly_compared(compares, select_ok=False):
    """Output keys the runner compares only in part or through arithmetic (a slice, a sum, a
    difference tested for its truth value) rather than whole, or not with a tolerance;
    `select_ok`: a selection of elements counts as whole (arguments written)."""
    whole, partial = set(), set()
    allowed = _WHOLE | _SELECT if select_ok else _WHOLE

    def walk(t, kept):
        if isinstance(t, Root):
            (whole if kept else partial).add(t.key)
        elif isinstance(t, Op):
            keep = kept and getattr(t.func, "__name__", "") in allowed and t.index is None and not t.inplace
            walk(t.args, keep)
            walk(t.kwargs, keep)
        elif isinstance(t, (list, tuple)):
            for v in t:
                walk(v, kept)
        elif isinstance(t, dict):
            for v in t.values():
                walk(v, kept)

    for c in compares:
        tolerant = getattr(c.func, "__name__", "") in ("allclose", "equal", "assert_close")
        walk(c.args, tolerant)
        walk(c.kwargs, tolerant)
    return partial
