//! arena's trusted evaluator as the runner installs it into an evaluator container: the
//! Python files (embedded in this binary, so their digest is part of every result), where
//! each thing is inside the container, and the job that tells the evaluator what to do.
//!
//! Inside the container the evaluator runs as root with only the capabilities to start
//! processes as other users and to stop them; each kernel runs as a user of its own. The
//! task's harness is a private copy under [`HARNESS_ROOT`] (root-only), the kernels get only
//! their declared sources under [`KERNELS`], `/task` of the image is hidden behind an empty
//! file system, and the reports go to [`crate::layout::OUT_DIR`], which only root may write.

use std::path::Path;

use arena_digest::Digest;
use serde::Serialize;

/// Where the evaluator's files are (read-only).
pub const DIR: &str = "/arena/trusted";
/// The job (read-only).
pub const JOB: &str = "/arena/job.json";
/// A root-only directory holding `task/`, the private copy of the task's harness.
pub const HARNESS_ROOT: &str = "/arena/harness";
/// `KERNELS/<role>/`: the kernel's declared sources (read-only).
pub const KERNELS: &str = "/arena/kernel";
/// `SCRATCH/<role>`: a small file system only that kernel's user may write.
pub const SCRATCH: &str = "/scratch";
/// The task's hidden unseen configurations (root-only), in unseen evaluations.
pub const HIDDEN: &str = "/arena/hidden/task.json";
/// A warm evaluator's directory (root-only): its socket, where the runner connects.
pub const CTL: &str = "/arena/ctl";
/// The warm evaluator's socket, in [`CTL`].
pub const SOCKET: &str = "evaluator.sock";

/// A kernel process: its role and the user it runs as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Role {
    pub name: &'static str,
    pub uid: u32,
}

pub const BASELINE: Role = Role {
    name: "baseline",
    uid: 60001,
};
pub const CANDIDATE: Role = Role {
    name: "candidate",
    uid: 60002,
};
/// The original compiled by torch.compile, a second baseline timed beside the two kernels
/// of a paired evaluation where the task's harness declares one (COMPILED_BASELINE:
/// KernelBench's torch.compile column). A user of its own, so that the evaluator stops,
/// times and cleans it up apart from the eager original; it reads the original's sources.
pub const COMPILED: Role = Role {
    name: "compiled",
    uid: 60003,
};

/// The users an evaluator of `roles` has: the roles, and where they are the two of a paired
/// evaluation, [`COMPILED`] (used only where the harness declares a compiled baseline).
pub fn users_of(roles: &[Role]) -> Vec<Role> {
    let mut users = roles.to_vec();
    if roles.contains(&BASELINE) && roles.contains(&CANDIDATE) {
        users.push(COMPILED);
    }
    users
}

macro_rules! files {
    ($($name:literal),* $(,)?) => {
        /// The evaluator's files: (name, content).
        pub const FILES: &[(&str, &str)] = &[
            $(($name, include_str!(concat!("../trusted/arena_trusted/", $name))),)*
        ];
    };
}

files!(
    "child.py",
    "clean.py",
    "data.py",
    "evaluate.py",
    "floor.py",
    "gates.py",
    "gpu.py",
    "harness.py",
    "jail.py",
    "kernel.py",
    "measure.py",
    "serve.py",
    "wire.py",
    "zygote.py",
);

/// The digest of the evaluator's code: every file, by name, in name order.
pub fn digest() -> Digest {
    use sha2::Digest as _;
    let mut h = sha2::Sha256::new();
    h.update(b"arena.trusted-evaluator.v1\n");
    for (name, text) in FILES {
        h.update((name.len() as u64).to_le_bytes());
        h.update(name.as_bytes());
        h.update((text.len() as u64).to_le_bytes());
        h.update(text.as_bytes());
    }
    Digest::from_sha256(h.finalize().into())
}

/// Writes the evaluator's files into `dir` (created), readable by all, writable by none.
pub fn install(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::create_dir_all(dir)?;
    for (name, text) in FILES {
        let p = dir.join(name);
        std::fs::write(&p, text)?;
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o444))?;
    }
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o555))
}

#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Ids {
    pub uid: u32,
    pub gid: u32,
}

/// How performance is measured.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct PerfSettings {
    /// Pairs of batches (one of each kernel, in random order) per configuration.
    pub pairs: u32,
    /// A batch holds as many calls as take about this long (so that the evaluator's round
    /// trip is a small part of it).
    pub target_batch_ms: f64,
    pub max_calls: u32,
    pub warmup_batches: u32,
    /// GPU kernels: each timed batch is captured as a CUDA graph (before its inputs are
    /// written) and replayed in the timed window, so the time is the GPU's and not the
    /// Python launch path's. A case where either kernel cannot be captured is timed eagerly,
    /// both kernels alike, and says why.
    pub graphs: bool,
    /// CPU kernels: the pairs are spread over this many sessions, each with fresh processes
    /// of both kernels, because a process's own speed (where its memory landed) differs from
    /// the next one's by a few percent for identical code: one process pair is one sample of
    /// that, however many batches it times. The interval is then over sessions. GPU batches
    /// are replayed graphs timed by the device, in one session.
    pub sessions: u32,
}

