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
import torch

from driver import CudaError, Driver  # noqa: F401  (kernel processes and tools name them here)
from gpu_errors import DeferredWork, DeviceBusy  # noqa: F401  (named here by tools)
from gpu_guard import Guard
from mappings import Mappings
from samples import Samples

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


def is_dense(t):
    """Whether `t` fills its memory without gaps or overlaps, in some order of its dimensions
    (contiguous, or a transpose of a contiguous tensor: vLLM's conv states, "contiguous along
    dim"), its first element at the lowest address."""
    dims = sorted((st, n) for st, n in zip(t.stride(), t.shape) if n != 1)
    want = 1
    for st, n in dims:
        if st != want:
            return False
        want *= n
    return True


def dense(t):
    """`t` as it goes into a slot: with its own strides where it is dense (a kernel may rely on
    them: the runner made them so), else a contiguous copy."""
    return t if is_dense(t) else t.contiguous()


def _plain(a):
    """An argument that is not a tensor: a JSON value, or an element type by name."""
    if "dtype_value" in a:
        return DTYPES[a["dtype_value"]]
    return a["value"]


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
                _plain(a) if "offset" not in a else tensor_at(base + a["offset"], a["shape"], a["stride"], DTYPES[a["dtype"]])
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
    """In the evaluator: one pool per kernel process, slots, and the outputs opened; the
    device watched while no kernel process may use it, and a batch's outputs sampled when its
    reply arrives (gpu_guard.py, samples.py)."""

    def __init__(self, job):
        perf = job.get("perf", {})
        self.cu = Driver()
        props = torch.cuda.get_device_properties(0)
        self.l2 = int(getattr(props, "L2_cache_size", 0) or 50 << 20)
        self.state = {}  # role -> dict(pools, layout key, slots, slot_bytes, per_chunk, layout, next)
        self.maps = Mappings(self.cu)
        # Each kernel's input pools by their IPC handles: an output may lie in its own call's
        # slot (a view of an input), never in another's or another kernel's pool.
        self.pool_handles = {}
        # Deferred work beyond this (and beyond the batch's own time) is named as such.
        self.deferred_ms = float(perf.get("deferred_limit_ms", 50.0))
        self.guard = Guard(self.cu, float(perf.get("watch_gap_us", 20.0)))
        self.samples = Samples(self, int(perf.get("output_samples", 64)))
        # A watched stretch with a gap between two timer reads longer than this, or that
        # stopped later than `late_stop_us`, was shared with another context's work. Measured
        # on an H100 (docs/measurements.md, "The device watch"): gaps of an idle device and of
        # the evaluator's own copies at most 20 us, one 1-element kernel of another process
        # 296-306 us (the switch of contexts), a kernel running on 2.4 ms (a time slice); stops
        # 8-30 us, and up to 2.2 ms late behind another context's kernel. How late a watch
        # starts is recorded, never judged: 50-230 us with nothing else on the device.
        self.busy_gap_us = float(perf.get("busy_gap_us", 100.0))
        self.late_stop_us = float(perf.get("late_stop_us", 1000.0))
        self.watched = {"stretches": 0, "gap_us": 0.0, "start_us": 0.0, "stop_us": 0.0, "over_us": 0.0}
        # Written before each timed batch: neither kernel's batch finds the other's data (or
        # its own earlier batch's) in L2. Within a batch, input slots rotate over twice L2.
        self._flush = torch.empty(2 * self.l2, dtype=torch.uint8, device="cuda")
        # The byte the next flush writes: a new one each time, so that no line is skipped.
        self._turn = 0

    def flush(self):
        self._turn = (self._turn + 1) & 0xFF
        self.cu.fill(self._flush.data_ptr(), self._turn, self._flush.numel())
        # This stream only: a device-wide synchronize would wait for the watch.
        torch.cuda.current_stream().synchronize()

    def arm(self, kernel):
        """From here until `disarm`, every kernel process is stopped and none may have work
        on the device: the evaluator writes the batch's inputs and flushes L2 meanwhile.

        Lines a kernel made persisting are made normal first (before the watch: the driver may
        wait for the context's kernels to do it), so that the flush evicts them too."""
        self.guard.reset_persisting_l2()
        self.guard.start()

    def disarm(self, kernel, failing=False):
        """Stops the watch; raises DeviceBusy where the device ran work that was not the
        evaluator's meanwhile (not when `failing`: the batch already failed)."""
        w = self.guard.stop()
        m = self.watched
        m["stretches"] += 1
        for k in ("gap_us", "start_us", "stop_us", "over_us"):
            m[k] = round(max(m[k], getattr(w, k)), 1)
        why = w.busy(self.busy_gap_us, self.late_stop_us)
        if why and not failing:
            raise DeviceBusy(
                f"the GPU ran work that was not the evaluator's while {kernel.role}'s inputs were written "
                f"and every kernel process was stopped ({why}): work of a kernel process that outlived "
                "its request, or waited on the device for its inputs"
            )

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
                c = dense(a)
                layout.append({"offset": off, "shape": list(c.shape), "stride": list(c.stride()), "dtype": _name(c.dtype), "bytes": span_bytes(c)})
                off += span_bytes(c)
            elif isinstance(a, torch.dtype):
                # An element type as an argument (vLLM's matmuls take their output's): by name.
                layout.append({"dtype_value": _name(a)})
            else:
                layout.append({"value": a})
        return layout, (off + ALIGN - 1) // ALIGN * ALIGN or ALIGN

    def _ensure(self, kernel, args, n, timeout):
        layout, slot_bytes = self._layout(args)
        # Arguments by value are part of the layout the kernel process reads them from: a
        # batch whose values differ (another configuration's) needs a layout of its own.
        key = repr([(x.get("shape"), x.get("stride"), x.get("dtype"), x.get("value"), x.get("dtype_value")) for x in layout])
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
                self.pool_handles[handles[-1]] = (kernel.role, p)
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
        self.stage(kernel, calls, args_list)
        self.fill(kernel, calls, args_list)
        return calls

    def assign(self, kernel, args_list, timeout, wants=None):
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

    def stage(self, kernel, calls, args_list):
        """What `fill` copies, worked out before the device is watched: each tensor argument
        made dense (which may take a kernel of torch's) and where it goes."""
        st = self.state[kernel.role]
        self._staged = []
        for call, args in zip(calls, args_list):
            base = self._slot_base(st, call["slot"])
            for a, x in zip(args, st["layout"]):
                if isinstance(a, torch.Tensor):
                    c = dense(a)
                    if list(c.stride()) != x["stride"]:
                        # The slot was laid out for another call's strides (the harness made
                        # this call's argument another way): its bytes would land out of order.
                        raise ValueError(f"an argument's strides {list(c.stride())} differ from its slot's {x['stride']}")
                    if c.numel():
                        self._staged.append((base + x["offset"], c, c.numel() * c.element_size()))

    def fill(self, kernel, calls, args_list):
        """Writes each call's arguments into its slot (the kernel process is stopped), by the
        driver's own copies (Driver.copy)."""
        for dst, c, n in self._staged:
            self.cu.copy(dst, c.data_ptr(), n)
        # This stream only: a device-wide synchronize would wait for the watch.
        torch.cuda.current_stream().synchronize()
        self._staged = []

    def _open(self, kernel, d):
        """The device address of the allocation an output names, and whether it is one of
        `kernel`'s own input pools (an output there must stay in its call's slot); an input
        pool of another kernel is refused."""
        h = d["handle"]
        if h in self.pool_handles:
            role, ptr = self.pool_handles[h]
            if role != kernel.role:
                raise ValueError("an output lies in memory of the evaluator's that the kernel was not given")
            return ptr, True
        return self.maps.open(h), False

    def plan(self, kernel, calls, described, rng, output_args, returns=False):
        return self.samples.plan(kernel, calls, described, rng, output_args, returns)

    def probe(self, kernel, plan, reply):
        self.samples.probe(kernel, plan, reply)

    def settle(self, elapsed, plan):
        """The batch's seconds: from sending the request until the evaluator's own read of the
        sampled outputs came back (the probe), less what that read takes on an idle device.

        A process may answer while its kernels still run (its synchronize patched away): the
        read then waits behind them, and that wait is the batch's too. More of it than the
        batch itself took (and than `deferred_limit_ms`) is refused as deferred work."""
        waited_ms = 1000 * (plan["wait_s"] - self.guard.idle_gather_s)
        if waited_ms > max(self.deferred_ms, 1000 * elapsed):
            raise DeferredWork(f"the GPU was still busy {waited_ms:.1f} ms after the kernel answered")
        return max(elapsed - self.guard.idle_gather_s, 1e-9)

    def confirm(self, plan):
        self.samples.confirm(plan)

    def outputs(self, kernel, calls, reply, output_args=None, returns=False):
        """Each call's output: what the kernel process described (its own memory, opened
        here), or, where the kernel writes into its arguments (`output_args`), those
        arguments as they are now in the call's slot of the evaluator's own pool (whatever
        the kernel process says of them is not read); with `returns` as well, each call's
        output is (what it returned, those arguments)."""
        if output_args:
            written = [self.in_slot(kernel, c["slot"], output_args) for c in calls]
            if not returns:
                return written
            return list(zip(self._described(kernel, calls, reply), written))
        return self._described(kernel, calls, reply)

    def _described(self, kernel, calls, reply):
        """What each call returned, as the kernel process described it (checked: described)."""
        items = reply.get("outputs", [])
        if len(items) != len(calls):
            raise ValueError(f"{len(items)} outputs for {len(calls)} calls")
        outs = []
        for item, call in zip(items, calls):
            got = []
            for d in item["items"]:
                if "value" in d:
                    got.append(d["value"])
                    continue
                got.append(self.described(kernel, d, call)[0])
            outs.append(tuple(got) if item["tuple"] else got[0])
        return outs

    def described(self, kernel, d, call):
        """The tensor an output's description names, its first byte's address and its span in
        bytes, checked first: whole numbers, no negative size or stride, inside the memory it
        names, and, in one of the kernel's own input pools, inside the call's own slot."""
        dtype = DTYPES[d["dtype"]]
        offset = d["offset"]
        shape, stride = d["shape"], d["stride"]
        if not all(type(x) is int and x >= 0 for x in [offset, *shape, *stride]) or len(shape) != len(stride):
            raise ValueError("an output's offset, shape and strides must be whole numbers, none negative")
        ptr, pooled = self._open(kernel, d)
        base, size = self.cu.range_of(ptr)
        t = tensor_at(ptr + offset, shape, stride, dtype)
        span = span_bytes(t)
        if offset + span > size:
            raise ValueError("an output lies outside the memory it names")
        if pooled:
            st = self.state[kernel.role]
            lo = self._slot_base(st, call["slot"])
            if not (lo <= ptr + offset and ptr + offset + span <= lo + st["slot_bytes"]):
                raise ValueError("an output lies in an input slot of another call")
        return t, ptr + offset, span

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

