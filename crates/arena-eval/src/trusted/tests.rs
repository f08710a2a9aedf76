use super::*;

#[test]
fn the_digest_covers_every_file_and_install_writes_them_read_only() {
    let d = tempfile::tempdir().unwrap();
    install(&d.path().join("t")).unwrap();
    for (name, text) in FILES {
        assert_eq!(
            std::fs::read_to_string(d.path().join("t").join(name)).unwrap(),
            *text
        );
    }
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(d.path().join("t/evaluate.py"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o444);
    assert_eq!(digest(), digest());
    assert!(digest().as_str().starts_with("sha256:"));
}

/// A harness's COMPILED_BASELINE, read by python3 as the evaluator reads it: torch.compile's
/// keyword arguments as plain data, or refused naming the harness; absent, no baseline.
/// `script` run by python3 with the evaluator's files installed in the directory its first
/// argument names.
fn python_on_evaluator(script: &str) -> std::process::Output {
    let d = tempfile::tempdir().unwrap();
    install(&d.path().join("t")).unwrap();
    std::process::Command::new("python3")
        .args(["-I", "-c", script])
        .arg(d.path().join("t"))
        .output()
        .unwrap()
}

/// `script` (python_on_evaluator) prints `ok` and nothing else.
fn assert_prints_ok(script: &str) {
    let o = python_on_evaluator(script);
    assert_eq!(
        String::from_utf8_lossy(&o.stdout).trim(),
        "ok",
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

#[test]
fn a_compiled_baseline_is_plain_keyword_arguments_or_refused() {
    let script = r#"
import sys, types
sys.path.insert(0, sys.argv[1])
import harness
def m(**kw):
    return types.SimpleNamespace(**kw)
assert harness.compiled_options(m(), "h.py") is None
assert harness.compiled_options(m(COMPILED_BASELINE={}), "h.py") == {}
ok = {"backend": "inductor", "mode": "max-autotune", "options": {"triton.cudagraphs": False}}
assert harness.compiled_options(m(COMPILED_BASELINE=ok), "h.py") == ok
for bad in (True, "inductor", {"backend": print}, {1: "x"}, {"options": {"a": [1]}}):
    try:
        harness.compiled_options(m(COMPILED_BASELINE=bad), "h.py")
    except ValueError as e:
        assert str(e).startswith("h.py: COMPILED_BASELINE must be a dict"), e
    else:
        raise AssertionError(f"{bad!r} was taken")
print("ok")
"#;
    assert_prints_ok(script);
}

/// OUTPUT_ARGS, read as the evaluator reads it: distinct argument indices, on a GPU task
/// only (a CPU kernel's arguments never come back); an index make_inputs gives no tensor
/// for is the harness's error, named; LAUNCH (a bare Triton kernel returns nothing) needs it.
#[test]
fn outputs_written_into_arguments_are_distinct_indices_of_a_gpu_task() {
    let script = r#"
import sys, types
sys.path.insert(0, sys.argv[1])
import harness
def m(**kw):
    return types.SimpleNamespace(**kw)
assert harness.output_args(m(), "h.py", "cpu") is None
assert harness.output_args(m(OUTPUT_ARGS=(4, 5)), "h.py", "cuda") == (4, 5)
assert harness.output_args(m(OUTPUT_ARGS=[0]), "h.py", "cuda") == (0,)
for bad in ((), (1, 1), (-1,), ("0",), 0, (True,)):
    try:
        harness.output_args(m(OUTPUT_ARGS=bad), "h.py", "cuda")
    except ValueError as e:
        assert str(e).startswith("h.py: OUTPUT_ARGS must be"), e
    else:
        raise AssertionError(f"{bad!r} was taken")
try:
    harness.output_args(m(OUTPUT_ARGS=(0,)), "h.py", "cpu")
except ValueError as e:
    assert "needs a GPU task; this one runs on cpu" in str(e), e
else:
    raise AssertionError("a CPU task's OUTPUT_ARGS was taken")
h = types.SimpleNamespace(output_args=(2,), path="h.py")
try:
    harness.Harness.check_output_args(h, (1, 2))
except ValueError as e:
    assert str(e) == "h.py: OUTPUT_ARGS names argument 2, which is not a tensor of the 2 arguments make_inputs gives", e
else:
    raise AssertionError("a missing argument was taken")
import os, tempfile
d = tempfile.mkdtemp()
body = "SOURCE='k.py'\nENTRY='k'\nTEST_SHAPES=[1]\nDEVICE='cuda'\nLAUNCH=True\nKERNEL_PART=True\ndef make_inputs(c, s): pass\ndef reference(*a): pass\n"
open(os.path.join(d, "h.py"), "w").write(body)
try:
    harness.Harness(os.path.join(d, "h.py"))
except ValueError as e:
    assert "LAUNCH (ENTRY a bare Triton kernel, which returns nothing) needs OUTPUT_ARGS" in str(e), e
else:
    raise AssertionError("LAUNCH without OUTPUT_ARGS was taken")
open(os.path.join(d, "h2.py"), "w").write(body + "OUTPUT_ARGS=(2,)\n")
h = harness.Harness(os.path.join(d, "h2.py"))
assert (h.launch, h.kernel_part, h.output_args) == (True, True, (2,))
print("ok")
"#;
    assert_prints_ok(script);
}

/// The kernels' output allocations the evaluator opened: none is closed while a batch's
/// outputs are read, however many it spans (600 here, past the limit of 512); those kept
/// are closed before the next batch, and each handle is opened once while kept.
#[test]
fn a_batchs_output_mappings_stay_open_while_it_is_read() {
    let script = r#"
import sys
sys.path.insert(0, sys.argv[1])
import mappings
class Driver:
    def __init__(self):
        self.live, self.opens = set(), 0
    def open(self, h):
        self.opens += 1
        self.live.add(h)
        return h
    def close(self, p):
        self.live.remove(p)
cu = Driver()
m = mappings.Mappings(cu)
m.begin_batch()
for i in range(600):
    assert m.open(f"h{i}") == f"h{i}"
assert len(cu.live) == 600, "a mapping of the batch was closed while it was read"
assert m.open("h0") == "h0" and cu.opens == 600
m.begin_batch()
assert not cu.live and not m.opened
m.open("a"); m.begin_batch()
assert cu.live == {"a"}
m.close_all()
assert not cu.live
print("ok")
"#;
    assert_prints_ok(script);
}

/// The zygote started before the harness is loaded: the modules read from the harness's
/// text, kept only where they are the ones picked once it is loaded; a job without a
/// zygote, or a guess that differs, closes it.
#[test]
fn an_early_zygote_is_kept_only_where_its_guess_was_right() {
    let script = r#"
import os, sys, tempfile, types
sys.path.insert(0, sys.argv[1])
import evaluate as ev
d = tempfile.mkdtemp()
def h(text):
    p = os.path.join(d, "h.py")
    with open(p, "w") as f:
        f.write(text)
    return p
assert ev.modules_named(h("x = 1\n"), True) == []
assert ev.modules_named(h("PRELOAD = ['json']\nimport torch\n"), True) == ["json"]
assert ev.modules_named(h("import torch.nn\nDEVICE = 'cpu'\n"), True) == ["torch"]
both = "PRELOAD = ['json', 'triton']\nDEVICES = ['cuda', 'cpu']\n"
assert ev.modules_named(h(both), False) == ["json"]
assert ev.modules_named(h(both), True) == ["json", "triton"]
# On a GPU the evaluator's set-up imports PyTorch whatever the harness imports.
gpu = ev.modules_named(h("DEVICE = 'cuda'\n"), True)
assert gpu[0] == "torch" and gpu[1:] in ([], ["triton"]), gpu
assert ev.modules_named(h("DEVICES = ['rocm']\n"), True) is None
assert ev.modules_named(h("def f(:\n"), True) is None
job = {"roles": ["baseline"], "scratch": {"baseline": d}, "pass_env": []}
harness = types.SimpleNamespace(module=types.SimpleNamespace(PRELOAD=["json"]), device="cpu")
env = ev.zygote_env(job)
early = ev.Zygote(["json"], env)
assert ev.zygote_for(job, harness, early) is early
wrong = ev.Zygote([], env)
z = ev.zygote_for(job, harness, wrong)
assert z is not wrong and z.modules == ["json"] and wrong.proc.poll() is not None
z.ready()
assert z.loaded == ["json"] and z.failed == []
unwanted = ev.Zygote(["json"], env)
assert ev.zygote_for(dict(job, zygote=False), harness, unwanted) is None
assert unwanted.proc.poll() is not None
for x in (early, z):
    x.close()
print("ok")
"#;
    assert_prints_ok(script);
}

/// The evaluator's codec, run by python3: a GPU batch's answer of thousands of output
/// descriptors (2.5 MB) crosses a pipe; one past the limit is refused on both sides.
#[test]
fn a_large_answer_crosses_and_one_past_the_limit_is_refused() {
    let script = r#"
import os, sys, threading
sys.path.insert(0, sys.argv[1])
import wire
r, w = os.pipe()
item = {"handle": "ab" * 64, "offset": 512, "shape": [64, 4096], "stride": [4096, 1], "dtype": "float16"}
msg = {"outputs": [{"tuple": True, "items": [item, item]}] * 4096}
def send():
    try:
        wire.send(w, msg)
    except Exception as e:
        print("not sent:", e)
        os.close(w)  # the reader sees the end, not a hang
t = threading.Thread(target=send); t.start()
assert wire.recv(r) == msg
t.join()
try:
    wire.send(w, {"x": "y" * (17 << 20)})
    print("sent")
except wire.WireError as e:
    print("refused:", e)
"#;
    let o = python_on_evaluator(script);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{out}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(out.starts_with("refused: message of"), "{out}");
}

#[test]
fn a_job_names_each_kernel_its_user_and_scratch() {
    let j = Job::new(
        "./scripts/h.py",
        &[BASELINE, CANDIDATE],
        &crate::GateTimeouts::default(),
        vec![44],
    );
    let v = serde_json::to_value(&j).unwrap();
    assert_eq!(v["harness"], "/arena/harness/task/scripts/h.py");
    assert_eq!(v["roles"], serde_json::json!(["baseline", "candidate"]));
    // The compiled original's user: its own scratch, the original's sources.
    assert_eq!(v["users"]["compiled"]["uid"], 60003);
    assert_eq!(v["scratch"]["compiled"], "/scratch/60003");
    assert_eq!(v["kernels"]["compiled"], v["kernels"]["baseline"]);
    assert_eq!(v["users"]["candidate"]["uid"], 60002);
    assert_eq!(v["scratch"]["baseline"], "/scratch/60001");
    assert_eq!(v["kernels"]["candidate"], "/arena/kernel/60002");
    assert!(v.get("hidden").is_none());
    // GPU batches are timed by graph replay unless a job says otherwise (measure.py
    // reads `perf.graphs`).
    assert_eq!(v["perf"]["graphs"], true);
    assert_eq!(v["perf"]["pairs"], 10);
}

/// The batch size a case's kernels share: the baseline's and candidate's larger size, at most
/// 4x the smaller; an optional kernel (the compiled baseline) never sets it and takes it where
/// it can (at most 4x its own).
#[test]
fn a_cases_kernels_share_one_batch_size_set_by_the_two_judged() {
    let script = r#"
import sys
sys.path.insert(0, sys.argv[1])
from measure import Session
c = Session._common_calls
main = ["baseline", "candidate"]
assert c({"baseline": 1890, "candidate": 4096}, main) == {"baseline": 4096, "candidate": 4096}
assert c({"baseline": 4096, "candidate": 100}, main) == {"baseline": 400, "candidate": 400}
assert c({"baseline": 4096, "compiled": 300, "candidate": 4096}, main) == {"baseline": 4096, "compiled": 1200, "candidate": 4096}
assert c({"baseline": 50}, ["baseline"]) == {"baseline": 50}
print("ok")
"#;
    assert_prints_ok(script);
}

/// A reference that writes its answer into an output argument (OUTPUT_ARGS) writes into a
/// copy: the arguments the kernel is given are as make_inputs made them.
#[test]
fn a_reference_never_writes_into_what_the_kernel_is_given() {
    let script = r#"
import sys, types
sys.path.insert(0, sys.argv[1])
from measure import Session
class Tensor:
    def __init__(self, v):
        self.v = list(v)
    def clone(self):
        return Tensor(self.v)
def reference(x, out):
    out.v[:] = x.v
    return Tensor(x.v)
h = types.SimpleNamespace(
    make_inputs=lambda shape, seed: (Tensor([seed % 7, 1]), Tensor([0, 0])),
    reference=reference, output_args=(1,), device="cuda", path="h.py",
    check_output_args=lambda args: None,
)
s = Session(h, None, [((2,), "visible")], b"secret", {"timeouts": {"performance": 1}}, False)
args, want = s.fresh(0, "correctness")
assert args[1].v == [0, 0], "the reference wrote into the kernel's output argument"
assert want.v == args[0].v
print("ok")
"#;
    assert_prints_ok(script);
}

/// A reference that changes an input in place (a KernelBench forward with `x.relu_()`) would
/// hand the kernel its answer as its input: the kernel gets the inputs as make_inputs made
/// them, and every later reference of that configuration gets copies.
#[test]
fn a_reference_that_changes_its_inputs_never_hands_them_to_the_kernel() {
    let script = r#"
import sys, types
sys.path.insert(0, sys.argv[1])
from measure import Session
class Tensor:
    def __init__(self, v):
        self.v = list(v)
    def clone(self):
        return Tensor(self.v)
    def __eq__(self, other):
        return self.v == other.v
seen = []
def reference(x):
    seen.append(x)
    out = Tensor([abs(a) for a in x.v])
    x.v[:] = out.v  # in place, as relu_ would
    return out
h = types.SimpleNamespace(
    make_inputs=lambda shape, seed: (Tensor([-(seed % 7) - 1, 2]),),
    reference=reference, output_args=None, device="cuda", path="h.py",
)
s = Session(h, None, [((2,), "visible")], b"secret", {"timeouts": {"performance": 1}}, False)
for k in range(3):
    args, want = s.fresh(0, "correctness")
    assert args[0].v[0] < 0, f"call {k}: the kernel's input is the reference's answer: {args[0].v}"
    assert want.v[0] == -args[0].v[0]
assert seen[1] is not None and all(x.v[0] > 0 for x in seen)
assert [w for w in s.warnings if w.startswith("reference_mutates_inputs")], s.warnings
# A reference that leaves its inputs alone gets them as they are (no copy).
h2 = types.SimpleNamespace(make_inputs=h.make_inputs, reference=lambda x: Tensor(x.v), output_args=None, device="cuda", path="h.py")
seen2 = []
def ref2(x):
    seen2.append(x)
    return Tensor(x.v)
h2.reference = ref2
s2 = Session(h2, None, [((2,), "visible")], b"secret", {"timeouts": {"performance": 1}}, False)
for k in range(2):
    args, _ = s2.fresh(0, "correctness")
    assert seen2[-1] is args[0]
assert not s2.warnings
print("ok")
"#;
    assert_prints_ok(script);
}

/// A kernel's helper whose first thread calls `exit` while another thread runs shows as a
/// zombie (state Z) and keeps running: it is stopped with the rest of its user's processes,
/// and killed with them. Needs root (the helper takes a user of its own).
#[test]
fn a_helper_that_looks_like_a_zombie_is_stopped_and_killed() {
    let script = r#"
import ctypes, os, sys, threading, time
sys.path.insert(0, sys.argv[1])
import jail
UID = 60077
pid = os.fork()
if pid == 0:
    os.setgid(UID); os.setuid(UID)
    def spin():
        while True:
            pass
    threading.Thread(target=spin, daemon=True).start()
    ctypes.CDLL(None).syscall(60, 0)  # SYS_exit: this thread only; the spinner goes on
    os._exit(1)
def ticks(tid):
    f = open(f"/proc/{pid}/task/{tid}/stat").read().rsplit(")", 1)[1].split()
    return f[0], int(f[11]) + int(f[12])
def check():
    end = time.time() + 10
    while jail._state(pid) != "Z" and time.time() < end:
        time.sleep(0.01)
    assert jail._state(pid) == "Z", jail._state(pid)
    live = [t for t in os.listdir(f"/proc/{pid}/task") if ticks(t)[0] not in "ZX"]
    assert live, "no thread of the helper runs"
    assert jail.pids_of(UID) == [pid], jail.pids_of(UID)
    assert jail.freeze(UID), "the helper could not be stopped"
    state, before = ticks(live[0])
    time.sleep(0.3)
    state2, after = ticks(live[0])
    assert state2 in "Tt" and after == before, (state, state2, before, after)
    jail.thaw(UID)
    time.sleep(0.3)
    assert ticks(live[0])[1] > after, "thawed, the helper does not run again"
    assert jail.kill_all(UID), "the helper outlived kill_all"

try:
    check()
finally:
    # Whatever failed above, the spinner must not outlive the test (it holds its output).
    try:
        os.kill(pid, 9)
    except ProcessLookupError:
        pass
assert not jail.pids_of(UID)
print("ok")
"#;
    assert_prints_ok(script);
}

/// The end of a GPU batch as the evaluator establishes it (samples.py), with the device's read
/// stood in for: the sampled words lie in the calls' outputs, drawn from the evaluator's secret
/// (the same secret, the same places); a batch whose sampled words are what they were when the
/// reply came passes, and one whose work went on after its answer (a word changed by the time
/// the outputs were checked) fails as deferred work.
#[test]
fn a_batch_whose_outputs_change_after_its_answer_fails_as_deferred_work() {
    let script = r#"
import random, sys, types
sys.path.insert(0, sys.argv[1])
from samples import Samples
from gpu_errors import DeferredWork
memory = {}
class Guard:
    own_word = 8
    def gather(self, addrs):
        return [memory.get(a, 0) for a in addrs]
class Data:
    guard = Guard()
    state = {"k": {"layout": [{"offset": 0, "bytes": 400}, {"offset": 512, "bytes": 64}], "slot_bytes": 1024}}
    maps = types.SimpleNamespace(begin_batch=lambda: None)
    def _slot_base(self, st, slot):
        return 1 << 20 | slot * st["slot_bytes"]
    def described(self, kernel, d, call):
        return None, d["addr"], d["bytes"]
k = types.SimpleNamespace(role="k")
calls = [{"slot": i} for i in range(50)]
def plan(seed, output_args=(1,), described=None):
    return Samples(Data(), 64).plan(k, calls, described, random.Random(seed), output_args)
p = plan(1)
assert p["addrs"] == plan(1)["addrs"] and p["addrs"] != plan(2)["addrs"], "the places follow the secret"
assert len(p["addrs"]) == 64 and all(a % 4 == 0 for a in p["addrs"])
slots = {(a - (1 << 20)) // 1024 for a in p["addrs"]}
assert all(512 <= (a - (1 << 20)) % 1024 < 576 for a in p["addrs"]), "only the output argument is sampled"
assert len(slots) > 20, "the sample spreads over the calls"
for a in p["addrs"]:
    memory[a] = 7
s = Samples(Data(), 64)
s.probe(k, p, {})
s.confirm(p)  # nothing changed: the batch stands
memory[p["addrs"][5]] = 8  # written after the answer
try:
    s.confirm(p)
    raise SystemExit("a changed word went unnoticed")
except DeferredWork as e:
    assert "1 of 64" in str(e), e
# An eagerly run batch: the places come with the reply, inside the window.
reply = {"outputs": [{"items": [{"addr": 4096 * (i + 1), "bytes": 10}, {"value": 3}]} for i in range(50)]}
e = plan(3, output_args=None)
assert e["addrs"] is None
s.probe(k, e, reply)
assert all(4096 <= a and a % 4096 < 10 for a in e["addrs"]), e["addrs"]
# Outputs that are values only: the read still runs (it waits behind a busy device), on a word of ours.
v = plan(4, output_args=None)
s.probe(k, v, {"outputs": [{"items": [{"value": 1}]} for _ in calls]})
assert v["addrs"] == [] and v["words"] == [0]
s.confirm(v)
print("ok")
"#;
    assert_prints_ok(script);
}

/// A CPU task's image may have no ctypes (Debian's python3-minimal): every module a CPU
/// evaluation loads imports without it (the GPU's watch, which needs it, is loaded only on a GPU).
#[test]
fn a_cpu_evaluation_needs_no_ctypes() {
    let script = r#"
import sys
sys.modules["ctypes"] = None
sys.modules["_ctypes"] = None
sys.path.insert(0, sys.argv[1])
import data, evaluate, harness, kernel, measure, samples, zygote
print("ok")
"#;
    assert_prints_ok(script);
}

/// The device watch's verdict (gpu_guard.Watch.busy), on the figures measured on an H100: an
/// idle device's gaps (up to 20 us) and late starts pass; a gap of another context's smallest
/// kernel (296 us) or a stop held up by one (2.2 ms) does not.
#[test]
fn the_watch_tells_another_contexts_work_from_an_idle_device() {
    let script = r#"
import sys
sys.path.insert(0, sys.argv[1])
from gpu_guard import Watch
def w(gap, start, stop):
    return Watch(gap * 1000, 30e6, 20000, 0, 0, start / 1e6, stop / 1e6)
assert w(20, 231, 30).busy(100, 1000) is None
assert "gap of 296 us" in w(296, 60, 20).busy(100, 1000)
assert "stopped 2179 us late" in w(9, 249, 2179).busy(100, 1000)
print("ok")
"#;
    assert_prints_ok(script);
}

/// The kernel process's cut of a kernel-and-tests file (entry.py, KERNEL_PART) is
/// arena_task::split's: the same part for a rule of the format's length, one of the least
/// length, a banner with words (no rule), a rule too short, trailing spaces, and no rule.
#[test]
fn the_kernel_process_cuts_a_split_file_where_arena_task_does() {
    let rule = "#".repeat(146);
    let least = "#".repeat(arena_task::split::RULE_MIN);
    let short = "#".repeat(arena_task::split::RULE_MIN - 1);
    let texts = [
        format!("import triton\ndef k(): pass\n{rule}\nimport pytest\n"),
        format!("k = 1\n{least}\ntests\n"),
        "########## Imports ##########\nk = 1\n".to_string(),
        format!("k = 1\n{short}\ntests\n"),
        format!("k = 1\n{rule}   \ntests\n{rule}\nmore\n"),
        "k = 1\nno rule\n".to_string(),
    ];
    let d = tempfile::tempdir().unwrap();
    for (i, t) in texts.iter().enumerate() {
        std::fs::write(d.path().join(format!("{i}.py")), t).unwrap();
    }
    let script = format!(
        r#"
import sys, json
sys.path.insert(0, sys.argv[1])
import entry
print(json.dumps([entry.kernel_part(open(f"{dir}/{{i}}.py").read()) for i in range({n})]))
"#,
        dir = d.path().display(),
        n = texts.len()
    );
    let o = python_on_evaluator(&script);
    let got: Vec<String> = serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&o.stderr)));
    let want: Vec<String> = texts
        .iter()
        .map(|t| arena_task::split::kernel_part(t).to_string())
        .collect();
    assert_eq!(got, want);
    assert_eq!(want[0], "import triton\ndef k(): pass\n");
}

/// The deadline's alarm fires wherever the evaluator is: inside the `except Exception` that
/// makes a harness's check error a failed check, or an optional kernel's failure a dropped
/// kernel, it stays the deadline (a request out of time was once answered with failed gates).
/// The gate runner's deadline is no Exception either (its floor probe catches those).
#[test]
fn the_deadline_is_never_taken_for_a_failed_gate() {
    let script = r#"
import signal, sys, time, types
sys.path.insert(0, sys.argv[1])
import evaluate, gates
from measure import CheckFailed, Session
signal.signal(signal.SIGALRM, evaluate._deadline)
def slow(*_):
    time.sleep(5)
h = types.SimpleNamespace(check=slow, device="cpu")
s = Session(h, None, [((2,), "visible")], b"secret", {"timeouts": {"correctness": 1}}, False)
s.data = types.SimpleNamespace(forget=lambda k: None)
optional = types.SimpleNamespace(optional=True, role="compiled")
for name, call in (
    ("the harness's check", lambda: s.check(1, 2, "shape (2,)")),
    ("an optional kernel's step", lambda: s._guarded(optional, {"dropped": {}}, slow)),
):
    signal.setitimer(signal.ITIMER_REAL, 0.05)
    t = time.monotonic()
    try:
        call()
    except evaluate.Deadline:
        assert time.monotonic() - t < 4, name
    except CheckFailed as e:
        raise AssertionError(f"{name}: the deadline became a failed check: {e}")
    else:
        raise AssertionError(f"{name}: the deadline was swallowed")
for d in (evaluate.Deadline, gates.Deadline):
    assert not issubclass(d, Exception), d
print("ok")
"#;
    assert_prints_ok(script);
}

/// The alarm that fires while an evaluation closes its kernel processes waits until every one
/// is closed, and is the evaluation's answer then: none is left running, none of its
/// descriptors open, for the next evaluation of a warm evaluator.
#[test]
fn a_deadline_while_kernels_close_lets_every_one_close_first() {
    let script = r#"
import signal, sys, time, types
sys.path.insert(0, sys.argv[1])
import evaluate
signal.signal(signal.SIGALRM, evaluate._deadline)
closed = []
class Kernel:
    def __init__(self, role, job, env, zygote):
        self.role = role
    def freeze(self):
        pass
    def request(self, msg, timeout):
        raise RuntimeError("the kernel's load failed")
    def close(self):
        time.sleep(0.3)
        closed.append(self.role)
evaluate.Kernel = Kernel
h = types.SimpleNamespace(compiled_baseline=None, source="k.py", entry="f", device="cpu",
                          output_args=(), kernel_part=False, launch=False)
job = {"kernels": {"original": "/o", "candidate": "/c"}, "timeouts": {"compile": 1},
       "scratch": {"original": "/tmp", "candidate": "/tmp"}}
signal.setitimer(signal.ITIMER_REAL, 0.1)
try:
    evaluate.run_gates(job, h, None, [((2,), "visible")], False, ["original", "candidate"],
                       "/nonexistent", None, {})
except evaluate.Deadline:
    pass
else:
    raise AssertionError("the deadline was not the answer")
assert closed == ["original", "candidate"], closed
print("ok")
"#;
    assert_prints_ok(script);
}
