//! A secret sample of each timed batch's outputs checked (`checked_calls`), without a
//! device: which calls are checked, that the kernel's inputs do not depend on it, and that a
//! kernel wrong where it is checked fails while the correctness gate checks every call.

use super::tests::assert_prints_ok;

/// The evaluator's batch (measure.Session.batch) on stand-ins: a data layer like GpuData's
/// (inputs and outputs in place, nothing to size by a reference), a kernel
/// that doubles its input except on the calls named wrong, and a harness whose check compares.
const BATCH: &str = r#"
import sys, types
sys.path.insert(0, sys.argv[1])
import measure
from perf_settings import PerfSettings
refs = []
def reference(x):
    refs.append(x)
    return 2 * x
def check(got, want):
    if got != want:
        raise AssertionError(f"{got} != {want}")
h = types.SimpleNamespace(device="cpu", warnings=[], output_args=None, path="h.py",
                          make_inputs=lambda shape, seed: (seed % 1000003,), reference=reference, check=check)
class Data:
    rewrites_inputs = False
    checks_a_sample = True
    def assign(self, kernel, args, timeout, wants=None):
        self.args = list(args)
        return [{"call": k} for k in range(len(args))]
    def plan(self, *a): return None
    def stage(self, *a): pass
    def arm(self, kernel): pass
    def fill(self, *a): pass
    def flush(self): pass
    def disarm(self, kernel, failing=False, last=True): return True
    def dropped_inputs(self, kernel): pass
    def outputs(self, kernel, calls, reply, output_args=None, returns=False, wanted=None):
        self.wanted = wanted
        return reply["outputs"]
    def confirm(self, plan): pass
    def after(self, kernel, graph=False): pass
class Kernel:
    role = "candidate"
    def __init__(self, data, wrong):
        self.data, self.wrong = data, wrong
    def request(self, request, timeout, on_reply=None):
        outs = [2 * a[0] + (1 if k in self.wrong else 0) for k, a in enumerate(self.data.args)]
        return {"outputs": outs}, 0.001
def session(checked, data):
    job = {"timeouts": {"performance": 1, "correctness": 1}, "perf": PerfSettings(checked_calls=checked)}
    return measure.Session(h, data, [((4,), "c")], b"secret", job, False)
"#;

/// `body` run after BATCH's stand-ins; it prints "ok" where its assertions hold.
fn with_batch(body: &str) {
    assert_prints_ok(&format!("{BATCH}{body}"));
}

/// Which calls: every one where `checked_calls` is 0, or at or above the batch's size, and in
/// any untimed batch; otherwise that many distinct calls, a different draw each batch, and the
/// same draws from the same secret.
#[test]
fn a_timed_batch_checks_a_secret_sample_and_every_other_batch_checks_all() {
    with_batch(
        r#"
d = Data()
s = session(0, d)
assert list(s.checked(100, "performance")) == list(range(100))
s = session(8, d)
for purpose in ("correctness", "warmup", "size", "admits"):
    assert list(s.checked(100, purpose)) == list(range(100)), purpose
assert list(s.checked(8, "performance")) == list(range(8)) and list(s.checked(5, "performance")) == list(range(5))
draws = [sorted(s.checked(100, "performance")) for _ in range(4)]
assert all(len(set(x)) == 8 and all(0 <= k < 100 for k in x) for x in draws), draws
assert len({tuple(x) for x in draws}) == 4, "each batch draws its own sample"
again = session(8, d)
assert [sorted(again.checked(100, "performance")) for _ in range(4)] == draws, "the secret fixes the draws"
# A data layer whose calls would show which are checked (CpuData sizes each output window by
# its reference) checks every call.
cpu = Data()
cpu.checks_a_sample = False
assert list(session(8, cpu).checked(100, "performance")) == list(range(100))
import ast, os
def attr(module, cls):  # read from the source: gpu.py needs torch to import
    tree = ast.parse(open(os.path.join(sys.argv[1], module)).read())
    c = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls)
    return next(a.value.value for a in c.body if isinstance(a, ast.Assign) and a.targets[0].id == "checks_a_sample")
assert attr("data.py", "CpuData") is False and attr("gpu.py", "GpuData") is True
other = measure.Session(h, d, [((4,), "c")], b"other secret", {"timeouts": {"performance": 1}, "perf": PerfSettings(checked_calls=8)}, False)
assert [sorted(other.checked(100, "performance")) for _ in range(4)] != draws
print("ok")
"#,
    );
}

/// The kernel's inputs are the same draws whether or not a sample is checked, a reference runs
/// only for the calls checked, and only their outputs are read: nothing the kernel is given
/// says which calls those are.
#[test]
fn inputs_do_not_depend_on_the_sample_and_references_run_only_for_it() {
    with_batch(
        r#"
seen = {}
for checked in (0, 5):
    d = Data()
    s = session(checked, d)
    refs.clear()
    t, wants = s.batch(Kernel(d, set()), 0, 40, "performance", "performance")
    seen[checked] = list(d.args)
    # The data layer reads the outputs of the calls checked, and only those (GpuData makes
    # no tensor for the others).
    assert sorted(d.wanted) == [k for k, w in enumerate(wants) if w is not None], (d.wanted, wants)
    if checked:
        assert len(refs) == 5 and sum(w is not None for w in wants) == 5, (len(refs), wants)
    else:
        assert len(refs) == 40 and None not in wants
assert seen[0] == seen[5], "a sample changed the inputs the kernel was given"
print("ok")
"#,
    );
}

/// A kernel wrong on every call of a timed batch fails it with a sample of one; one wrong only
/// where the sample did not fall passes that batch, and fails the same batch in the
/// correctness gate (every call checked) and where its wrong call is drawn.
#[test]
fn a_wrong_output_fails_where_it_is_checked() {
    with_batch(
        r#"
d = Data()
s = session(1, d)
try:
    s.batch(Kernel(d, set(range(30))), 0, 30, "performance", "performance")
    raise SystemExit("every call wrong passed a sampled batch")
except measure.CheckFailed as e:
    assert "call" in str(e), e
# Where the next draw will fall (the same secret: the same draws), then a kernel wrong
# everywhere else.
probe = session(3, Data())
drawn = probe.checked(30, "performance")
d = Data()
s = session(3, d)
s.batch(Kernel(d, set(range(30)) - set(drawn)), 0, 30, "performance", "performance")
d = Data()
s = session(3, d)
try:
    s.batch(Kernel(d, {sorted(drawn)[0]}), 0, 30, "performance", "performance")
    raise SystemExit("a wrong call the sample drew passed")
except measure.CheckFailed as e:
    assert f"call {sorted(drawn)[0] + 1} of 30" in str(e), e
d = Data()
s = session(3, d)
try:
    s.batch(Kernel(d, {next(k for k in range(30) if k not in drawn)}), 0, 30, "correctness", "correctness")
    raise SystemExit("a wrong call passed the correctness gate")
except measure.CheckFailed:
    pass
print("ok")
"#,
    );
}
