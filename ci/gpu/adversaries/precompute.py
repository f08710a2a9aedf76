"""Attacks: work that waits on the device for the inputs and computes them before the timed
window (the persistent-kernel hole of docs/trusted-evaluation.md, done with streams that wait
on a value: cuStreamWaitValue32). The captured graph computes nothing; after the capture, for
each call, a side stream sets a sentinel in the call's input slot, waits until the evaluator's
write replaces it, and then runs the kernel into the graph's output. The process is stopped
meanwhile, but the device runs what it was given. The timed replay only waits for that stream.
Expected: the evaluator watches the device while it writes the inputs (gpu_guard.py): the
work shows up as time taken from its watch, on each of the evaluator's tries (its waits,
queued one call after another, run on into later writes of fresh inputs), and the batch fails
(DeviceBusy); where a batch has fewer calls than the watch has tries (a large shape), a later
try can be clean, and then the replay hands back outputs of earlier inputs: wrong outputs.
precompute_every_try.py parks work for every try on purpose."""
import ctypes

import torch

_cu = ctypes.CDLL("libcuda.so.1")
_cu.cuStreamWaitValue32_v2.argtypes = [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_uint32, ctypes.c_uint]
_cu.cuMemsetD32Async.argtypes = [ctypes.c_uint64, ctypes.c_uint32, ctypes.c_size_t, ctypes.c_void_p]
_NOR = 3  # CU_STREAM_WAIT_VALUE_NOR: go on once ~(*addr | 0) != 0, i.e. *addr != 0xffffffff
_c = child()
_side = torch.cuda.Stream()
_calls = []
_last = {}
_capture = _c.capture


def _lazy(f):
    def call(*a, **k):
        if not torch.cuda.is_current_stream_capturing():
            r = f(*a, **k)
            _last["out"] = r
            return r
        # While captured: outputs of the right shapes, nothing computed.
        out = _empty_like(_last.get("out"))
        _calls.append((a, k, out))
        return out

    return call


def _empty_like(r):
    if isinstance(r, torch.Tensor):
        return torch.empty_like(r)
    if isinstance(r, (tuple, list)):
        return type(r)(_empty_like(x) for x in r)
    return r


def _copy_into(out, r):
    if isinstance(out, torch.Tensor):
        out.copy_(r)
    elif isinstance(out, (tuple, list)):
        for o, x in zip(out, r):
            _copy_into(o, x)


def _capture_then_wait(msg):
    _calls.clear()
    reply = _capture(msg)
    if not reply.get("captured"):
        return reply
    s = _side.cuda_stream
    with torch.cuda.stream(_side):
        for a, k, out in _calls:
            last = [t for t in a if isinstance(t, torch.Tensor)][-1]
            addr = (last.data_ptr() + last.numel() * last.element_size() - 4) & ~3
            _cu.cuMemsetD32Async(addr, 0xFFFFFFFF, 1, s)
            _cu.cuStreamWaitValue32_v2(s, addr, 0, _NOR)
            _copy_into(out, _honest(*a, **k))
    report(f"{len(_calls)} calls wait on the device for their inputs")
    return reply


def _replay(msg):
    _side.synchronize()
    return {}


_c.capture = _capture_then_wait
_c.replay = _replay
install(_lazy)
