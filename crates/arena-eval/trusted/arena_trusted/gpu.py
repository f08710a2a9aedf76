"""GPU kernels: inputs in device memory the evaluator owns, shared with one kernel process
through CUDA IPC; outputs in device memory the kernel process owns, opened by the evaluator
the moment the batch is answered and checked there (or, for a kernel that writes into its
arguments, OUTPUT_ARGS, read from the call's own slot).

Each kernel process gets a pool of its own (allocated with cuMemAlloc, so an IPC handle
shares nothing else; in chunks of at most CHUNK bytes, each its own allocation and handle),
cut into slots; a batch's calls take consecutive slots, each filled with fresh arguments
while the process is stopped, and the slots rotate over at least twice the L2 cache, so
every call reads its inputs from memory, as a kernel in a model would. A batch holds at most
POOL_MAX bytes of inputs (and a share of the free memory): large shapes get fewer calls.
The CUDA driver API is called through ctypes; tensors over raw device memory are made with
__cuda_array_interface__.
"""
import ctypes
import time

import torch

from mappings import Mappings

CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS = 1
ALIGN = 512
CHUNK = 1 << 30
POOL_MAX = 4 << 30
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
        self.pools = []
        # Allocations already described: base -> (size, handle).
        self.segments = {}

    def _segment(self, ptr):
        """The allocation holding `ptr` and its IPC handle. The handle is asked of the driver
        once per allocation: the range is asked every time (cheap), so memory freed and
        allocated again at the same address gets a handle of its own."""
        base, size = self.cu.range_of(ptr)
        known = self.segments.get(base)
        if known is None or known[0] != size:
            known = (size, self.cu.handle(base))
            self.segments[base] = known
        return base, known[1]

    def setup(self, msg):
        for p in self.pools:
            self.cu.close(p)
        self.pools = []
        for h in msg["handles"]:
            self.pools.append(self.cu.open(h))
        self.layout = msg["layout"]
        self.slot_bytes = int(msg["slot_bytes"])
        self.per_chunk = int(msg["per_chunk"])
        self.count = int(msg["slots"])
        self.slots = {}
        return {}

    def args(self, slot):
        """The arguments of slot `slot`: views over the pool, made once."""
        if slot not in self.slots:
            if not 0 <= slot < self.count:
                raise IndexError(f"no slot {slot}")
            chunk, k = divmod(slot, self.per_chunk)
            base = self.pools[chunk] + k * self.slot_bytes
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
        self.state = {}  # role -> dict(pools, layout key, slots, slot_bytes, per_chunk, layout, next)
        self.maps = Mappings(self.cu)
        self.pool_handles = {}
        # Deferred work beyond this (and beyond the batch's own time) is named as such.
        self.deferred_ms = float(job.get("perf", {}).get("deferred_limit_ms", 50.0))
        # The probe's first launches load its kernels (lazy module loading): not a wait.
        for _ in range(3):
            self._probe()
        self.idle_ms = sorted(self._probe() for _ in range(5))[2]
        # Written before each timed batch: neither kernel's batch finds the other's data (or
        # its own earlier batch's) in L2. Within a batch, input slots rotate over twice L2.
        self._flush = torch.empty(2 * self.l2, dtype=torch.uint8, device="cuda")

    def flush(self):
        self._flush.fill_(len(self.state) & 0xFF)
        torch.cuda.synchronize()

    def _probe(self):
        """Milliseconds a tiny kernel of ours takes to run and finish."""
        t0 = time.perf_counter()
        torch.ones(1, device="cuda").add_(1)
        torch.cuda.synchronize()
        return 1000 * (time.perf_counter() - t0)

    def calls_cap(self, args):
        """The most calls a batch on these arguments may have: their slots stay under
        POOL_MAX bytes and a tenth of the free memory (the evaluator also holds each call's
        inputs and reference, and the kernel process its outputs)."""
        _, slot_bytes = self._layout(args)
        free, _ = torch.cuda.mem_get_info()
        return max(1, min(POOL_MAX, free // 10) // slot_bytes)

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
        # Arguments by value are part of the layout the kernel process reads them from: a
        # batch whose values differ (another configuration's) needs a layout of its own.
        key = repr([(x.get("shape"), x.get("dtype"), x.get("value")) for x in layout])
        slots = max(n, -(-2 * self.l2 // slot_bytes), 2)
        st = self.state.get(kernel.role)
        if st and st["key"] == key and st["slots"] >= slots:
            return st
        if st:
            self.forget(kernel)
        per_chunk = max(1, CHUNK // slot_bytes)
        pools, handles, left = [], [], slots
        try:
            while left > 0:
                k = min(left, per_chunk)
                p = self.cu.alloc(k * slot_bytes)
                pools.append(p)
                handles.append(self.cu.handle(p))
                self.pool_handles[handles[-1]] = p
                left -= k
        except BaseException:
            # A configuration too large for the device: what was allocated for it goes back,
            # and nothing names it (the next configuration allocates afresh).
            self._free(pools, handles)
            raise
        st = {"pools": pools, "handles": handles, "key": key, "slots": slots, "slot_bytes": slot_bytes, "per_chunk": per_chunk, "layout": layout, "next": 0}
        self.state[kernel.role] = st
        kernel.request(
            {"op": "gpu_setup", "handles": handles, "slots": slots, "slot_bytes": slot_bytes, "per_chunk": per_chunk, "layout": layout},
            timeout,
        )
        return st

    def forget(self, kernel):
        """Frees `kernel`'s input pools (forgotten first, so that a failure while freeing
        never leaves freed memory named), and torch's cached blocks."""
        st = self.state.pop(kernel.role, None)
        if st:
            self._free(st["pools"], st["handles"])
        torch.cuda.empty_cache()

    def end_session(self):
        """The kernel processes of an evaluation (or of a performance session) are gone (a
        warm evaluator's next evaluation, or the next session, gets new ones): their input
        pools and the mappings of their outputs go too, so the next starts as the first did."""
        for st in self.state.values():
            self._free(st["pools"], st["handles"])
        self.state = {}
        self.maps.close_all()
        torch.cuda.empty_cache()

    def _free(self, pools, handles):
        # A freed pool's handle must not map to its address any more: the address may come
        # back as another allocation (a reference output), and a kernel handing the old
        # handle back as its output would have the evaluator read that instead.
        for h in handles:
            self.pool_handles.pop(h, None)
        for p in pools:
            self.cu.free(p)

    def prepare(self, kernel, args_list, wants, timeout):
        calls = self.assign(kernel, args_list, timeout)
        self.fill(kernel, calls, args_list)
        return calls

    def assign(self, kernel, args_list, timeout):
        """The slots of a batch's calls, their inputs not yet written (a graph is captured
        over them first, so that nothing the kernel does while capturing can read them)."""
        st = self._ensure(kernel, args_list[0], len(args_list), timeout)
        calls = []
        for _ in args_list:
            calls.append({"slot": st["next"] % st["slots"]})
            st["next"] += 1
        return calls

    @staticmethod
    def _slot_base(st, slot):
        """Where slot `slot` of a kernel's pools starts (as ChildSide.args finds it)."""
        chunk, j = divmod(slot, st["per_chunk"])
        return st["pools"][chunk] + j * st["slot_bytes"]

    def fill(self, kernel, calls, args_list):
        """Writes each call's arguments into its slot (the kernel process is stopped)."""
        st = self.state[kernel.role]
        for call, args in zip(calls, args_list):
            base = self._slot_base(st, call["slot"])
            for a, x in zip(args, st["layout"]):
                if isinstance(a, torch.Tensor):
                    c = a.contiguous()
                    view = tensor_at(base + x["offset"], list(c.shape), list(c.stride()), c.dtype)
                    view.copy_(c)
        torch.cuda.synchronize()

    def _open(self, d):
        if d["handle"] in self.pool_handles:
            return self.pool_handles[d["handle"]]
        return self.maps.open(d["handle"])

    def settle(self, elapsed):
        """Seconds the GPU stayed busy after the kernel process answered, added to the batch.

        A process may answer while its kernels still run (its synchronize patched away): a
        tiny kernel of ours then waits behind them, and that wait is the batch's too. More
        of it than the batch itself took (and than `deferred_limit_ms`) is refused as
        deferred work. The wait of an idle GPU, measured at the start, is not counted."""
        waited_ms = self._probe()
        extra_ms = max(0.0, waited_ms - self.idle_ms)
        if extra_ms > max(self.deferred_ms, 1000 * elapsed):
            raise DeferredWork(f"the GPU was still busy {waited_ms:.1f} ms after the kernel answered")
        return extra_ms / 1000

    def outputs(self, kernel, calls, reply, output_args=None):
        """Each call's output: what the kernel process described (its own memory, opened
        here), or, where the kernel writes into its arguments (`output_args`), those
        arguments as they are now in the call's slot of the evaluator's own pool (whatever
        the kernel process says is not read)."""
        if output_args:
            return [self.in_slot(kernel, c["slot"], output_args) for c in calls]
        self.maps.begin_batch()
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

    def in_slot(self, kernel, slot, output_args):
        """The arguments `output_args` of slot `slot`, viewed in the evaluator's pool: one
        tensor, or a tuple where several are named."""
        st = self.state[kernel.role]
        base = self._slot_base(st, slot)
        got = []
        for i in output_args:  # tensors of the call (Harness.check_output_args)
            x = st["layout"][i]
            got.append(tensor_at(base + x["offset"], x["shape"], x["stride"], DTYPES[x["dtype"]]))
        return got[0] if len(got) == 1 else tuple(got)

    def after(self, kernel, graph=False):
        kernel.request({"op": "release"}, 60)
        if graph:
            # A graph's outputs live in a memory pool of its own, new for every batch: their
            # mappings are of no use to the next batch, and kept they would hold the memory.
            self.maps.close_all()

    def fingerprint(self, value):
        if isinstance(value, torch.Tensor):
            return repr((tuple(value.shape), float(value.float().sum()), float(value.float().abs().sum())))
        return repr(value)


class DeferredWork(Exception):
    pass
