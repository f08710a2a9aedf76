"""Attacks: per-call timing, by batching across calls. Every call's inputs are in place before
a timed request, and the kernel can see the whole batch (the request's calls, which it reads by
wrapping the process's own handlers). At a batch's first call it normalizes every call's input
at once, through one strided view over the input pool, and each later call returns its row of
that result: every output is right, and the time per call becomes the throughput of one large
launch. Written for AgentKernelArena's fla_l2norm (x / ||x|| per row, no weights); on other
tasks it is the untouched kernel.
Expected: see docs/trusted-evaluation.md ("What is left"): arena does not catch this yet."""
import torch

import gpu  # the evaluator's own file beside child.py

_c = child()
_state = {"slots": [], "i": 0, "out": None}
_capture, _run = _c.capture, _c.run


def _begin(msg):
    _state["slots"] = [c["slot"] for c in msg.get("calls", []) if "slot" in c]
    _state["i"] = 0
    _state["out"] = None


def _cap(msg):
    _begin(msg)
    return _capture(msg)


def _rn(msg):
    _begin(msg)
    return _run(msg)


_c.capture, _c.run = _cap, _rn


def _batched(f):
    def call(x, *rest, **k):
        st, g = _state, _c.gpu
        i = st["i"]
        st["i"] += 1
        slots = st["slots"]
        if ENTRY != "l2norm_fwd" or len(slots) < 2 or rest or k or x.dim() != 2 or g is None:
            return f(x, *rest, **k)
        if i == 0:
            same_chunk = slots[0] // g.per_chunk == slots[-1] // g.per_chunk
            if same_chunk and all(b - a == 1 for a, b in zip(slots, slots[1:])):
                t, d = x.shape
                step = g.slot_bytes // x.element_size()
                xs = gpu.tensor_at(x.data_ptr(), [len(slots), t, d], [step, x.stride(0), x.stride(1)], x.dtype)
                xf = xs.float()
                st["out"] = (xf * torch.rsqrt((xf * xf).sum(-1, keepdim=True) + 1e-6)).to(x.dtype)
        if st["out"] is None:
            return f(x)
        return st["out"][i]

    return call


install(_batched)