impl Default for PerfSettings {
    fn default() -> Self {
        PerfSettings {
            pairs: 10,
            target_batch_ms: 20.0,
            max_calls: 4096,
            warmup_batches: 2,
            graphs: true,
            sessions: 10,
        }
    }
}

/// What the evaluator is asked to do (`/arena/job.json`).
#[derive(Debug, Clone, Serialize)]
pub struct Job {
    /// The harness module, inside the container.
    pub harness: String,
    /// The kernels, in order: the last is the one the gates judge.
    pub roles: Vec<&'static str>,
    pub kernels: std::collections::BTreeMap<&'static str, String>,
    pub users: std::collections::BTreeMap<&'static str, Ids>,
    pub scratch: std::collections::BTreeMap<&'static str, String>,
    /// Supplementary groups of the kernel processes (the GPU's device groups).
    pub groups: Vec<u32>,
    pub timeouts: std::collections::BTreeMap<&'static str, u64>,
    /// Fresh inputs per configuration in the correctness gate.
    pub trials: u32,
    pub perf: PerfSettings,
    pub out: String,
    /// The hidden configurations, in unseen evaluations.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hidden: Option<String>,
    /// Judge each configuration for each kernel (unseen evaluations).
    pub unseen: bool,
    /// The kernel processes' output goes nowhere (a kernel given hidden configurations
    /// could print them).
    pub quiet_kernels: bool,
    /// Environment variables the kernel processes get from the container's (GPU selection).
    pub pass_env: Vec<String>,
    /// Whether the container has a GPU: a harness that runs on several devices (DEVICES)
    /// is evaluated on the GPU where there is one, else on the CPU.
    pub accelerator: bool,
    /// Seconds after which the evaluator stops everything and ends, whoever is watching (a
    /// warm evaluator: each evaluation's default deadline).
    pub deadline_s: u64,
    /// A warm evaluator (serve.py): the socket it listens on for the runner's requests.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub serve: Option<String>,
    /// A warm evaluator: how long it waits for the runner to connect.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub connect_s: Option<u64>,
    /// A warm evaluator: the roles whose scratch outlives an evaluation (the original's
    /// compile caches); every other role's is emptied after each.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub keep_scratch: Vec<&'static str>,
    /// A warm evaluator: the roles whose kernel process outlives an evaluation that ended
    /// well (the original's: the task's own code; only the candidate's must be new).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub keep_processes: Vec<&'static str>,
}

impl Job {
    /// A job for `roles` (BASELINE alone, or BASELINE then CANDIDATE) on the task whose
    /// trusted harness is `harness_rel`.
    pub fn new(
        harness_rel: &str,
        roles: &[Role],
        timeouts: &crate::GateTimeouts,
        groups: Vec<u32>,
    ) -> Job {
        let mut kernels = std::collections::BTreeMap::new();
        let mut users = std::collections::BTreeMap::new();
        let mut scratch = std::collections::BTreeMap::new();
        for r in users_of(roles) {
            // Directories named by user: the two kernels' paths (and environments) are the
            // same length, so that neither process is laid out differently for it. The
            // compiled original reads the original's.
            let sources = if r == COMPILED { BASELINE.uid } else { r.uid };
            kernels.insert(r.name, format!("{KERNELS}/{sources}"));
            users.insert(
                r.name,
                Ids {
                    uid: r.uid,
                    gid: r.uid,
                },
            );
            scratch.insert(r.name, format!("{SCRATCH}/{}", r.uid));
        }
        Job {
            harness: format!(
                "{HARNESS_ROOT}/task/{}",
                harness_rel.trim_start_matches("./")
            ),
            roles: roles.iter().map(|r| r.name).collect(),
            kernels,
            users,
            scratch,
            groups,
            timeouts: [
                ("compile", timeouts.compile),
                ("correctness", timeouts.correctness),
                ("performance", timeouts.performance),
            ]
            .into(),
            trials: 2,
            perf: PerfSettings::default(),
            out: crate::layout::OUT_DIR.to_string(),
            hidden: None,
            unseen: false,
            quiet_kernels: false,
            pass_env: vec![
                "CUDA_VISIBLE_DEVICES".into(),
                "ROCR_VISIBLE_DEVICES".into(),
                "HIP_VISIBLE_DEVICES".into(),
                "LD_LIBRARY_PATH".into(),
                "NVIDIA_VISIBLE_DEVICES".into(),
            ],
            deadline_s: timeouts.total(),
            accelerator: true,
            serve: None,
            connect_s: None,
            keep_scratch: Vec::new(),
            keep_processes: Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
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
}
