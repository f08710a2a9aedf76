//! The evaluator's probe for checks that cannot tell inputs apart (trusted/arena_trusted/
//! admits.py), run by the host's python3 with stand-ins for a session and its harness: a
//! check that passes other inputs' references three times in a row admits them; one that fails
//! any of them, or cannot compare them, does not; a derived harness is probed through its
//! `check_kept` (the original's outputs on the other inputs against the runner's comparisons); a
//! check that passes zeros of the reference's tensors is flagged at once (a reference without
//! one is not probed); a
//! configuration is probed once, from its second correctness call, and named as the session
//! names it (by index where it is hidden). How
//! measure.py acts on it was checked on a GPU against a kernel that keeps answers
//! (docs/benchmarks.md).

mod common;

use common::evaluator_python;

const SCRIPT: &str = r#"
import json, sys
sys.path.insert(0, sys.argv[1])
import admits

class Harness:
    def __init__(self, passes):
        self.passes = passes
        self.seen = 0
    def check(self, got, want):
        self.seen += 1
        if self.seen > self.passes:
            raise AssertionError("told apart")

class Broken:
    def check(self, got, want):
        raise RuntimeError("cannot compare")

class Session:
    def __init__(self, h, fresh_fails=False):
        self.h = h
        self.fresh_calls = 0
        self.fresh_fails = fresh_fails
        self.admits = {}
        self.warnings = []
    def fresh(self, i, purpose):
        self.fresh_calls += 1
        if self.fresh_fails:
            raise MemoryError("out of memory making another input")
        return (), ("reference", i, purpose, self.fresh_calls)
    def name(self, i):
        return f"unseen configuration {i} (edge_case)"

out = {}
for passes in (0, 1, 2, 3, 9):
    s = Session(Harness(passes))
    out[f"passes_{passes}"] = [admits.admits_other_inputs(s, 0, "other", "want"), s.fresh_calls]
s = Session(Broken())
out["broken"] = [admits.admits_other_inputs(s, 0, "other", "want"), s.fresh_calls]
s = Session(Harness(9), fresh_fails=True)
out["fresh_fails"] = [admits.admits_other_inputs(s, 0, "other", "want"), s.fresh_calls]
# probe(): the first reference of a configuration is kept, the second probes, once.
s = Session(Harness(9))
kept = {}
steps = []
for want in ("w1", "w2", "w3"):
    admits.probe(s, 4, want, kept)
    steps.append([s.admits.get(4), sorted(kept)])
out["probe"] = {"steps": steps, "warnings": s.warnings}
s = Session(Harness(0))
kept = {}
for want in ("w1", "w2"):
    admits.probe(s, 1, want, kept)
out["probe_sensitive"] = {"admits": s.admits, "warnings": s.warnings}
# A derived harness: its reference is comparisons, so the probe asks check_kept (the
# original's outputs on the other inputs), never check.
class Derived(Harness):
    def check(self, got, want):
        raise RuntimeError("check() is not the probe's for a derived harness")
    def check_kept(self, other, want):
        Harness.check(self, other, want)
    make_case = lambda *a: None
class Comparisons:
    """A derived harness's reference: comparisons, keeping the original's outputs."""
    def outputs_kept(self):
        return {}
for passes in (2, 3):
    d = Derived(passes)
    s = Session(d)
    out[f"derived_{passes}"] = [admits.admits_other_inputs(s, 0, Comparisons(), Comparisons()), d.seen]
class T:
    def __init__(self, n, size):
        self.n, self.size = n, size
    def numel(self):
        return self.n
    def element_size(self):
        return self.size
out["nbytes"] = admits.nbytes((T(10, 4), [T(3, 2)], "x", 5))
class Kept:
    def outputs_kept(self):
        return {("ret",): T(8, 4), ("arg", 1): T(2, 2)}
out["nbytes_kept"] = admits.nbytes(Kept())
# Zeros: a tensor-like reference (new_zeros, shape) is probed with zeros at its first call.
class Z:
    def __init__(self, v, shape=(2,)):
        self.v, self.shape = v, shape
    def new_zeros(self, shape):
        return Z(0, shape)
