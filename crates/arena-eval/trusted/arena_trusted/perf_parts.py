"""Where a performance gate's seconds go, by part of the work: what a trusted evaluation costs
beside the task's own harness is in these parts, not in the timed kernel work (a 20 ms batch
takes seconds of the evaluator's), and a cost that is not named cannot be cut on purpose.

The parts, each exclusive of the others (a second is charged to the innermost part under way):
  sessions  fresh kernel processes for a later session: started, loaded, run once
  sizing    the untimed batches that size a configuration's batches (and capture them once)
  warmup    a later session's call of each kernel before its pairs
  inputs    a timed batch's fresh inputs, and the references of the calls it checks
  capture   a timed batch's CUDA graph captured (before its inputs are written)
  write     a timed batch's inputs written into its slots, the cache flushed, under the watch
  window    the timed request: the kernel's work, the handoff, the sampled outputs' reads
  check     the timed batch's outputs read, checked, and released
  other     the rest of the gate (the pairs' order, each case's report)
`measured` is apart from them: the seconds the timed batches read (inside `window`), the only
part of the gate that is the kernels' own work."""
import contextlib
import time

PARTS = ("sessions", "sizing", "warmup", "inputs", "capture", "write", "window", "check", "other")


class Parts:
    def __init__(self, clock=time.monotonic):
        self.clock = clock
        self.seconds = {}
        self.measured = 0.0
        self.stack = []
        self.mark = None

    def _charge(self):
        now = self.clock()
        if self.stack:
            top = self.stack[-1]
            self.seconds[top] = self.seconds.get(top, 0.0) + (now - self.mark)
        self.mark = now

    @contextlib.contextmanager
    def part(self, name):
        """Charges the time inside to `name`, less what inner parts take."""
        if name not in PARTS:
            raise ValueError(f"no performance part {name!r}")
        self._charge()
        self.stack.append(name)
        try:
            yield
        finally:
            self._charge()
            self.stack.pop()

    def timed(self, name, on):
        """`part(name)` where `on`, else nothing: the parts of a timed batch are named, an
        untimed batch's time is its caller's part (sizing, warmup)."""
        return self.part(name) if on else contextlib.nullcontext()

    def add_measured(self, seconds):
        self.measured += seconds

    def record(self):
        """The parts' seconds (every part named, 0 where none went to it), rounded to the ms."""
        return {p: round(self.seconds.get(p, 0.0), 3) for p in PARTS}
