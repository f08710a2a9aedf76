"""Attacks: calls run side by side through events, by a patch of torch alone. A call's work is
forked onto a side stream by an event recorded on the current one; its own event, recorded on
the side stream when its work is queued, is waited for only when a capture ends or the process
synchronizes (torch's `CUDAGraph.capture_end` and `torch.cuda.synchronize`, patched). Every
output is computed honestly.
Expected: gains nothing (order.py: each call a graph of its own, chained; eagerly, the context
waited for after each call)."""
import torch

_sides = [torch.cuda.Stream() for _ in range(3)]
_state = {"i": 0, "done": []}
_capture_end = torch.cuda.CUDAGraph.capture_end
_synchronize = torch.cuda.synchronize


def _join():
    cur = torch.cuda.current_stream()
    for ev in _state["done"]:
        cur.wait_event(ev)
    _state["done"] = []


def _end(self, *a, **k):
    _join()
    return _capture_end(self, *a, **k)


def _sync(*a, **k):
    _join()
    return _synchronize(*a, **k)


torch.cuda.CUDAGraph.capture_end = _end
torch.cuda.synchronize = _sync


def _fork(f):
    def call(*a, **k):
        side = _sides[_state["i"] % len(_sides)]
        _state["i"] += 1
        start = torch.cuda.Event()
        start.record(torch.cuda.current_stream())
        side.wait_event(start)
        with torch.cuda.stream(side):
            r = f(*a, **k)
            done = torch.cuda.Event()
            done.record(side)
        _state["done"].append(done)
        return r

    return call


install(_fork)
