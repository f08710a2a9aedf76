//! The job of a self-reported evaluation: the task's own commands, run by arena's gate
//! runner (`gates.py`) step by step, each under its gate's timeout, the harness's reports
//! copied where only the runner writes.
//!
//! Each kernel runs in a tree of its own (`/arena/kernels/<role>`): a copy of the image's task
//! made by the gate runner, on a sized file system whose files the kernel's user can read but
//! not replace, with `build/` its own; its HOME, TMPDIR and compiler caches in a scratch file
//! system only it can enter. The main gates evaluate one kernel so; a paired evaluation
//! ([`GatesJob::paired`]) holds both, the original's tree from the pristine `/task` and the
//! candidate's with the agent's sources laid over it, and interleaves their performance runs
//! ([`crate::paired`]). A probe (which unseen configurations a kernel fails) compiles once and
//! runs the correctness commands once per configuration, each from a view of the task in
//! which that configuration's harness file stands in for the image's.

use std::collections::BTreeMap;

use arena_task::TaskConfig;
use serde::Serialize;

use crate::gate::{Gate, GATES};
use crate::layout::{OUT_DIR, TASK_ROOT};
use crate::paired::{run_name, PairedPlan, BASELINE_COMPILE};
use crate::timeouts::{commands, GateTimeouts};
use crate::trusted::{Ids, Role, BASELINE, CANDIDATE};

/// The harness's user in a probe.
pub const HARNESS_UID: u32 = 60003;
/// Its scratch (HOME, TMPDIR, caches).
pub const HARNESS_SCRATCH: &str = "/scratch/harness";
/// `VIEWS/<k>/`: the task as configuration `k` sees it (links into /task, its own harness).
pub const VIEWS: &str = "/arena/views";
/// Where the harness writes its reports in a probe (a sized file system of its own).
pub fn build_dir() -> String {
    format!("{TASK_ROOT}/build")
}
/// Where a gate step's reports are copied, below the out directory.
pub const REPORTS: &str = "reports";
/// `TREES/<role>`: each kernel's copy of the task.
pub const TREES: &str = "/arena/kernels";
/// `CANDIDATE_SOURCES/<rel>`: the agent's staged sources in a paired evaluation.
pub const CANDIDATE_SOURCES: &str = "/arena/candidate";
/// The user of the floor probe.
pub const FLOOR_UID: u32 = 60004;
/// Seconds the floor probe may take.
pub const FLOOR_TIMEOUT_S: u64 = 120;
/// What a kernel may add to its tree beside the task's files (rocmbench writes results next
/// to its test file), its `build/`, and its scratch.
pub const TREE_SLACK: u64 = 256 << 20;
pub const BUILD_BYTES: u64 = 256 << 20;
pub const SCRATCH_BYTES: u64 = 2 << 30;

/// A kernel's tree, named by its user: both kernels' paths, and so their environments and
/// arguments, are the same length (a process's layout shifts with them, and a CPU-bound
/// harness can measure that).
pub fn tree(role: Role) -> String {
    format!("{TREES}/{}", role.uid)
}

/// A kernel's scratch (HOME, TMPDIR, caches), named like its tree.
pub fn scratch(role: Role) -> String {
    format!("/scratch/{}", role.uid)
}

/// A writable file system the job needs (the runner mounts each as a sized tmpfs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Space {
    pub destination: String,
    pub bytes: u64,
    pub mode: u32,
    pub uid: u32,
    pub gid: u32,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Step {
    pub name: String,
    pub commands: Vec<String>,
    pub timeout: u64,
    pub cwd: String,
    /// The kernel's tree whose reports the step's harness writes: checked free of stale
    /// reports before, copied and cleaned after (with the user's files in /tmp).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tree: Option<String>,
    pub user: Ids,
    /// HOME, TMPDIR and caches of the step's user (over the job's environment).
    pub env: BTreeMap<String, String>,
    /// Copy the harness's reports after this step, into `out/<reports>`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reports: Option<String>,
    /// Keep the commands' output (stdout and stderr, the last MiB) in `out/<capture>`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub capture: Option<String>,
    /// Go on with the next step when this one fails.
    pub go_on: bool,
    /// Start the floor probe beside this step (the original's compile: nothing of the agent's
    /// may run beside the probe, or it could load the device and raise the floor).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub floor_start: bool,
    /// Files laid over the step's tree before it runs (a configuration's rewritten harness,
    /// when one tree serves every configuration in turn).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub overlay: Vec<Overlay>,
    /// Wait for the floor probe before this step (it must not run while anything is timed).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub floor_first: bool,
}

