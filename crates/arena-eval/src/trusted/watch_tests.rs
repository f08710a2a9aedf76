//! The device watch's further tries (GpuData.disarm, timing.Window.write_inputs), without a
//! device: which inputs a batch is checked against when a try was busy, and when the batch
//! fails.

use super::tests::assert_prints_ok;

/// The device watch's second chance (GpuData.disarm, timing.Window.write_inputs): a batch whose
/// watch saw other work is written again with inputs made afresh, and checked against those;
/// a watch that sees work on every try fails the batch on the last (DeviceBusy), after
/// exactly `busy_tries` writes.
#[test]
fn a_busy_watch_rewrites_fresh_inputs_and_fails_only_on_the_last_try() {
    let script = r#"
import sys, types
sys.path.insert(0, sys.argv[1])
import measure
from gpu_errors import DeviceBusy
from perf_settings import PerfSettings
class Data:
    rewrites_inputs = True
    def __init__(self, busy):
        self.busy, self.filled, self.lasts = busy, [], []
    def stage(self, kernel, calls, args): self.staged = args
    def arm(self, kernel): pass
    def fill(self, kernel, calls, args): self.filled.append(list(args))
    def flush(self): pass
    def disarm(self, kernel, failing=False, last=True):
        self.lasts.append(last)
        if self.busy and not failing:
            self.busy -= 1
            if last:
                raise DeviceBusy("busy")
            return False
        return True
h = types.SimpleNamespace(device="cuda", warnings=[], make_case=lambda cfg, seed, purpose: ((seed,), seed + 1))
def session(data, tries):
    job = {"timeouts": {"performance": 1}, "perf": PerfSettings(busy_tries=tries)}
    return measure.Session(h, data, [((4,), "c")], b"secret", job, False)
d = Data(busy=2)
s = session(d, 3)
first = [s.fresh(0, "performance") for _ in range(2)]
got = s.window.write_inputs(None, [{}, {}], first, True, lambda k: s.fresh(0, "performance"))
assert d.lasts == [False, False, True], d.lasts
assert len(d.filled) == 3 and d.filled[0] == [a for a, _ in first]
assert got != first and [a for a, _ in got] == d.filled[2], "checked against the inputs written last"
assert len({a for f in d.filled for a in f}) == 6, "every try's inputs are new"
d = Data(busy=5)
s = session(d, 3)
try:
    s.window.write_inputs(None, [{}], [s.fresh(0, "performance")], True, lambda k: s.fresh(0, "performance"))
    raise SystemExit("busy on every try passed")
except DeviceBusy:
    pass
assert d.lasts == [False, False, True], d.lasts
d = Data(busy=0)
s = session(d, 3)
s.window.write_inputs(None, [{}], [s.fresh(0, "performance")], True, lambda k: s.fresh(0, "performance"))
assert d.lasts == [False] and len(d.filled) == 1
# Where the inputs were laid out when the calls were assigned (a CPU's), one try only: its
# busy watch would fail at once rather than check the kernel against inputs it never got.
d = Data(busy=1)
d.rewrites_inputs = False
s = session(d, 3)
try:
    s.window.write_inputs(None, [{}], [s.fresh(0, "performance")], True, lambda k: s.fresh(0, "performance"))
    raise SystemExit("a busy watch passed where inputs cannot be rewritten")
except DeviceBusy:
    pass
assert d.lasts == [True] and len(d.filled) == 1
print("ok")
"#;
    assert_prints_ok(script);
}
