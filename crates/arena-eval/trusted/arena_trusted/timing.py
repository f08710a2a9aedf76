"""How a batch of calls is timed: the one home of the evaluator's timing.

A timed batch, in order (measure.py's Session.batch runs it; the settings are
perf_settings.PerfSettings, read once from job.json and passed here):

1. `Window.write_inputs`: the batch's fresh inputs are written into its calls' slots while
   every kernel process is stopped and, on a GPU, the device is watched (gpu_guard.py: no
   kernel process may have work on it then); before a timed batch the cache is flushed
   (`L2Flush` on a GPU, `CacheFlush` on a CPU). A try the watch saw busy is written again
   with new inputs, up to `busy_tries` in all.
2. `Window.time`: the request is sent and the evaluator's clock (`stopwatch`) runs until the
   reply is in and, on a GPU, the evaluator's own read of a secret sample of the outputs has
   come back (samples.py's probe, which waits behind whatever the kernel's context still
   runs). The kernel process's answer alone never ends the window.
3. `settle`: that read's wait, less its cost on an idle device, is the batch's too; more of it
   than the batch took (and than `deferred_limit_ms`) fails the batch as deferred work.

How many calls a batch holds (`first_guess`, `sized_calls`, `replayed_calls`, `common_calls`)
is worked out here too. Why each piece holds against a kernel that reads this code:
docs/trusted-evaluation.md.
"""
import glob
import time

from gpu_errors import DeferredWork

# When the machine does not say (no sysfs cache entries): larger than any LLC of today's CPUs
# a kernel's machine would have per socket.
DEFAULT_LLC = 64 << 20


def stopwatch():
    """The evaluator's clock, started now: a function giving the seconds since. Every timed
    window is read by it, in the evaluator's process (kernel.py's request)."""
    t0 = time.perf_counter_ns()
    return lambda: (time.perf_counter_ns() - t0) / 1e9


def idle_seconds(read, reps=7):
    """What `read` (the evaluator's gather of sampled output words) takes on an idle device:
    the median of `reps` reads, taken off each GPU batch's time by `settle`. Measured once per
    evaluator (gpu_guard.Guard), after the reads' module is loaded."""
    costs = []
    for _ in range(reps):
        seconds = stopwatch()
        read()
        costs.append(seconds())
    return sorted(costs)[len(costs) // 2]


def settle(elapsed_s, wait_s, idle_s, deferred_limit_ms):
    """A GPU batch's seconds: `elapsed_s`, from sending the request until the evaluator's read
    of the sampled outputs came back (that read took `wait_s`), less what the read takes on an
    idle device (`idle_s`).

    A process may answer while its kernels still run (its synchronize patched away): the read
    then waits behind them, and that wait is the batch's too. More of it than the batch itself
    took (and than `deferred_limit_ms`) is refused as deferred work."""
    waited_ms = 1000 * (wait_s - idle_s)
    if waited_ms > max(deferred_limit_ms, 1000 * elapsed_s):
        raise DeferredWork(f"the GPU was still busy {waited_ms:.1f} ms after the kernel answered")
    return max(elapsed_s - idle_s, 1e-9)


class Window:
    """A batch's timed window over one device's data (data.CpuData or gpu.GpuData)."""

    def __init__(self, data, perf):
        self.data = data
        self.perf = perf

    def write_inputs(self, kernel, calls, cases, timed, remake):
        """Writes the batch's inputs into its calls' slots while the device is watched (every
        kernel process stopped) and, before a `timed` batch, flushes the cache. Where the watch
        saw other work, the batch's inputs are made afresh (`remake(k)`, call k's case) and
        written again, up to `busy_tries` times in all (GpuData.disarm says why); returns the
        cases written last, the only ones the batch is checked against."""
        # Only where `stage` and `fill` write the inputs can a try write them afresh (GpuData;
        # CpuData lays them out when the calls are assigned, and its watch is never busy).
        tries = max(1, self.perf.busy_tries)
        if not self.data.rewrites_inputs:
            tries = 1
        for t in range(tries):
            if t:
                cases = [remake(k) for k in range(len(cases))]
            args = [a for a, _ in cases]
            self.data.stage(kernel, calls, args)
            self.data.arm(kernel)
            failing = True
            try:
                self.data.fill(kernel, calls, args)
                if timed:
                    self.data.flush()
                failing = False
            finally:
                clean = self.data.disarm(kernel, failing, last=t == tries - 1)
            if clean:
                return cases
        raise AssertionError("the last try's disarm returns True or raises")

    def time(self, kernel, request, timeout, plan):
        """Sends `request` and returns (reply, the batch's seconds). On a GPU (`plan`: the
        batch's sample, samples.py) the window ends only when the evaluator has read the
        sampled outputs itself, and the seconds are settled (`settle`)."""
        reply, elapsed = kernel.request(request, timeout, lambda r: self.data.probe(kernel, plan, r))
        if plan is None:  # a CPU batch: its outputs are read from its window after the reply
            return reply, elapsed
        return reply, settle(elapsed, plan["wait_s"], self.data.guard.idle_gather_s, self.perf.deferred_limit_ms)


class L2Flush:
    """Written before each timed GPU batch: neither kernel's batch finds the other's data (or
    its own earlier batch's) in L2. Within a batch, input slots rotate over twice L2 (gpu.py).
    Lines a kernel made persisting are made normal before it (GpuData.arm), so that it evicts
    them too."""

    def __init__(self, cu, l2_bytes):
        import torch

        self.cu = cu
        self.torch = torch
        self.buf = torch.empty(2 * l2_bytes, dtype=torch.uint8, device="cuda")
        # The byte the next flush writes: a new one each time, so that no line is skipped.
        self.turn = 0

    def __call__(self):
        self.turn = (self.turn + 1) & 0xFF
        self.cu.fill(self.buf.data_ptr(), self.turn, self.buf.numel())
        # This stream only: a device-wide synchronize would wait for the watch.
        self.torch.cuda.current_stream().synchronize()


def last_level_cache_bytes():
    """The largest cache of CPU 0 that sysfs describes (the last level), in bytes."""
    best = 0
    for d in glob.glob("/sys/devices/system/cpu/cpu0/cache/index*"):
        try:
            with open(f"{d}/size") as f:
                text = f.read().strip()
        except OSError:
            continue
        mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:].upper(), 1)
        digits = text[:-1] if mult != 1 else text
        if digits.isdigit():
            best = max(best, int(digits) * mult)
    return best or DEFAULT_LLC


