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

/// Every module of the evaluator's directory is one the runner installs: a module left out of
/// FILES is missing in every container, and the evaluator fails there on its import.
#[test]
fn every_module_of_the_evaluator_is_installed() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/trusted/arena_trusted");
    let mut on_disk: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".py"))
        .collect();
    on_disk.sort();
    let listed: Vec<&str> = FILES.iter().map(|(n, _)| *n).collect();
    assert_eq!(on_disk, listed, "trusted.rs's files! list, against {dir}");
}

/// The words the runner keeps of a hidden configuration's failure are the evaluator's own
/// kinds, and the evaluator's kinds are those.
#[test]
fn the_hidden_kinds_are_the_evaluators() {
    let script = r#"
import json, sys
sys.path.insert(0, sys.argv[1])
import admits, outcomes
print(json.dumps(list(outcomes.KINDS) + list(admits.UNCREDITED)))
"#;
    let o = python_on_evaluator(script);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let kinds: Vec<String> = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(kinds, HIDDEN_KINDS);
}

/// A harness's COMPILED_BASELINE, read by python3 as the evaluator reads it: torch.compile's
/// keyword arguments as plain data, or refused naming the harness; absent, no baseline.
/// `script` run by python3 with the evaluator's files installed in the directory its first
/// argument names.
pub(super) fn python_on_evaluator(script: &str) -> std::process::Output {
    let d = tempfile::tempdir().unwrap();
    install(&d.path().join("t")).unwrap();
    std::process::Command::new("python3")
        .args(["-I", "-c", script])
        .arg(d.path().join("t"))
        .output()
        .unwrap()
}

/// `script` (python_on_evaluator) prints `ok` and nothing else.
pub(super) fn assert_prints_ok(script: &str) {
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
/// outputs are read, however many it spans (2 100 here, past the limit of 2 048); each handle
/// is opened once while kept, and too many kept for a kernel says so (GpuData.after closes
/// that kernel's then, after the batch's outputs were checked).
#[test]
fn a_batchs_output_mappings_stay_open_while_it_is_read() {
    let script = r#"
import sys, types
sys.path.insert(0, sys.argv[1])
import mappings
class Driver:
    def __init__(self):
        self.live, self.opens = set(), 0
    def open(self, h):
        self.opens += 1
        self.live.add(f"{h}#{self.opens}")
        return f"{h}#{self.opens}"
    def close(self, p):
        self.live.remove(p)
cu = Driver()
m = mappings.Mappings(cu)
k = types.SimpleNamespace(role="candidate", received={})
other = types.SimpleNamespace(role="baseline", received={})
m.open(k, "a")
m.open(other, "a")
assert not m.too_many(k)
for i in range(2100):
    assert m.open(k, f"h{i}") == f"h{i}#{i + 3}"
assert len(cu.live) == 2102, "a mapping of the batch was closed while it was read"
assert m.open(k, "h0") == "h0#3" and cu.opens == 2102
assert m.too_many(k) and not m.too_many(other)
m.close("candidate")
assert not m.too_many(k) and cu.live == {"a#2"}, "only that kernel's are closed"
m.close_all()
assert not cu.live and not m.opened
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
import evaluation as ev
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
from timing import common_calls as c
main = ["baseline", "candidate"]
assert c({"baseline": 1890, "candidate": 4096}, main) == {"baseline": 4096, "candidate": 4096}
assert c({"baseline": 4096, "candidate": 100}, main) == {"baseline": 400, "candidate": 400}
assert c({"baseline": 4096, "compiled": 300, "candidate": 4096}, main) == {"baseline": 4096, "compiled": 1200, "candidate": 4096}
assert c({"baseline": 50}, ["baseline"]) == {"baseline": 50}
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
import deadline, evaluation, gates
from measure import CheckFailed, Session
from perf_settings import PerfSettings
deadline.install("the evaluator")
def slow(*_):
    time.sleep(5)
h = types.SimpleNamespace(check=slow, device="cpu")
s = Session(h, None, [((2,), "visible")], b"secret", {"timeouts": {"correctness": 1}, "perf": PerfSettings()}, False)
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
    except evaluation.Deadline:
        assert time.monotonic() - t < 4, name
    except CheckFailed as e:
        raise AssertionError(f"{name}: the deadline became a failed check: {e}")
    else:
        raise AssertionError(f"{name}: the deadline was swallowed")
assert evaluation.Deadline is gates.Deadline, "one Deadline for every module"
assert not issubclass(evaluation.Deadline, Exception)
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
import deadline, evaluation
from perf_settings import PerfSettings
deadline.install("the evaluator")
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
evaluation.Kernel = Kernel
h = types.SimpleNamespace(compiled_baseline=None, source="k.py", entry="f", device="cpu",
                          output_args=(), kernel_part=False, launch=False)
job = {"kernels": {"original": "/o", "candidate": "/c"}, "timeouts": {"compile": 1},
       "scratch": {"original": "/tmp", "candidate": "/tmp"}, "perf": PerfSettings()}
signal.setitimer(signal.ITIMER_REAL, 0.1)
try:
    evaluation.run_gates(job, h, None, [((2,), "visible")], False, ["original", "candidate"],
                       "/nonexistent", None, {})
except evaluation.Deadline:
    pass
else:
    raise AssertionError("the deadline was not the answer")
assert closed == ["original", "candidate"], closed
print("ok")
"#;
    assert_prints_ok(script);
}

/// The evaluator's own scratch (a job's `own_scratch`) becomes its HOME, TMPDIR and Triton's
/// cache before anything is loaded: a derived harness compiles the task's original in the
/// evaluator, whose container root is read-only. A job run outside a container has none, and
/// the environment is left as it is.
#[test]
fn the_evaluator_writes_only_into_its_own_scratch() {
    let script = r#"
import os, sys, tempfile
sys.path.insert(0, sys.argv[1])
import evaluation as ev
before = dict(os.environ)
assert ev.use_own_scratch({}) is None
assert dict(os.environ) == before
assert ev.use_own_scratch({"own_scratch": "/proc/1"}).startswith("not writable")
own = tempfile.mkdtemp()
assert ev.use_own_scratch({"own_scratch": own}) == "writable"
assert os.environ["HOME"] == own and os.environ["TMPDIR"] == own
assert os.environ["TRITON_CACHE_DIR"] == os.path.join(own, ".triton")
assert tempfile.gettempdir() == own
print("ok")
"#;
    assert_prints_ok(script);
}
