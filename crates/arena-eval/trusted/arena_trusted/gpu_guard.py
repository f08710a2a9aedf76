"""The evaluator's own eyes on the GPU: what the device does while every kernel process is
stopped, and what a batch's outputs hold the moment its reply arrives.

Nothing a kernel process says about its own work is believed. A process that answers a timed
request can leave work queued behind the answer (its `synchronize` patched away), leave a
kernel running that slows the other kernel's batches, or park work on the device that starts
when its inputs land (a persistent kernel polling its input slots, a stream waiting on a value
in them) and computes the batch before it is timed. Stopping the process (SIGSTOP) stops none
of that: the GPU runs what it was given. So the evaluator watches the device itself, with two
small kernels of its own, in PTX the driver compiles (no compiler, nothing on disk a kernel
process could reach):

- `arena_watch`: one thread reading the GPU's global timer in a loop until the evaluator says
  stop. The contexts of different processes do not run at once on a GPU (without MPS): the
  scheduler switches between them, and while another context's work runs this one is switched
  out, so its timer reads jump. A gap in its reads is time the device gave to someone else. It
  runs from before a batch's inputs are written until just before the batch is sent, a time
  when no kernel process may use the device at all. It also has to start and stop on time: a
  device busy with another context's work starts it late or stops it late, and that counts too.
- `arena_gather`: reads a 4-byte word at each of a list of addresses (secretly sampled places in
  a batch's outputs). It runs the moment the reply arrives, and the batch's time ends when it
  has read them: it waits behind whatever the kernel's context still runs (the device switches
  to it only when that context's time slice ends). It is run again once the outputs have been
  checked: a word that changed in between was written after the kernel process said it was
  done, and the batch fails as deferred work.
"""
import ctypes
import time

import timing
from gpu_errors import GuardError

PTX = r"""
.version 7.0
.target sm_70
.address_size 64

.visible .entry arena_watch(
	.param .u64 ctl,
	.param .u64 limit_ns,
	.param .u64 thresh_ns
)
{
	.reg .pred 	%p<4>;
	.reg .b32 	%r<3>;
	.reg .b64 	%rd<16>;

	ld.param.u64 	%rd1, [ctl];
	ld.param.u64 	%rd3, [limit_ns];
	ld.param.u64 	%rd4, [thresh_ns];
	mov.u64 	%rd5, %globaltimer;
	mov.u32 	%r2, 1;
	st.volatile.u32 	[%rd1+4], %r2;
	mov.u64 	%rd6, %rd5;
	mov.u64 	%rd7, 0;
	mov.u64 	%rd8, 0;
	mov.u64 	%rd9, 0;
	mov.u64 	%rd13, 0;
$L_loop:
	mov.u64 	%rd10, %globaltimer;
	sub.u64 	%rd11, %rd10, %rd6;
	max.u64 	%rd7, %rd7, %rd11;
	setp.gt.u64 	%p1, %rd11, %rd4;
	@%p1 add.u64 	%rd9, %rd9, %rd11;
	@%p1 add.u64 	%rd13, %rd13, 1;
	mov.u64 	%rd6, %rd10;
	add.u64 	%rd8, %rd8, 1;
	ld.volatile.u32 	%r1, [%rd1];
	setp.ne.u32 	%p2, %r1, 0;
	@%p2 bra 	$L_done;
	sub.u64 	%rd12, %rd10, %rd5;
	setp.lt.u64 	%p3, %rd12, %rd3;
	@%p3 bra 	$L_loop;
$L_done:
	mov.u64 	%rd10, %globaltimer;
	sub.u64 	%rd12, %rd10, %rd5;
	st.volatile.u64 	[%rd1+8], %rd7;
	st.volatile.u64 	[%rd1+16], %rd12;
	st.volatile.u64 	[%rd1+24], %rd8;
	st.volatile.u64 	[%rd1+32], %rd9;
	st.volatile.u64 	[%rd1+40], %rd13;
	ret;
}

.visible .entry arena_gather(
	.param .u64 addrs,
	.param .u64 out,
	.param .u32 n
)
{
	.reg .pred 	%p<2>;
	.reg .b32 	%r<8>;
	.reg .b64 	%rd<8>;

	ld.param.u64 	%rd1, [addrs];
	ld.param.u64 	%rd2, [out];
	ld.param.u32 	%r1, [n];
	mov.u32 	%r2, %ctaid.x;
	mov.u32 	%r3, %ntid.x;
	mov.u32 	%r4, %tid.x;
	mad.lo.u32 	%r5, %r2, %r3, %r4;
	setp.ge.u32 	%p1, %r5, %r1;
	@%p1 bra 	$L_end;
	mul.wide.u32 	%rd3, %r5, 8;
	add.u64 	%rd4, %rd1, %rd3;
	ld.volatile.u64 	%rd5, [%rd4];
	ld.volatile.u32 	%r6, [%rd5];
	mul.wide.u32 	%rd6, %r5, 4;
	add.u64 	%rd7, %rd2, %rd6;
	st.volatile.u32 	[%rd7], %r6;
$L_end:
	ret;
}
"""

