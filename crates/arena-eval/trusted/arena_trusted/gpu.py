"""GPU kernels: inputs in device memory the evaluator owns, shared with one kernel process
through CUDA IPC; outputs in device memory the kernel process owns, opened by the evaluator
the moment the batch is answered and checked there.

Each kernel process gets a pool of its own (allocated with cuMemAlloc, so an IPC handle
shares nothing else), cut into slots; a batch's calls take consecutive slots, each filled
with fresh arguments while the process is stopped, and the slots rotate over at least twice
the L2 cache, so every call reads its inputs from memory, as a kernel in a model would.
The CUDA driver API is called through ctypes; tensors over raw device memory are made with
__cuda_array_interface__.
"""
import bisect
import ctypes
import time

import torch

CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS = 1
ALIGN = 512
# Element types crossing as themselves; others (bfloat16, fp8) cross as an integer type of
# their size and are viewed back.
_CAI = {
    torch.float32: "<f4",
    torch.float64: "<f8",
    torch.float16: "<f2",
    torch.int8: "|i1",
    torch.uint8: "|u1",
    torch.int16: "<i2",
    torch.int32: "<i4",
    torch.int64: "<i8",
    torch.bool: "|b1",
}
_BY_SIZE = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}
DTYPES = {str(d).replace("torch.", ""): d for d in list(_CAI) + [torch.bfloat16]}
for _name in ("float8_e4m3fn", "float8_e5m2"):
    if hasattr(torch, _name):
        DTYPES[_name] = getattr(torch, _name)


class CudaError(Exception):
    pass


class IpcHandle(ctypes.Structure):
    """CUipcMemHandle: 64 opaque bytes, passed by value."""

    _fields_ = [("reserved", ctypes.c_char * 64)]


class Driver:
    def __init__(self):
        self.lib = ctypes.CDLL("libcuda.so.1")
        u64p = ctypes.POINTER(ctypes.c_uint64)
        self.lib.cuIpcOpenMemHandle_v2.argtypes = [u64p, IpcHandle, ctypes.c_uint]
        self.lib.cuIpcGetMemHandle.argtypes = [ctypes.POINTER(IpcHandle), ctypes.c_uint64]
        self.lib.cuMemGetAddressRange_v2.argtypes = [u64p, ctypes.POINTER(ctypes.c_size_t), ctypes.c_uint64]
        self.lib.cuMemAlloc_v2.argtypes = [u64p, ctypes.c_size_t]
        self.lib.cuMemFree_v2.argtypes = [ctypes.c_uint64]
        self.lib.cuIpcCloseMemHandle.argtypes = [ctypes.c_uint64]
        torch.cuda.init()
        torch.zeros(1, device="cuda")  # the primary context, current on this thread

    def check(self, rc, what):
        if rc != 0:
            msg = ctypes.c_char_p()
            self.lib.cuGetErrorString(rc, ctypes.byref(msg))
            raise CudaError(f"{what}: {msg.value.decode() if msg.value else rc}")

    def alloc(self, size):
        p = ctypes.c_uint64()
        self.check(self.lib.cuMemAlloc_v2(ctypes.byref(p), ctypes.c_size_t(size)), "cuMemAlloc")
        return p.value

    def free(self, ptr):
        self.lib.cuMemFree_v2(ctypes.c_uint64(ptr))

    def range_of(self, ptr):
        base, size = ctypes.c_uint64(), ctypes.c_size_t()
        self.check(
            self.lib.cuMemGetAddressRange_v2(ctypes.byref(base), ctypes.byref(size), ctypes.c_uint64(ptr)),
            "cuMemGetAddressRange",
        )
        return base.value, size.value

    def handle(self, base):
        h = IpcHandle()
        self.check(self.lib.cuIpcGetMemHandle(ctypes.byref(h), ctypes.c_uint64(base)), "cuIpcGetMemHandle")
        return bytes(ctypes.string_at(ctypes.addressof(h), 64)).hex()

    def open(self, handle_hex):
        raw = bytes.fromhex(handle_hex)
        if len(raw) != 64:
            raise CudaError("an IPC handle has 64 bytes")
        h = IpcHandle.from_buffer_copy(raw)
        p = ctypes.c_uint64()
        self.check(
            self.lib.cuIpcOpenMemHandle_v2(ctypes.byref(p), h, ctypes.c_uint(CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS)),
            "cuIpcOpenMemHandle",
        )
        return p.value

    def close(self, ptr):
        self.lib.cuIpcCloseMemHandle(ctypes.c_uint64(ptr))


