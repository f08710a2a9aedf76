"""GPU kernels: inputs in device memory the evaluator owns, shared with one kernel process
by file descriptor; outputs in device memory the kernel process owns, sent the same way and
mapped by the evaluator the moment the batch is answered and checked there (or, for a kernel
that writes into its arguments, OUTPUT_ARGS, read from the call's own slot). driver.py says
why no memory is shared by IPC handle.

Each kernel process gets a pool of its own (the virtual memory API's, so its descriptor
shares nothing else; in chunks of at most CHUNK bytes, each its own allocation),
cut into slots; a batch's calls take consecutive slots, each filled with fresh arguments
while the process is stopped, and the slots rotate over at least twice the L2 cache, so
every call reads its inputs from memory, as a kernel in a model would. A batch holds at most
POOL_MAX bytes of inputs (and a share of the free memory): large shapes get fewer calls, and
a pool larger than that is the only one on the device while its kernel's batches run. The
kernel process's side is gpu_child.py. The CUDA driver API is called through ctypes;
tensors over raw device memory are made with __cuda_array_interface__.
"""
import os

import torch

from driver import CudaError, Driver  # noqa: F401  (kernel processes and tools name them here)
from gpu_errors import DeviceBusy
from gpu_guard import Guard
from gpu_child import ChildSide  # noqa: F401  (attacks and tools name it here)
from mappings import Mappings
from order_check import LOG_BYTES, OrderCheck
from samples import Samples
from timing import L2Flush
from tensors import DTYPES, _name, _plain, dense, is_dense, layout_span, span_bytes, tensor_at  # noqa: F401  (tools name them here)

ALIGN = 512
CHUNK = 1 << 30
POOL_MAX = 4 << 30