# The watch's control block, in page-locked host memory the GPU reads and writes:
# u32 stop, u32 started, then u64 longest gap, total, reads, gaps over the threshold (ns in
# all) and their count.
CTL_BYTES = 64
MAX_WORDS = 1024
CU_STREAM_NON_BLOCKING = 1
CU_MEMHOSTALLOC_PORTABLE = 1
CU_MEMHOSTALLOC_DEVICEMAP = 2




class Watch:
    """What the device did while it was watched: the longest gap between two timer reads, the
    gaps over the threshold (their sum and count), how long the watch ran, and how late it
    started and stopped by the evaluator's clock."""

    def __init__(self, gap_ns, total_ns, reads, over_ns, over_count, start_s, stop_s):
        self.gap_us = gap_ns / 1000
        self.total_us = total_ns / 1000
        self.reads = reads
        self.over_us = over_ns / 1000
        self.over_count = over_count
        self.start_us = start_s * 1e6
        self.stop_us = stop_s * 1e6

    def as_dict(self):
        return {k: round(v, 1) if isinstance(v, float) else v for k, v in vars(self).items()}

    def busy(self, gap_limit_us, late_stop_us):
        """Why the device was not the evaluator's alone while watched (None if it was): a gap
        between two timer reads longer than `gap_limit_us` (another context ran), or a stop
        later than `late_stop_us` (another context held the device when the watch was told to
        stop). How late it started is not judged: that is the host's time as much as the
        device's (docs/benchmarks.md, "The device watch")."""
        if self.gap_us > gap_limit_us:
            return f"a gap of {self.gap_us:.0f} us in the device's timer reads ({self.over_us:.0f} us of gaps in all)"
        if self.stop_us > late_stop_us:
            return f"the watch stopped {self.stop_us:.0f} us late"
        return None


