"""Attacks: a capture hook, by a patch of torch alone. `CUDAGraph.capture_begin` is patched to
move the capture's work onto a side stream forked from the capture, and `capture_end` leaves it
there unjoined, so that the calls of a batch would run side by side.
Expected: a capture with an unjoined fork cannot end: the kernel is timed eagerly, with the
context waited for after each call, and gains nothing."""
import torch

_side = torch.cuda.Stream()
_begin = torch.cuda.CUDAGraph.capture_begin
_state = {"ctx": None}


def _hooked_begin(self, *a, **k):
    r = _begin(self, *a, **k)
    _side.wait_stream(torch.cuda.current_stream())
    ctx = torch.cuda.stream(_side)
    ctx.__enter__()
    _state["ctx"] = ctx
    return r


torch.cuda.CUDAGraph.capture_begin = _hooked_begin
_end = torch.cuda.CUDAGraph.capture_end


def _hooked_end(self, *a, **k):
    ctx, _state["ctx"] = _state["ctx"], None
    if ctx is not None:
        ctx.__exit__(None, None, None)
    return _end(self, *a, **k)


torch.cuda.CUDAGraph.capture_end = _hooked_end


install(lambda f: f)