/// One kernel's tree: the image's task copied to `path`, `overlay` laid over it; its
/// directories get the kernel's group (`gid`), which may add files to them.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Tree {
    pub path: String,
    pub gid: u32,
    pub overlay: Vec<Overlay>,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Overlay {
    pub rel: String,
    pub from: String,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct FloorProbe {
    pub user: Ids,
    pub timeout: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct GatesJob {
    pub groups: Vec<u32>,
    pub env: BTreeMap<String, String>,
    pub out: String,
    /// The harness's output goes nowhere (it may hold hidden configurations).
    pub quiet: bool,
    /// Where the trees are copied from (the image's task, with whatever is bound over it).
    pub task_root: String,
    pub trees: Vec<Tree>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub floor: Option<FloorProbe>,
    pub steps: Vec<Step>,
    /// Seconds after which the gate runner stops everything and ends, whoever is watching.
    pub deadline_s: u64,
    /// The writable file systems the runner mounts for the job.
    #[serde(skip)]
    pub spaces: Vec<Space>,
}

fn ids(uid: u32) -> Ids {
    Ids { uid, gid: uid }
}

/// A kernel's environment over the image's: its own HOME, TMPDIR and Triton cache, and one
/// hash seed for every kernel (the same layout of Python's dicts in both).
fn home_env(home: &str) -> BTreeMap<String, String> {
    [
        ("HOME", home.to_string()),
        ("TMPDIR", home.to_string()),
        ("TRITON_CACHE_DIR", format!("{home}/.triton")),
        ("PYTHONHASHSEED", "0".to_string()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}

/// The spaces of a kernel's tree: the tree (root's, the kernel's group may add files; the
/// sticky bit keeps it from replacing the task's), its `build/` and its scratch. None is open
/// to others: the other kernel cannot read this one's files, nor see when it ran (the gate
/// runner reads them as a member of every kernel's group).
fn kernel_spaces(role: Role, task_bytes: u64) -> Vec<Space> {
    vec![
        Space {
            destination: tree(role),
            bytes: task_bytes + TREE_SLACK,
            mode: 0o1770,
            uid: 0,
            gid: role.uid,
        },
        Space {
            destination: format!("{}/build", tree(role)),
            bytes: BUILD_BYTES,
            mode: 0o750,
            uid: role.uid,
            gid: role.uid,
        },
        Space {
            destination: scratch(role),
            bytes: SCRATCH_BYTES,
            mode: 0o700,
            uid: role.uid,
            gid: role.uid,
        },
    ]
}

impl GatesJob {
    fn new(image_env: &[String], groups: Vec<u32>, steps: Vec<Step>) -> GatesJob {
        let mut env: BTreeMap<String, String> = image_env
            .iter()
            .filter_map(|e| e.split_once('='))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        env.entry("PATH".into())
            .or_insert_with(|| "/usr/local/bin:/usr/bin:/bin".into());
        GatesJob {
            groups,
            env,
            out: OUT_DIR.into(),
            quiet: false,
            task_root: TASK_ROOT.into(),
            trees: Vec::new(),
            floor: None,
            deadline_s: steps.iter().map(|s: &Step| s.timeout).sum::<u64>() + 30,
            steps,
            spaces: Vec::new(),
        }
    }

    fn kernel_step(role: Role, name: &str, commands: &[String], timeout: u64) -> Step {
        Step {
            name: name.into(),
            commands: commands.to_vec(),
            timeout,
            cwd: tree(role),
            tree: Some(tree(role)),
            user: ids(role.uid),
            env: home_env(&scratch(role)),
            reports: None,
            capture: None,
            go_on: false,
            floor_start: false,
            floor_first: false,
            overlay: Vec::new(),
        }
    }

    /// compile → correctness → performance of one kernel (`role`) in its tree, copied from
    /// `/task` as the container has it (with the sources and harness bound over it), stopping
    /// at the first failure. `task_bytes`: the task's size (its tree's file system holds it).
    pub fn gates(
        cfg: &TaskConfig,
        t: &GateTimeouts,
        image_env: &[String],
        groups: Vec<u32>,
        role: Role,
        task_bytes: u64,
    ) -> GatesJob {
        let steps = GATES
            .iter()
            .map(|g| {
                let mut s = Self::kernel_step(role, g.name(), commands(cfg, *g), t.get(*g));
                s.reports = Some(REPORTS.into());
                if *g == Gate::Performance {
                    s.capture = Some(format!("{REPORTS}/{}", crate::aka_perf::OUTPUT));
                }
                s
            })
            .collect();
        let mut job = GatesJob::new(image_env, groups, steps);
        job.trees = vec![Tree {
            path: tree(role),
            gid: role.uid,
            overlay: Vec::new(),
        }];
        job.spaces = kernel_spaces(role, task_bytes);
        job
    }

    /// The candidate's compile and correctness gates in its tree, the original compiled in
    /// its own, then both kernels' performance runs in the plan's order; the floor probe
    /// runs beside the compiles. `/task` must be the image's own (nothing bound over it): the
    /// agent's sources come in by `overlay` (from [`CANDIDATE_SOURCES`]).
    pub fn paired(
        cfg: &TaskConfig,
        t: &GateTimeouts,
        image_env: &[String],
        groups: Vec<u32>,
        plan: &PairedPlan,
        overlay: Vec<Overlay>,
        task_bytes: u64,
    ) -> GatesJob {
        let mut steps = Vec::new();
        for g in [Gate::Compile, Gate::Correctness] {
            let mut s = Self::kernel_step(CANDIDATE, g.name(), commands(cfg, g), t.get(g));
            s.reports = Some(REPORTS.into());
            steps.push(s);
        }
        let mut compile = Self::kernel_step(
            BASELINE,
            BASELINE_COMPILE,
            commands(cfg, Gate::Compile),
            t.compile,
        );
        compile.floor_start = true;
        steps.push(compile);
        for (i, (r, name)) in plan.runs().enumerate() {
            let role = if name == BASELINE.name {
                BASELINE
            } else {
                CANDIDATE
            };
            let step = run_name(r, name);
            let mut s =
                Self::kernel_step(role, &step, commands(cfg, Gate::Performance), t.performance);
            s.reports = Some(format!("perf/{step}"));
            s.capture = Some(format!("perf/{step}/{}", crate::aka_perf::OUTPUT));
            // Triton then prints what each autotuning chose, which the runs' record keeps.
            let (k, v) = crate::autotune::PRINT_ENV;
            s.env.insert(k.into(), v.into());
            s.floor_first = i == 0;
            steps.push(s);
        }
        let mut job = GatesJob::new(image_env, groups, steps);
        job.trees = vec![
            Tree {
                path: tree(BASELINE),
                gid: BASELINE.uid,
                overlay: Vec::new(),
            },
            Tree {
                path: tree(CANDIDATE),
                gid: CANDIDATE.uid,
                overlay,
            },
        ];
        job.floor = Some(FloorProbe {
            user: ids(FLOOR_UID),
            timeout: FLOOR_TIMEOUT_S,
        });
        job.deadline_s += FLOOR_TIMEOUT_S;
        job.spaces = kernel_spaces(BASELINE, task_bytes);
        job.spaces.extend(kernel_spaces(CANDIDATE, task_bytes));
        job
    }

    /// Compile once from /task, then correctness once per configuration from its view
    /// (`probe<k>` steps, each judged on its own), as the harness user.
    pub fn probe(
        cfg: &TaskConfig,
        t: &GateTimeouts,
        configs: usize,
        image_env: &[String],
        groups: Vec<u32>,
    ) -> GatesJob {
        let step = |name: String, gate: Gate, cwd: String, go_on: bool| Step {
            name,
            commands: commands(cfg, gate).to_vec(),
            timeout: t.get(gate),
            cwd,
            tree: None,
            user: ids(HARNESS_UID),
            env: home_env(HARNESS_SCRATCH),
            reports: None,
            capture: None,
            go_on,
            floor_start: false,
            floor_first: false,
            overlay: Vec::new(),
        };
        let mut steps = vec![step(
            "compile".into(),
            Gate::Compile,
            TASK_ROOT.into(),
            false,
        )];
        for k in 0..configs {
            steps.push(step(
                format!("probe{k}"),
                Gate::Correctness,
                format!("{VIEWS}/{k}"),
                true,
            ));
        }
        let mut job = GatesJob::new(image_env, groups, steps);
        job.spaces = vec![
            Space {
                destination: build_dir(),
                bytes: BUILD_BYTES,
                mode: 0o755,
                uid: HARNESS_UID,
                gid: HARNESS_UID,
            },
            Space {
                destination: HARNESS_SCRATCH.into(),
                bytes: SCRATCH_BYTES,
                mode: 0o700,
                uid: HARNESS_UID,
                gid: HARNESS_UID,
            },
        ];
        job
    }

    /// What the whole container may take.
    pub fn limit_s(&self) -> u64 {
        self.deadline_s + 30
    }
}

/// What a probe found: `None` where the kernel did not compile (or the container never got
/// that far), else whether each configuration passed (a configuration never reached failed).
pub fn read_probe(out_dir: &std::path::Path, configs: usize) -> Option<Vec<bool>> {
    let text = crate::untrusted::read_text_beneath(
        out_dir,
        std::path::Path::new(crate::layout::GATES_FILE),
        64 << 10,
    )
    .unwrap_or_default();
    let mut compiled = false;
    let mut passed = vec![false; configs];
    for line in text.lines() {
        let Some((name, code)) = line.split_once(' ') else {
            continue;
        };
        let Ok(code) = code.trim().parse::<i32>() else {
            continue;
        };
        if name == "compile" {
            compiled = code == 0;
        } else if let Some(k) = name
            .strip_prefix("probe")
            .and_then(|k| k.parse::<usize>().ok())
        {
            if k < configs {
                passed[k] = code == 0;
            }
        }
    }
    compiled.then_some(passed)
}

mod per_config;
pub use per_config::{config_reports, config_step};

#[cfg(test)]
mod tests;