class _Cai:
    def __init__(self, ptr, shape, strides_bytes, typestr):
        self.__cuda_array_interface__ = {
            "shape": tuple(shape),
            "strides": tuple(strides_bytes),
            "typestr": typestr,
            "data": (ptr, False),
            "version": 3,
        }


def tensor_at(ptr, shape, stride, dtype):
    """A tensor over device memory at `ptr` (no copy, not owned)."""
    item = torch.empty((), dtype=dtype).element_size()
    typestr = _CAI.get(dtype)
    base = dtype if typestr else _BY_SIZE[item]
    typestr = typestr or _CAI[base]
    strides = [s * item for s in stride]
    if not shape:
        shape, strides = (1,), (item,)
        t = torch.as_tensor(_Cai(ptr, shape, strides, typestr), device="cuda").reshape(())
    else:
        t = torch.as_tensor(_Cai(ptr, shape, strides, typestr), device="cuda")
    return t if base is dtype else t.view(dtype)


def span_bytes(t):
    """Bytes from a tensor's first element to one past its last."""
    if t.numel() == 0:
        return 0
    last = sum((n - 1) * s for n, s in zip(t.shape, t.stride()))
    return (last + 1) * t.element_size()


def _name(dtype):
    return str(dtype).replace("torch.", "")


class ChildSide:
    """In the kernel process: the pool, the slots' arguments, and the outputs' handles."""

    def __init__(self):
        self.cu = Driver()
        self.slots = {}
        self.pool = None
        # Device memory segments already described: sorted bases, and (size, handle) each.
        self.bases = []
        self.segments = {}

    def _segment(self, ptr):
        """The segment holding `ptr` and its IPC handle (asked of the driver once each)."""
        i = bisect.bisect_right(self.bases, ptr) - 1
        if i >= 0:
            base = self.bases[i]
            size, handle = self.segments[base]
            if ptr < base + size:
                return base, handle
        base, size = self.cu.range_of(ptr)
        handle = self.cu.handle(base)
        bisect.insort(self.bases, base)
        self.segments[base] = (size, handle)
        return base, handle

    def setup(self, msg):
        if self.pool is not None:
            self.cu.close(self.pool)
        self.pool = self.cu.open(msg["handle"])
        self.layout = msg["layout"]
        self.slot_bytes = int(msg["slot_bytes"])
        self.count = int(msg["slots"])
        self.slots = {}
        return {}

    def args(self, slot):
        """The arguments of slot `slot`: views over the pool, made once."""
        if slot not in self.slots:
            if not 0 <= slot < self.count:
                raise IndexError(f"no slot {slot}")
            base = self.pool + slot * self.slot_bytes
            self.slots[slot] = tuple(
                a["value"] if "value" in a else tensor_at(base + a["offset"], a["shape"], a["stride"], DTYPES[a["dtype"]])
                for a in self.layout
            )
        return self.slots[slot]

    def synchronize(self):
        torch.cuda.synchronize()

    def describe(self, result):
        outs = result if isinstance(result, (tuple, list)) else [result]
        desc = []
        for t in outs:
            if not isinstance(t, torch.Tensor):
                desc.append({"value": t if isinstance(t, (int, float, bool)) or t is None else repr(t)})
                continue
            if not t.is_cuda:
                raise TypeError("the kernel returned a tensor that is not on the GPU")
            base, handle = self._segment(t.data_ptr())
            desc.append(
                {
                    "handle": handle,
                    "offset": t.data_ptr() - base,
                    "shape": list(t.shape),
                    "stride": list(t.stride()),
                    "dtype": _name(t.dtype),
                }
            )
        return {"tuple": isinstance(result, (tuple, list)), "items": desc}


