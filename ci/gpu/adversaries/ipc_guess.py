"""Attacks: memory it was not given, through CUDA IPC. The kernel takes the IPC handles of its own
input pools and tries every handle one byte away (each byte up and down) to open some other
allocation of the evaluator's (the other kernel's input pool, say). It reads what it opens and
says on stderr, per handle it opened, which byte it changed, the allocation's size and whether
its bytes are those of one of its own pools (a second mapping of its own) or not.
Expected: nothing of another kernel's opens; whatever does, the kernel gains nothing (it only
reads): no faster than untouched."""
import ctypes

import gpu  # the evaluator's own file beside child.py: its class, patched here for this process

_cu = ctypes.CDLL("libcuda.so.1")


class _Handle(ctypes.Structure):
    _fields_ = [("reserved", ctypes.c_char * 64)]


_cu.cuIpcOpenMemHandle_v2.argtypes = [ctypes.POINTER(ctypes.c_uint64), _Handle, ctypes.c_uint]
_cu.cuMemcpyDtoH_v2.argtypes = [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_size_t]
_cu.cuMemGetAddressRange_v2.argtypes = [ctypes.POINTER(ctypes.c_uint64), ctypes.POINTER(ctypes.c_size_t), ctypes.c_uint64]
_tried = set()


def _head(ptr):
    buf = ctypes.create_string_buffer(256)
    rc = _cu.cuMemcpyDtoH_v2(buf, ptr, 256)
    return bytes(buf.raw) if rc == 0 else None


def _probe(handles, own):
    heads = {_head(p) for p in own}
    opened = []
    for h in handles:
        raw = bytes.fromhex(h)
        for i in range(64):
            for d in (1, 255):
                v = bytearray(raw)
                v[i] = (v[i] + d) % 256
                v = bytes(v)
                if v in _tried or v.hex() in handles:
                    continue
                _tried.add(v)
                p = ctypes.c_uint64()
                if _cu.cuIpcOpenMemHandle_v2(ctypes.byref(p), _Handle.from_buffer_copy(v), 1) != 0 or p.value in own:
                    continue
                base, size = ctypes.c_uint64(), ctypes.c_size_t()
                _cu.cuMemGetAddressRange_v2(ctypes.byref(base), ctypes.byref(size), p.value)
                head = _head(p.value)
                opened.append(f"byte {i}{'+' if d == 1 else '-'}1: {size.value} bytes, {'its own pool' if head in heads else 'NOT its own'}")
    report(f"tried {len(_tried)} handles, opened {len(opened)}: {'; '.join(opened[:12])}")


_setup = gpu.ChildSide.setup
_pending = {}


def _setup_then_probe(self, msg):
    reply = _setup(self, msg)
    _pending["handles"], _pending["side"] = msg["handles"], self
    return reply


def _first_call_probes(f):
    # At the first call after a set-up: the inputs are in the pools by then, so that its own
    # pools and another's can be told apart by what they hold.
    def call(*a, **k):
        if _pending:
            side = _pending.pop("side")
            _probe(_pending.pop("handles"), set(side.pools))
        return f(*a, **k)

    return call


gpu.ChildSide.setup = _setup_then_probe
install(_first_call_probes)