class GpuData:
    """In the evaluator: one pool per kernel process, slots, and the outputs opened; the
    device watched while no kernel process may use it, and a batch's outputs sampled when its
    reply arrives (gpu_guard.py, samples.py)."""

    # `stage` and `fill` write a batch's inputs: a busy watch's try can write them afresh.
    rewrites_inputs = True
    # Nothing a kernel process is given depends on a call's reference (its slot and outputs'
    # sizes come from the inputs and the capture): a timed batch may check a sample of its
    # calls (measure.py's checked()).
    checks_a_sample = True

    def __init__(self, job):
        perf = job["perf"]  # perf_settings.PerfSettings
        self.cu = Driver()
        props = torch.cuda.get_device_properties(0)
        self.l2 = int(getattr(props, "L2_cache_size", 0) or 50 << 20)
        self.state = {}  # role -> dict(pools, layout key, slots, slot_bytes, per_chunk, layout, next)
        self.maps = Mappings(self.cu)
        # How each kernel's outputs were named (an input pool, chunks sent by descriptor, or
        # a legacy handle), for the record: a legacy handle from the original would say that
        # honest memory was exported where another process could guess it (driver.py).
        self.named = {}
        # Each chunk of a kernel's output memory is a descriptor kept until that kernel's
        # mappings are closed (mappings.LIMIT per kernel): more than a default of 1024 open.
        import resource

        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        want = 1 << 16 if hard == resource.RLIM_INFINITY else min(hard, 1 << 16)
        if soft != resource.RLIM_INFINITY and soft < want:
            resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
        self.guard = Guard(self.cu, perf.watch_gap_us)
        self.samples = Samples(self, perf.output_samples)
        # Whether a timed batch's calls ran one after another (order_check.py).
        self.order = OrderCheck(self)
        # A watched stretch with a gap between two timer reads longer than this, or that
        # stopped later than `late_stop_us`, was shared with another context's work. Measured
        # on an H100 (docs/benchmarks.md, "The device watch"): gaps of an idle device and of
        # the evaluator's own copies at most 20 us, one 1-element kernel of another process
        # 296-306 us (the switch of contexts), a kernel running on 2.4 ms (a time slice); stops
        # 8-30 us, and up to 2.2 ms late behind another context's kernel. How late a watch
        # starts is recorded, never judged: 50-230 us with nothing else on the device.
        self.busy_gap_us = perf.busy_gap_us
        self.late_stop_us = perf.late_stop_us
        self.watched = {"stretches": 0, "gap_us": 0.0, "start_us": 0.0, "stop_us": 0.0, "over_us": 0.0}
        # Written before each timed batch (timing.py, where the rest of the timed window is).
        self.flush = L2Flush(self.cu, self.l2)

    def arm(self, kernel):
        """From here until `disarm`, every kernel process is stopped and none may have work
        on the device: the evaluator writes the batch's inputs and flushes L2 meanwhile.

        Lines a kernel made persisting are made normal first (before the watch: the driver may
        wait for the context's kernels to do it), so that the flush evicts them too."""
        self.guard.reset_persisting_l2()
        self.guard.start()

    def disarm(self, kernel, failing=False, last=True):
        """Stops the watch. True where the device ran only the evaluator's work meanwhile.
        Otherwise (not when `failing`: the batch already failed) False while this is not the
        `last` try of the batch, and DeviceBusy on the last.

        Why more than one try: one watched window in about 550 of an untouched pair's once
        read busy (docs/benchmarks.md), work that was neither kernel's. The caller
        writes fresh inputs for every try and times only after a clean one, so a kernel
        process that works while stopped gains nothing from the tries it is seen in (their
        inputs are never timed nor its outputs of them checked as right), and is seen in
        every try while it keeps working (DeviceBusy); a one-off of the driver's costs a try."""
        w = self.guard.stop()
        m = self.watched
        m["stretches"] += 1
        for k in ("gap_us", "start_us", "stop_us", "over_us"):
            m[k] = round(max(m[k], getattr(w, k)), 1)
        why = w.busy(self.busy_gap_us, self.late_stop_us)
        if not why or failing:
            return True
        if not last:
            m["redone"] = m.get("redone", 0) + 1
            m["redone_why"] = why
            return False
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
        # One slot where it alone spans twice L2 (KernelBench's level 1 has 4-16 GiB inputs).
        slots = max(n, -(-2 * self.l2 // slot_bytes), 1)
        st = self.state.get(kernel.role)
        if st and st["key"] == key and st["slots"] >= slots:
            return st
        if st:
            self.forget(kernel)
        if slots * slot_bytes > POOL_MAX:
            self._make_room(kernel, timeout)
        per_chunk = max(1, CHUNK // slot_bytes)
        pools, sizes, left = [], [], slots
        try:
            while left > 0:
                k = min(left, per_chunk)
                p, size = self.cu.alloc_shared(k * slot_bytes)
                pools.append(p)
                sizes.append(size)
                left -= k
        except BaseException as e:
            # A configuration too large for the device: what was allocated for it goes back
            # (the next configuration allocates afresh).
            self._free(pools)
            if isinstance(e, CudaError) and "out of memory" in str(e).lower():
                free, total = torch.cuda.mem_get_info()
                raise CudaError(
                    f"out of memory: {slots} input slot(s) of {slot_bytes / 2**30:.2f} GiB for {kernel.role}'s calls, "
                    f"with {free / 2**30:.2f} GiB of the device's {total / 2**30:.2f} GiB free"
                ) from None
            raise
        try:
            # The log arena's stamps write into (order.py): the evaluator's memory, read by it.
            log, _ = self.cu.alloc_shared(LOG_BYTES)
        except BaseException:
            self._free(pools)
            raise
        st = {"pools": pools, "sizes": sizes, "key": key, "slots": slots, "slot_bytes": slot_bytes, "per_chunk": per_chunk, "layout": layout, "next": 0, "kernel": kernel, "log": log}
        self.state[kernel.role] = st
        # Each pool goes to this kernel's process alone, by descriptor: no other process can
        # name it (driver.py); the log last.
        fds = [self.cu.export_at(p) for p in pools] + [self.cu.export_at(log)]
        try:
            kernel.give(fds)
        finally:
            for fd in fds:
                os.close(fd)
        kernel.request(
            {"op": "gpu_setup", "pools": sizes, "log": LOG_BYTES, "slots": slots, "slot_bytes": slot_bytes, "per_chunk": per_chunk, "layout": layout},
            timeout,
        )
        return st

    def _make_room(self, kernel, timeout):
        """Before a pool larger than POOL_MAX: every other kernel's pool goes, its process told
        to drop its mappings and torch's cache, and the evaluator's cache too. Two such pools
        on the device at once (one per kernel, with the evaluator's own copy of the inputs)
        would take three times the inputs where KernelBench's own harness takes one; a case
        this large costs a pool a batch instead (docs/benchmarks.md)."""
        for role in [r for r in self.state if r != kernel.role]:
            self.evict(self.state[role]["kernel"], timeout)
        torch.cuda.empty_cache()

    def evict(self, kernel, timeout):
        """Frees `kernel`'s pools and what the evaluator mapped of its outputs, once its
        process has dropped its own mappings of them (a pool's memory is the device's again
        only when no process maps it). A process that does not answer keeps what it maps:
        that only costs the next allocation its room, which then fails as the evaluation's
        out of memory (named as such), never as the other kernel's fault."""
        from kernel import KernelFailed  # the evaluator's side only: kernel processes import gpu too

        st = self.state.pop(kernel.role, None)
        if st is None:
            return
        self.maps.close(kernel.role)
        kernel.drop_shared()
        try:
            kernel.request({"op": "gpu_drop"}, timeout)
        except KernelFailed:
            pass
        self._free(st["pools"] + [st["log"]])

    def dropped_inputs(self, kernel):
        """The evaluator no longer holds its own copies of a batch's inputs (they are in the
        slots): for a large case their memory goes back to the device, for the kernel's
        outputs and the check."""
        if self.big(kernel):
            torch.cuda.empty_cache()

    def big(self, kernel):
        """Whether `kernel`'s pool is larger than POOL_MAX: its batches then give back their
        outputs' memory when they are checked (`after`)."""
        st = self.state.get(kernel.role)
        return bool(st) and st["slots"] * st["slot_bytes"] > POOL_MAX

    def forget(self, kernel):
        """Frees `kernel`'s input pools (forgotten first, so that a failure while freeing
        never leaves freed memory named), and torch's cached blocks."""
        st = self.state.pop(kernel.role, None)
        if st:
            self._free(st["pools"] + [st["log"]])
        torch.cuda.empty_cache()

    def end_session(self):
        """The kernel processes of an evaluation (or of a performance session) are gone (a
        warm evaluator's next evaluation, or the next session, gets new ones): their input
        pools and the mappings of their outputs go too, so the next starts as the first did."""
        for st in self.state.values():
            self._free(st["pools"] + [st["log"]])
        self.state = {}
        self.maps.close_all()
        torch.cuda.empty_cache()

    def _free(self, pools):
        for p in pools:
            self.cu.free_shared(p)

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
        """The device address and size of the memory an output names, and whether it is one
        of `kernel`'s own input pools (an output there must stay in its call's slot): a pool
        by its index, memory the kernel sent by its keys (exports.py), or a legacy handle."""
        kind = "pool" if "pool" in d else "chunks" if "chunks" in d else "handle"
        counts = self.named.setdefault(kernel.role, {})
        counts[kind] = counts.get(kind, 0) + 1
        if "pool" in d:
            st = self.state[kernel.role]
            i = d["pool"]
            if type(i) is not int or not 0 <= i < len(st["pools"]):
                raise ValueError("an output names an input pool the kernel was not given")
            return st["pools"][i], st["sizes"][i], True
        if "chunks" in d:
            ptr, size = self.maps.chunks(kernel, d["chunks"])
            return ptr, size, False
        ptr = self.maps.open(kernel, d["handle"])
        base, size = self.cu.range_of(ptr)
        return ptr, size - (ptr - base), False

    def plan(self, kernel, calls, described, rng, output_args, returns=False):
        return self.samples.plan(kernel, calls, described, rng, output_args, returns)

    def order_plan(self, kernel, calls, described, rng, output_args, returns=False):
        return self.order.plan(kernel, calls, described, rng, output_args, returns)

    def probe(self, kernel, plan, reply):
        self.samples.probe(kernel, plan, reply)

    def confirm(self, plan):
        self.samples.confirm(plan)

    def outputs(self, kernel, calls, reply, output_args=None, returns=False, wanted=None):
        """Each call's output: what the kernel process described (its own memory, opened
        here), or, where the kernel writes into its arguments (`output_args`), those
        arguments as they are now in the call's slot of the evaluator's own pool (whatever
        the kernel process says of them is not read); with `returns` as well, each call's
        output is (what it returned, those arguments).

        `wanted`: the indices of the calls whose outputs are read (measure.py's checked(); all
        where None). Every call's description is checked all the same; the others' outputs
        are None: a tensor over a call's output costs tens of microseconds to make, and a
        timed batch of thousands of calls checks a sample of them."""
        keep = range(len(calls)) if wanted is None else wanted
        if output_args:
            written = [self.in_slot(kernel, c["slot"], output_args) if k in keep else None for k, c in enumerate(calls)]
            if not returns:
                return written
            return list(zip(self._described(kernel, calls, reply, keep), written))
        return self._described(kernel, calls, reply, keep)

    def _described(self, kernel, calls, reply, keep):
        """What each call returned, as the kernel process described it (checked: described);
        None for a call not in `keep`, its description checked all the same."""
        items = reply.get("outputs", [])
        if len(items) != len(calls):
            raise ValueError(f"{len(items)} outputs for {len(calls)} calls")
        outs = []
        for k, (item, call) in enumerate(zip(items, calls)):
            read = k in keep
            got = []
            for d in item["items"]:
                if "value" in d:
                    got.append(d["value"])
                    continue
                got.append(self.described(kernel, d, call, tensor=read)[0])
            outs.append((tuple(got) if item["tuple"] else got[0]) if read else None)
        return outs

    def described(self, kernel, d, call, tensor=True):
        """The tensor an output's description names (None where `tensor` is False: only its
        place is wanted), its first byte's address and its span in bytes, checked first: whole
        numbers, no negative size or stride, inside the memory it names, and, in one of the
        kernel's own input pools, inside the call's own slot."""
        dtype = DTYPES[d["dtype"]]
        offset = d["offset"]
        shape, stride = d["shape"], d["stride"]
        if not all(type(x) is int and x >= 0 for x in [offset, *shape, *stride]) or len(shape) != len(stride):
            raise ValueError("an output's offset, shape and strides must be whole numbers, none negative")
        ptr, size, pooled = self._open(kernel, d)
        span = layout_span(shape, stride, dtype.itemsize)
        if offset + span > size:
            raise ValueError("an output lies outside the memory it names")
        if pooled:
            st = self.state[kernel.role]
            lo = self._slot_base(st, call["slot"])
            if not (lo <= ptr + offset and ptr + offset + span <= lo + st["slot_bytes"]):
                raise ValueError("an output lies in an input slot of another call")
        t = tensor_at(ptr + offset, shape, stride, dtype) if tensor else None
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
        """After a batch's outputs are checked. A graph's outputs live in a memory pool of
        its own, new for every batch: their mappings are of no use to the next batch, and kept
        they would hold the memory. Mappings kept from eager batches are dropped when there
        are too many. Either way the kernel process is told, so that it shares anew."""
        big = self.big(kernel)
        unmap = graph or big or self.maps.too_many(kernel)
        if unmap:
            self.maps.close(kernel.role)
            kernel.drop_shared()
        kernel.request({"op": "release", "unmapped": unmap, "empty_cache": big}, 60)

    def fingerprint(self, value):
        if isinstance(value, torch.Tensor):
            return repr((tuple(value.shape), float(value.float().sum()), float(value.float().abs().sum())))
        return repr(value)