class CacheFlush:
    """Written before each timed CPU batch: one byte of every cache line of a buffer twice the
    last-level cache, so that what either kernel's batch finds in the cache is what it brings
    in itself (the inputs it was just given included)."""

    LINE = 64

    def __init__(self, llc_bytes=None):
        self.bytes = 2 * (llc_bytes or last_level_cache_bytes())
        self.buf = bytearray(self.bytes)
        lines = len(range(0, self.bytes, self.LINE))
        # Two marks, written in turn: each flush changes every line, so none is skipped.
        self.marks = (b"\x55" * lines, b"\xaa" * lines)
        self.turn = 0

    def __call__(self):
        self.turn ^= 1
        self.buf[:: self.LINE] = self.marks[self.turn]


# How many calls a batch holds. Each kernel of a case is sized alone (warm-up batches of one,
# then a guess), its graph's replay sizes it again, and the case's kernels then share one size.


def first_guess(target_s, one_call_s, cap):
    """Calls for a second sizing batch, from a batch of one (`one_call_s`, mostly round trip)."""
    return max(1, min(cap, int(target_s / max(one_call_s, 1e-7))))


def sized_calls(target_s, guess, guess_s, cap):
    """Calls that take about `target_s`, by the guess batch's time per call."""
    return max(1, min(cap, int(target_s * guess / max(guess_s, 1e-7))))


def replayed_calls(calls, target_s, replay_s, cap, max_calls):
    """Calls after a captured batch of `calls` replayed in `replay_s`: never fewer than eagerly
    (a replay is not slower per call, and one slow sizing batch must not leave the case with
    batches of a few calls)."""
    return max(calls, min(cap, max_calls, int(target_s * calls / max(replay_s, 1e-7))))


def common_calls(n, main):
    """One batch size for the kernels of a case. A batch's time per call depends on how many
    calls it holds (a graph of them, their inputs' footprint), not only on the kernel: two
    untouched copies of a 2 µs kernel, sized apart by their noisy sizing batches (1 890 and
    4 096 calls), read 7 % apart on an H100, in every one of five sessions. The most the `main`
    kernels (baseline and candidate) were sized to, but at most 4x the least, so that a kernel
    far slower than the other takes batches of at most ~4 targets; an optional kernel (the
    compiled baseline) never sizes theirs, and takes the same where it can (at most 4x its
    own)."""
    sized = [n[r] for r in main if r in n]
    if not sized:
        return n
    calls = min(max(sized), 4 * min(sized))
    return {role: calls if role in main else min(calls, 4 * c) for role, c in n.items()}