class RefusesZeros(Harness):
    def check(self, got, want):
        self.seen += 1
        if any(isinstance(g, Z) and g.v == 0 for g in (got if isinstance(got, tuple) else (got,))):
            raise AssertionError("zeros told apart")
for name, h in (("zeros_pass", Harness(9)), ("zeros_refused", RefusesZeros(9))):
    s = Session(h)
    kept = {}
    admits.probe(s, 2, (Z(5), "meta"), kept)
    out[name] = {"admits": s.admits, "kept": sorted(kept), "warnings": s.warnings}
# A reference over MAX_BYTES: probed with one zero expanded to its shape (no zeros of its
# size are made), never kept; a second call probes nothing.
made = []
class One:
    def __init__(self, shape):
        self.shape, self.v = shape, 0
    def expand(self, shape):
        made.append(["expand", list(shape)])
        return Z(0, shape)
class Big:
    shape = (3, 5)
    def numel(self):
        return admits.MAX_BYTES + 1
    def element_size(self):
        return 1
    def new_zeros(self, shape):
        made.append(["new_zeros", list(shape)])
        return One(shape)
for name, h in (("big", Harness(9)), ("big_refused", RefusesZeros(9))):
    made.clear()
    s = Session(h)
    kept = {}
    admits.probe(s, 5, Big(), kept)
    admits.probe(s, 5, Big(), kept)
    out[name] = {"admits": s.admits, "kept": sorted(kept), "made": list(made), "checks": h.seen}
# A derived harness: its zeros are the original's kept outputs zeroed, through check_kept.
class Values:
    def outputs_kept(self):
        return {("ret",): Z(3)}
seen = []
class DerivedZeros(Harness):
    def check_kept(self, other, want):
        seen.append(sorted((k, v.v) for k, v in other.outputs_kept().items()))
s = Session(DerivedZeros(9))
admits.probe(s, 0, Values(), {})
out["derived_zeros"] = {"admits": s.admits, "seen": [[list(map(str, p)) for p in x] for x in seen]}
print(json.dumps(out))
"#;

#[test]
fn a_check_admits_other_inputs_only_when_it_passes_three_in_a_row() {
    let v = evaluator_python(SCRIPT);
    // [admits, fresh references made]: a sensitive check costs one comparison and no fresh
    // reference; each further probe is one fresh reference.
    assert_eq!(v["passes_0"], serde_json::json!([false, 0]));
    assert_eq!(v["passes_1"], serde_json::json!([false, 1]));
    assert_eq!(v["passes_2"], serde_json::json!([false, 2]));
    assert_eq!(v["passes_3"], serde_json::json!([true, 2]));
    assert_eq!(v["passes_9"], serde_json::json!([true, 2]));
    assert_eq!(
        v["broken"],
        serde_json::json!([false, 0]),
        "an error is not a pass"
    );
    // [admits, comparisons made]: probed through check_kept like any other harness.
    assert_eq!(v["derived_2"], serde_json::json!([false, 3]));
    assert_eq!(v["derived_3"], serde_json::json!([true, 3]));
    assert_eq!(v["nbytes"], 46);
    assert_eq!(
        v["nbytes_kept"], 36,
        "a derived reference by the outputs it keeps"
    );
    assert_eq!(
        v["fresh_fails"],
        serde_json::json!([false, 1]),
        "a failure to make another input is not the kernel's"
    );
    // Kept, then probed (and the probe's outcome kept), then left alone.
    assert_eq!(
        v["probe"]["steps"],
        serde_json::json!([
            [null, [4]],
            ["tolerance_admits_other_inputs", []],
            ["tolerance_admits_other_inputs", []]
        ])
    );
    let warnings = v["probe"]["warnings"].as_array().unwrap();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    let w = warnings[0].as_str().unwrap();
    assert!(
        w.starts_with("tolerance_admits_other_inputs: for unseen configuration 4 (edge_case)"),
        "named as the session names it (by index where hidden): {w}"
    );
    assert_eq!(
        v["probe_sensitive"],
        serde_json::json!({"admits": {"1": false}, "warnings": []})
    );
    // A check that passes zeros: flagged at the first call, nothing kept.
    assert_eq!(
        v["zeros_pass"]["admits"],
        serde_json::json!({"2": "tolerance_admits_zeros"})
    );
    assert_eq!(v["zeros_pass"]["kept"], serde_json::json!([]));
    let w = v["zeros_pass"]["warnings"][0].as_str().unwrap();
    assert!(
        w.starts_with("tolerance_admits_zeros: for unseen configuration 2"),
        "{w}"
    );
    // One that tells zeros apart: not flagged, its reference kept for the next probe.
    assert_eq!(
        v["zeros_refused"],
        serde_json::json!({"admits": {}, "kept": [2], "warnings": []})
    );
    // Over MAX_BYTES: probed with expanded zeros (one zero, then a view of the shape), once;
    // never kept.
    assert_eq!(
        v["big"],
        serde_json::json!({"admits": {"5": "tolerance_admits_zeros"}, "kept": [],
            "made": [["new_zeros", []], ["expand", [3, 5]]], "checks": 1})
    );
    assert_eq!(
        v["big_refused"],
        serde_json::json!({"admits": {"5": false}, "kept": [],
            "made": [["new_zeros", []], ["expand", [3, 5]]], "checks": 1}),
        "a check that tells zeros apart is asked once; no kept-answer probe at that size"
    );
    // A derived harness is offered the original's outputs zeroed.
    assert_eq!(
        v["derived_zeros"]["admits"],
        serde_json::json!({"0": "tolerance_admits_zeros"})
    );
    assert_eq!(
        v["derived_zeros"]["seen"],
        serde_json::json!([[["('ret',)", "0"]]])
    );
}

