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
/// The evaluator's own file system (root only): its HOME, TMPDIR and Triton's cache, where a
/// derived harness compiles the task's original kernel in the evaluator (the container's
/// root is read-only; found on an H200, where every derived harness was refused with
/// "Read-only file system: '/root/.triton'").
pub const EVALUATOR_SCRATCH: &str = "/scratch/evaluator";
/// The task's hidden unseen configurations (root-only), in unseen evaluations.
pub const HIDDEN: &str = "/arena/hidden/task.json";
/// The variables that say which of a machine's GPUs a process may use (CUDA's, ROCm's, HIP's),
/// in the order they are consulted: passed to the evaluator, and read by the runner where
/// `--gpus auto` finds GPUs, and under Slurm after its own.
pub const VISIBLE_DEVICE_VARS: [&str; 3] = [
    "CUDA_VISIBLE_DEVICES",
    "ROCR_VISIBLE_DEVICES",
    "HIP_VISIBLE_DEVICES",
];
/// A warm evaluator's directory (root-only): its socket, where the runner connects.
pub const CTL: &str = "/arena/ctl";
/// The warm evaluator's socket, in [`CTL`].
pub const SOCKET: &str = "evaluator.sock";

/// The only words the evaluator uses of a hidden configuration's failure, after the
/// configuration's own label (`unseen configuration K (category): KIND`): the kinds of
/// trusted/arena_trusted/outcomes.py, then admits.py's reasons for crediting no speedup. A
/// kernel that fails on purpose could otherwise write the hidden configuration into its
/// error, and from there into every result and report; the runner keeps nothing else.
pub const HIDDEN_KINDS: &[&str] = &[
    "wrong_output",
    "output_not_comparable",
    "output_unreadable",
    "kernel_failed",
    "not_capturable",
    "deferred_work",
    "calls_overlapped",
    "device_busy",
    "device_memory",
    "evaluation_failed",
    "tolerance_admits_zeros",
    "tolerance_admits_other_inputs",
];

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
    "admits.py",
    "child.py",
    "clean.py",
    "copies.py",
    "data.py",
    "deadline.py",
    "derived.py",
    "derived_check.py",
    "driver.py",
    "entry.py",
    "evaluate.py",
    "evaluation.py",
    "exports.py",
    "floor.py",
    "gates.py",
    "gpu.py",
    "gpu_child.py",
    "gpu_errors.py",
    "gpu_guard.py",
    "harness.py",
    "jail.py",
    "kernel.py",
    "lineage.py",
    "mappings.py",
    "measure.py",
    "memory_blame.py",
    "order.py",
    "order_check.py",
    "outcomes.py",
    "perf_parts.py",
    "perf_settings.py",
    "record.py",
    "samples.py",
    "serve.py",
    "signaller.py",
    "simulated.py",
    "stopping.py",
    "tensors.py",
    "timing.py",
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

/// How performance is measured: job.json's `perf`, every field written. The evaluator reads
/// it once into its own type (arena_trusted/perf_settings.py), whose defaults
/// tests/perf_settings.rs holds equal to these.
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
    /// Python launch path's. A kernel that cannot be captured is timed eagerly (only that
    /// one: refusing capture never makes a kernel read faster), and the case says why.
    pub graphs: bool,
    /// CPU kernels: the pairs are spread over this many sessions, each with fresh processes
    /// of both kernels, because a process's own speed (where its memory landed) differs from
    /// the next one's by a few percent for identical code: one process pair is one sample of
    /// that, however many batches it times. The interval is then over sessions.
    pub sessions: u32,
    /// GPU kernels: the same, over fewer sessions. A replayed graph is timed by the device
    /// and varies little from one process to the next, but a kernel that autotunes
    /// (`@triton.autotune`) picks its configuration in each process, and two processes of
    /// identical code can pick configurations 8-10 % apart: in one session that draw would
    /// be the whole of the speedup (AgentKernelArena's fla_l2norm, untouched, read 1.078).
    pub gpu_sessions: u32,
    /// Above 0: pairs are taken one a session, from the sessions above up to `pairs`, until
    /// the speedup's interval over sessions is no wider than this fraction of its median
    /// (arena_trusted/stopping.py), so that a steady kernel costs five pairs and a noisy one
    /// gets up to `pairs`; the cases record where it stopped and why (`stop`). 0: `pairs`
    /// pairs spread over the sessions above.
    pub stop_width: f64,
    /// GPU kernels: a batch's inputs are made afresh and written again, up to this many
    /// tries in all, where the device watch saw other work while they were written.
    pub busy_tries: u32,
    /// GPU kernels: an output that still changes this long after the answer (and after the
    /// batch's own time) fails the batch as deferred work.
    pub deferred_limit_ms: f64,
    /// GPU kernels: the device watch's sampling gap, and the gap between two of its timer
    /// reads, or the lateness of its stop, that says another context's work shared the
    /// device (measured on an H100: docs/benchmarks.md, "The device watch").
    pub watch_gap_us: f64,
    pub busy_gap_us: f64,
    pub late_stop_us: f64,
    /// GPU kernels: output words sampled per timed batch and read back after the answer.
    pub output_samples: u32,
    /// Outputs checked against the reference per timed batch: a sample of this many calls,
    /// drawn from the secret seed before the batch's inputs are made; 0 checks every one.
    /// The correctness gate's outputs and untimed batches' are always all checked. Making
    /// and checking every call's output is most of a microsecond kernel's evaluation (issue
    /// 40). 64 since 2026-11-29, once the GPU adversary suite had run against it on an H200
    /// (docs/benchmarks.md): a kernel wrong on one call in 16 passes a timed batch with
    /// probability 1.6 %, and one that skips fewer calls saves less than the timing's noise.
    pub checked_calls: u32,
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
            gpu_sessions: 5,
            stop_width: 0.05,
            busy_tries: 3,
            deferred_limit_ms: 50.0,
            watch_gap_us: 20.0,
            busy_gap_us: 100.0,
            late_stop_us: 1000.0,
            output_samples: 64,
            checked_calls: 64,
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
    /// The evaluator's own writable directory ([`EVALUATOR_SCRATCH`]).
    pub own_scratch: String,
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
            own_scratch: EVALUATOR_SCRATCH.to_string(),
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
            pass_env: VISIBLE_DEVICE_VARS
                .iter()
                .chain(&["LD_LIBRARY_PATH", "NVIDIA_VISIBLE_DEVICES"])
                .map(|v| v.to_string())
                .collect(),
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
mod defence_tests;
#[cfg(test)]
mod gpu_outputs_tests;
#[cfg(test)]
mod memory_tests;
#[cfg(test)]
mod order_tests;
#[cfg(test)]
mod sampled_check_tests;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod timing_tests;
#[cfg(test)]
mod watch_tests;
