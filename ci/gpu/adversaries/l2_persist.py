"""Attacks: the evaluator's L2 flush. Before its graphs are captured the kernel sets aside the
most persisting L2 the device allows and puts an access-policy window (hit: persisting) over
its input pool on the capture stream, so its replayed kernels mark the lines of their inputs
persisting. A memset flush does not evict persisting lines, and the next batch's fresh inputs,
written to the same slots, may be found in L2 (a known exploit of flush-based benchmarks).
Expected: the evaluator resets persisting lines before every flush (gpu_guard.py): no faster
than untouched."""
import ctypes

import torch

import gpu  # the evaluator's own file beside child.py

_cu = ctypes.CDLL("libcuda.so.1")


class _Window(ctypes.Structure):
    # CUaccessPolicyWindow
    _fields_ = [
        ("base_ptr", ctypes.c_uint64),
        ("num_bytes", ctypes.c_size_t),
        ("hitRatio", ctypes.c_float),
        ("hitProp", ctypes.c_int),
        ("missProp", ctypes.c_int),
    ]


class _Attr(ctypes.Union):
    _fields_ = [("window", _Window), ("pad", ctypes.c_char * 64)]


_stream = torch.cuda.Stream()
_setup = gpu.ChildSide.setup


def _persist(self, msg):
    reply = _setup(self, msg)
    dev = torch.cuda.current_device()
    props = torch.cuda.get_device_properties(dev)
    limit = int(getattr(props, "persisting_l2_cache_max_size", 0) or (props.L2_cache_size * 3 // 4))
    rc1 = _cu.cuCtxSetLimit(ctypes.c_int(0x06), ctypes.c_size_t(limit))  # CU_LIMIT_PERSISTING_L2_CACHE_SIZE
    span = self.count * self.slot_bytes if len(self.pools) == 1 else self.per_chunk * self.slot_bytes
    a = _Attr()
    a.window = _Window(self.pools[0][0], min(span, 128 << 20), 1.0, 2, 1)  # hit persisting, miss streaming
    rc2 = _cu.cuStreamSetAttribute(ctypes.c_void_p(_stream.cuda_stream), ctypes.c_int(1), ctypes.byref(a))
    torch.cuda.graph.default_capture_stream = _stream
    report(f"persisting L2 {limit} bytes (rc {rc1}), window over {min(span, 128 << 20)} bytes of inputs (rc {rc2})")
    return reply


gpu.ChildSide.setup = _persist
install(lambda f: f)