class Guard:
    def __init__(self, driver, gap_threshold_us=20.0):
        self.cu = driver
        lib = driver.lib
        u64p = ctypes.POINTER(ctypes.c_uint64)
        lib.cuModuleLoadData.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_char_p]
        lib.cuModuleGetFunction.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p, ctypes.c_char_p]
        lib.cuLaunchKernel.argtypes = [ctypes.c_void_p] + [ctypes.c_uint] * 6 + [
            ctypes.c_uint,
            ctypes.c_void_p,
            ctypes.POINTER(ctypes.c_void_p),
            ctypes.POINTER(ctypes.c_void_p),
        ]
        lib.cuStreamCreate.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_uint]
        lib.cuStreamSynchronize.argtypes = [ctypes.c_void_p]
        lib.cuMemHostAlloc.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t, ctypes.c_uint]
        lib.cuMemHostGetDevicePointer_v2.argtypes = [u64p, ctypes.c_void_p, ctypes.c_uint]
        self.module = ctypes.c_void_p()
        driver.check(lib.cuModuleLoadData(ctypes.byref(self.module), PTX.encode()), "cuModuleLoadData (the evaluator's watch)")
        self.watch_fn = self._function(b"arena_watch")
        self.gather_fn = self._function(b"arena_gather")
        # A stream of its own that never waits for the legacy default stream (where torch and
        # the evaluator's copies run) nor makes it wait: the watch runs beside them.
        self.stream = ctypes.c_void_p()
        driver.check(lib.cuStreamCreate(ctypes.byref(self.stream), CU_STREAM_NON_BLOCKING), "cuStreamCreate")
        size = CTL_BYTES + MAX_WORDS * 12
        self.host = ctypes.c_void_p()
        driver.check(
            lib.cuMemHostAlloc(ctypes.byref(self.host), size, CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP),
            "cuMemHostAlloc",
        )
        dev = ctypes.c_uint64()
        driver.check(lib.cuMemHostGetDevicePointer_v2(ctypes.byref(dev), self.host, 0), "cuMemHostGetDevicePointer")
        self.dev = dev.value
        base = self.host.value
        self.ctl = (ctypes.c_uint32 * 2).from_address(base)
        self.result = (ctypes.c_uint64 * 5).from_address(base + 8)
        self.addrs = (ctypes.c_uint64 * MAX_WORDS).from_address(base + CTL_BYTES)
        self.words = (ctypes.c_uint32 * MAX_WORDS).from_address(base + CTL_BYTES + 8 * MAX_WORDS)
        self.addrs_dev = self.dev + CTL_BYTES
        self.words_dev = self.dev + CTL_BYTES + 8 * MAX_WORDS
        self.threshold_ns = int(gap_threshold_us * 1000)
        self.running = False
        # A word of the evaluator's own, read when a batch has no output on the device (its
        # outputs came back as values): the gather still waits behind a busy device.
        self.own_word = self.addrs_dev
        # The gather's cost on an idle device, taken off each batch's time (the old settle
        # probe's idle wait): its first launches load the module (lazy loading), not a wait;
        # the watch is loaded alike, so that no watch of a batch starts late for it.
        for _ in range(3):
            self.gather([self.own_word])
            self.start()
            self.stop()
        self.idle_gather_s = timing.idle_seconds(lambda: self.gather([self.own_word] * 64))

    def _function(self, name):
        f = ctypes.c_void_p()
        self.cu.check(self.cu.lib.cuModuleGetFunction(ctypes.byref(f), self.module, name), "cuModuleGetFunction")
        return f

    def _launch(self, fn, grid, block, params):
        # `params` (ctypes values) outlive the launch, which copies them.
        argv = (ctypes.c_void_p * len(params))(*[ctypes.cast(ctypes.byref(p), ctypes.c_void_p) for p in params])
        self.cu.check(
            self.cu.lib.cuLaunchKernel(fn, grid, 1, 1, block, 1, 1, 0, self.stream, argv, None),
            "cuLaunchKernel",
        )

    def _sync(self):
        self.cu.check(self.cu.lib.cuStreamSynchronize(self.stream), "cuStreamSynchronize (the evaluator's watch)")

    def start(self, limit_s=10.0, start_timeout_s=5.0):
        """Starts the watch and waits until it runs (a device busy with another context's work
        starts it late: that is part of what it reports)."""
        if self.running:
            raise GuardError("the watch is already running")
        self.ctl[0] = 0
        self.ctl[1] = 0
        self.limit_ns = int(limit_s * 1e9)
        t0 = time.perf_counter()
        self._launch(
            self.watch_fn,
            1,
            1,
            [ctypes.c_uint64(self.dev), ctypes.c_uint64(self.limit_ns), ctypes.c_uint64(self.threshold_ns)],
        )
        self.running = True
        end = t0 + start_timeout_s
        while self.ctl[1] == 0:
            if time.perf_counter() > end:
                break
        self.start_s = time.perf_counter() - t0

    def stop(self):
        """Stops the watch and returns what it saw (a Watch)."""
        if not self.running:
            raise GuardError("the watch is not running")
        t0 = time.perf_counter()
        self.ctl[0] = 1
        try:
            self._sync()
        finally:
            self.running = False
        stop_s = time.perf_counter() - t0
        r = self.result
        if r[1] >= self.limit_ns:
            # It ended on its own: whatever the evaluator did meanwhile waited for it (a kernel
            # of the evaluator's context launched for the first time, say).
            raise GuardError(f"the device watch ran to its limit ({self.limit_ns / 1e9:.0f} s): the evaluator waited on it")
        return Watch(r[0], r[1], r[2], r[3], r[4], self.start_s, stop_s)

    def gather(self, addrs):
        """The 4-byte word at each address (device memory this context can read), read on the
        device now, in one launch."""
        n = len(addrs)
        if n == 0:
            return []
        if n > MAX_WORDS:
            raise GuardError(f"at most {MAX_WORDS} words are gathered at once")
        for i, a in enumerate(addrs):
            self.addrs[i] = a
        block = 128
        self._launch(
            self.gather_fn,
            (n + block - 1) // block,
            block,
            [ctypes.c_uint64(self.addrs_dev), ctypes.c_uint64(self.words_dev), ctypes.c_uint32(n)],
        )
        self._sync()
        return list(self.words[:n])

    def reset_persisting_l2(self):
        """Lines a kernel made persisting (an L2 access-policy window over its input slots)
        become normal lines again, so that a flush after it evicts them like any other (a
        persisting line is not evicted by normal accesses). Not every driver has it: then
        there is nothing to reset."""
        fn = getattr(self.cu.lib, "cuCtxResetPersistingL2Cache", None)
        if fn is not None:
            fn()
