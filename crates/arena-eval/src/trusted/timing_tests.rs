//! timing.py, the evaluator's one home of batch timing, without a device: where a timed window
//! ends and what it is worth (settle), how a batch is sized, and the CPU's cache flush.

use super::tests::assert_prints_ok;

/// A GPU batch's seconds are its window less the idle cost of the evaluator's read; a read that
/// waited behind the kernel's work for longer than the batch itself took, and than the limit,
/// fails the batch as deferred work. A wait within either is counted in the batch, not refused.
#[test]
fn settle_counts_a_late_read_in_the_batch_and_refuses_one_longer_than_it() {
    let script = r#"
import sys
sys.path.insert(0, sys.argv[1])
from timing import settle
from gpu_errors import DeferredWork
assert abs(settle(0.020, 0.001, 0.001, 50.0) - 0.019) < 1e-12
# Waited 30 ms more than idle: within the 50 ms limit, counted in the batch.
assert abs(settle(0.050, 0.031, 0.001, 50.0) - 0.049) < 1e-12
# Waited 80 ms: past the limit but within the batch's own 100 ms.
assert abs(settle(0.100, 0.081, 0.001, 50.0) - 0.099) < 1e-12
for elapsed, wait in [(0.020, 0.061), (0.001, 0.2)]:
    try:
        settle(elapsed, wait, 0.001, 50.0)
        raise SystemExit(f"a wait of {wait} s after a batch of {elapsed} s passed")
    except DeferredWork as e:
        assert "still busy" in str(e), e
# Never zero or negative: a batch is never read as free.
assert settle(0.0005, 0.0005, 0.001, 50.0) == 1e-9
print("ok")
"#;
    assert_prints_ok(script);
}

/// The window's end: on a GPU (a plan) the evaluator's read happens inside the request (before
/// its clock stops) and the seconds are settled by the idle cost and the limit given once; on a
/// CPU (no plan) the request's seconds are the batch's as they are.
#[test]
fn a_window_ends_with_the_evaluators_read_and_is_settled_on_a_gpu_only() {
    let script = r#"
import sys, types
sys.path.insert(0, sys.argv[1])
import timing
from gpu_errors import DeferredWork
from perf_settings import PerfSettings
class Kernel:
    def __init__(self, elapsed):
        self.elapsed, self.sent = elapsed, []
    def request(self, msg, timeout, on_reply=None):
        self.sent.append(msg)
        reply = {"ok": True}
        on_reply(reply)  # what kernel.request does once a good reply is in, clock running
        return reply, self.elapsed
class Data:
    guard = types.SimpleNamespace(idle_gather_s=0.002)
    def __init__(self, wait):
        self.wait, self.probed = wait, []
    def probe(self, kernel, plan, reply):
        self.probed.append(reply)
        if plan is not None:
            plan["wait_s"] = self.wait
w = timing.Window(Data(0.003), PerfSettings(deferred_limit_ms=50.0))
k = Kernel(0.030)
reply, s = w.time(k, {"op": "replay"}, 5, {"wait_s": 0.0})
assert k.sent == [{"op": "replay"}] and w.data.probed == [reply]
assert abs(s - 0.028) < 1e-12, s
w = timing.Window(Data(0.0), PerfSettings())
assert w.time(Kernel(0.030), {"op": "run"}, 5, None)[1] == 0.030
w = timing.Window(Data(0.5), PerfSettings(deferred_limit_ms=50.0))
try:
    w.time(Kernel(0.030), {"op": "replay"}, 5, {"wait_s": 0.0})
    raise SystemExit("half a second of deferred work passed")
except DeferredWork:
    pass
print("ok")
"#;
    assert_prints_ok(script);
}

/// Sizing: a second guess from a batch of one, the batch from the guess's time per call, each
/// within [1, cap]; a replayed graph never takes fewer calls than the eager size, nor more than
/// the cap or `max_calls`.
#[test]
fn batches_are_sized_to_the_target_within_their_caps() {
    let script = r#"
import sys
sys.path.insert(0, sys.argv[1])
from timing import first_guess, sized_calls, replayed_calls
assert first_guess(0.020, 0.0001, 4096) == 200
assert first_guess(0.020, 0.0, 4096) == 4096
assert first_guess(0.020, 1.0, 4096) == 1
assert sized_calls(0.020, 200, 0.002, 4096) == 2000
assert sized_calls(0.020, 200, 0.002, 500) == 500
assert sized_calls(0.020, 200, 10.0, 4096) == 1
assert replayed_calls(2000, 0.020, 0.005, 1 << 30, 4096) == 4096
assert replayed_calls(2000, 0.020, 0.010, 3000, 4096) == 3000
assert replayed_calls(2000, 0.020, 0.080, 1 << 30, 4096) == 2000, "never fewer than eagerly"
print("ok")
"#;
    assert_prints_ok(script);
}

/// The CPU's flush writes every line of a buffer twice the last-level cache, and each flush
/// writes another byte than the one before, so that no line is skipped as unchanged.
#[test]
fn each_cpu_flush_changes_every_line_of_twice_the_cache() {
    let script = r#"
import sys
sys.path.insert(0, sys.argv[1])
from timing import CacheFlush, last_level_cache_bytes
assert last_level_cache_bytes() > 0
f = CacheFlush(1 << 16)
assert len(f.buf) == 2 << 16
seen = []
for _ in range(3):
    f()
    seen.append(bytes(f.buf[:: f.LINE]))
assert len(seen[0]) == (2 << 16) // 64
for a, b in zip(seen, seen[1:]):
    assert all(x != y for x, y in zip(a, b)), "a line kept its byte"
print("ok")
"#;
    assert_prints_ok(script);
}