/// The harness the evaluator loads (harness.py's Harness, from a file), not a stand-in: a
/// reference that keeps the original's outputs reaches the harness file's `check_kept`
/// through the loader, and a harness that lacks one is said to be broken, never probed as
/// "told apart". Before 2026-11-28 the loader did not pass `check_kept` on, and both probes of
/// every derived harness answered "told apart" without looking: a zeros kernel read 3x on an
/// H200 (kda_recompute_wu) while every unit test of the probe, all of stand-ins, passed.
const LOADED: &str = r#"
import json, os, sys, tempfile
sys.path.insert(0, sys.argv[1])
import admits, harness

BODY = """
SOURCE = "k.py"
ENTRY = "k"
TEST_SHAPES = [1]
class Zero:
    shape = (2,)
    def __init__(self, v):
        self.v = v
    def new_zeros(self, shape):
        return Zero(0)
class Comparisons:
    def outputs_kept(self):
        return {"out": Zero(7)}
def make_inputs(config, seed):
    return (seed,)
def reference(*args):
    return Comparisons()
def check(got, want):
    raise RuntimeError("check() is not the probes' for this harness")
"""
KEPT = """
def check_kept(other, want):
    if other.outputs_kept()["out"].v != 0:
        raise AssertionError("told apart")
"""

class Session:
    def __init__(self, h):
        self.h, self.admits, self.warnings = h, {}, []
    def fresh(self, i, purpose):
        return (), self.h.reference()
    def name(self, i):
        return f"configuration {i}"

out = {}
d = tempfile.mkdtemp()
for name, body in (("with_check_kept", BODY + KEPT), ("without", BODY)):
    path = os.path.join(d, name + ".py")
    with open(path, "w") as f:
        f.write(body)
    s = Session(harness.Harness(path, accelerator=False))
    try:
        admits.probe(s, 0, s.h.reference(), {})
        out[name] = {"admits": s.admits}
    except admits.HarnessError as e:
        out[name] = {"error": str(e)}
print(json.dumps(out))
"#;

#[test]
fn a_loaded_harness_that_keeps_outputs_is_probed_through_its_own_check_kept() {
    let v = evaluator_python(LOADED);
    assert_eq!(
        v["with_check_kept"],
        serde_json::json!({"admits": {"0": "tolerance_admits_zeros"}}),
        "zeros reached the harness file's check_kept through the loader"
    );
    let e = v["without"]["error"].as_str().unwrap_or_default();
    assert!(
        e.contains("no check_kept"),
        "a reference that keeps outputs without check_kept is the harness's error: {v}"
    );
}