class GpuData:
    """In the evaluator: one pool per kernel process, slots, and the outputs opened."""

    def __init__(self, job):
        self.cu = Driver()
        props = torch.cuda.get_device_properties(0)
        self.l2 = int(getattr(props, "L2_cache_size", 0) or 50 << 20)
        self.state = {}  # role -> dict(pool, size, handle, layout key, slots, next)
        self.opened = {}  # handle -> device pointer
        self.pool_handles = {}
        self.probe_ms = float(job.get("perf", {}).get("idle_probe_ms", 2.0))

    def _layout(self, args):
        """Each tensor argument's place in a slot; other arguments by value."""
        layout, off = [], 0
        for a in args:
            if isinstance(a, torch.Tensor):
                if not a.is_cuda:
                    raise TypeError("make_inputs gave a tensor that is not on the GPU")
                off = (off + ALIGN - 1) // ALIGN * ALIGN
                c = a.contiguous()
                layout.append({"offset": off, "shape": list(c.shape), "stride": list(c.stride()), "dtype": _name(c.dtype), "bytes": span_bytes(c)})
                off += span_bytes(c)
            else:
                layout.append({"value": a})
        return layout, (off + ALIGN - 1) // ALIGN * ALIGN or ALIGN

    def _ensure(self, kernel, args, n, timeout):
        layout, slot_bytes = self._layout(args)
        key = repr([(x.get("shape"), x.get("dtype"), "value" in x) for x in layout])
        slots = max(n, -(-2 * self.l2 // slot_bytes), 2)
        st = self.state.get(kernel.role)
        if st and st["key"] == key and st["slots"] >= slots:
            return st
        if st:
            self.cu.free(st["pool"])
        size = slots * slot_bytes
        pool = self.cu.alloc(size)
        handle = self.cu.handle(pool)
        self.pool_handles[handle] = pool
        st = {"pool": pool, "size": size, "key": key, "slots": slots, "slot_bytes": slot_bytes, "layout": layout, "next": 0}
        self.state[kernel.role] = st
        kernel.request(
            {"op": "gpu_setup", "handle": handle, "slots": slots, "slot_bytes": slot_bytes, "layout": layout},
            timeout,
        )
        return st

    def prepare(self, kernel, args_list, wants, timeout):
        st = self._ensure(kernel, args_list[0], len(args_list), timeout)
        calls = []
        for args in args_list:
            k = st["next"] % st["slots"]
            st["next"] += 1
            for a, x in zip(args, st["layout"]):
                if isinstance(a, torch.Tensor):
                    c = a.contiguous()
                    view = tensor_at(st["pool"] + k * st["slot_bytes"] + x["offset"], list(c.shape), list(c.stride()), c.dtype)
                    view.copy_(c)
            calls.append({"slot": k})
        torch.cuda.synchronize()
        return calls

    def _open(self, d):
        if d["handle"] in self.pool_handles:
            return self.pool_handles[d["handle"]]
        if d["handle"] not in self.opened:
            if len(self.opened) > 512:
                for p in self.opened.values():
                    self.cu.close(p)
                self.opened = {}
            self.opened[d["handle"]] = self.cu.open(d["handle"])
        return self.opened[d["handle"]]

    def outputs(self, kernel, calls, reply):
        # Deferred work: a process that answered while its kernels still run keeps the GPU
        # busy; a tiny kernel of ours then waits for it.
        t0 = time.perf_counter()
        torch.ones(1, device="cuda").add_(1)
        torch.cuda.synchronize()
        waited_ms = 1000 * (time.perf_counter() - t0)
        if waited_ms > self.probe_ms:
            raise DeferredWork(f"the GPU was still busy {waited_ms:.1f} ms after the kernel answered")
        outs = []
        for item in reply.get("outputs", []):
            got = []
            for d in item["items"]:
                if "value" in d:
                    got.append(d["value"])
                    continue
                dtype = DTYPES[d["dtype"]]
                ptr = self._open(d)
                base, size = self.cu.range_of(ptr)
                t = tensor_at(ptr + int(d["offset"]), [int(x) for x in d["shape"]], [int(x) for x in d["stride"]], dtype)
                if int(d["offset"]) < 0 or int(d["offset"]) + span_bytes(t) > size:
                    raise ValueError("an output lies outside the memory it names")
                got.append(t)
            outs.append(tuple(got) if item["tuple"] else got[0])
        return outs

    def after(self, kernel):
        kernel.request({"op": "release"}, 60)

    def fingerprint(self, value):
        if isinstance(value, torch.Tensor):
            return repr((tuple(value.shape), float(value.float().sum()), float(value.float().abs().sum())))
        return repr(value)


class DeferredWork(Exception):
    pass
