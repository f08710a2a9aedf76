//! Helpers of the end-to-end tests: a private containerd per test, the store of the CPU
//! image set, arenactl runs and their results.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

use serde_json::Value;

use super::{debs, repo};

pub fn arenactl() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_arenactl"));
    c.current_dir(repo());
    c
}

pub fn show(o: &Output) -> String {
    format!(
        "exit {:?}\n--- stdout\n{}--- stderr\n{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// Locks the tasks under `dir/tasks` of `types` on the testbase as set `name` (written to
/// `dir/sets.toml`), into [`store`]; asserts it succeeds and returns the lockfile.
pub fn lock_tasks(dir: &Path, name: &str, types: &[&str]) -> PathBuf {
    let types: Vec<String> = types.iter().map(|t| format!("\"{t}\"")).collect();
    std::fs::write(
        dir.join("sets.toml"),
        format!(
            "[[set]]\nname = \"{name}\"\nrecipe = \"{}\"\ntasks = \"tasks\"\ntask_types = [{}]\n",
            repo().join("images/testbase.toml").display(),
            types.join(", ")
        ),
    )
    .unwrap();
    let lock = dir.join(format!("{name}.lock"));
    let o = arenactl()
        .args(["lock", "--set", name, "--sets"])
        .arg(dir.join("sets.toml"))
        .arg("--out")
        .arg(&lock)
        .arg("--store")
        .arg(store())
        .env("ARENA_DEB_DIR", debs())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", show(&o));
    lock
}

/// A store holding the images of lockfiles/cpu.lock (built from the pinned .debs once, kept
/// between runs: super::cached_store).
pub fn store() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let store = super::cached_store("cpu", &["lockfiles/cpu.lock"]);
        let o = arenactl()
            .args([
                "image",
                "verify",
                "--image-lock",
                "lockfiles/cpu.lock",
                "--store",
            ])
            .arg(&store)
            .env("ARENA_DEB_DIR", debs())
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", show(&o));
        store
    })
}

/// The timing of the runs of tests that check what a run does, not how precisely it times:
/// 3 pairs (3 sessions) in the trusted evaluator and 2 rounds of a self-reported harness, a
/// third to a half of a default run's evaluation time. A kernel made 2× faster or an attack still
/// reads as it does with the defaults; the tests of the timing's own precision use
/// [`Daemon::run_args_timed`]. Every output checked (`--checked-calls 0`) is what a CPU
/// evaluation does anyway; it is given so that run.json shows the flag recorded.
pub const CHEAP_TIMING: [&str; 6] = [
    "--trusted-pairs",
    "3",
    "--perf-pairs",
    "2",
    "--checked-calls",
    "0",
];
/// [`CHEAP_TIMING`]'s numbers, for the tests that count what they give.
pub const CHEAP_TRUSTED_PAIRS: usize = 3;
pub const CHEAP_PERF_PAIRS: usize = 2;

/// A private containerd, stopped when dropped.
pub struct Daemon {
    pub dir: tempfile::TempDir,
    pub socket: String,
}

impl Daemon {
    pub fn start() -> Daemon {
        let dir = tempfile::Builder::new()
            .prefix("arena-e2e-")
            .tempdir()
            .unwrap();
        let o = Command::new("bash")
            .arg(repo().join("ci/containerd.sh"))
            .arg("start")
            .arg(dir.path().join("ctd"))
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", show(&o));
        let socket = String::from_utf8(o.stdout).unwrap().trim().to_string();
        Daemon { dir, socket }
    }

    /// `arenactl run` on the two trusted CPU tasks (what most tests need, at less cost).
    pub fn run_args(&self, agent: &str, out: &Path) -> Vec<String> {
        let mut a = self.run_args_all(agent, out);
        a.extend(
            [
                "--tasks",
                "python2python/arena/matmul",
                "python2python/arena/prefix_sum",
            ]
            .map(String::from),
        );
        a
    }

    /// `arenactl run` on every CPU task: trusted and self-reported, timed with [`CHEAP_TIMING`].
    pub fn run_args_all(&self, agent: &str, out: &Path) -> Vec<String> {
        let mut a = self.run_args_timed(agent, out);
        a.extend(CHEAP_TIMING.map(String::from));
        a
    }

    /// `arenactl run` on every CPU task, timed as a run is by default (for the tests of what
    /// the timing itself says).
    pub fn run_args_timed(&self, agent: &str, out: &Path) -> Vec<String> {
        [
            "run",
            "--image-lock",
            "lockfiles/cpu.lock",
            "--agent",
            agent,
            "--gpus",
            "cpu:1",
            "--containerd",
            &self.socket,
            "--store",
            store().to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
            // Test agents mount what a test wrote in its own directory.
            "--agent-mount-root",
            self.dir.path().to_str().unwrap(),
        ]
        .iter()
        .map(|s| s.to_string())
        .collect()
    }

    /// `arenactl run … --json` on every CPU task: the run's report.
    pub fn run(&self, agent: &str, out: &Path) -> Value {
        let o = arenactl()
            .args(self.run_args_all(agent, out))
            .arg("--json")
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", show(&o));
        serde_json::from_slice(&o.stdout).unwrap()
    }

    /// What arena left in containerd (gc removes it and says what it removed).
    pub fn leftovers(&self) -> Value {
        let o = arenactl()
            .args(["gc", "--json", "--containerd", &self.socket])
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", show(&o));
        serde_json::from_slice(&o.stdout).unwrap()
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = Command::new("bash")
            .arg(repo().join("ci/containerd.sh"))
            .arg("stop")
            .arg(self.dir.path().join("ctd"))
            .status();
    }
}

pub fn empty(leftovers: &Value) -> bool {
    ["containers", "snapshots", "leases"]
        .iter()
        .all(|k| leftovers[k].as_array().is_some_and(|a| a.is_empty()))
}

/// A result's score, as arena-report computes it from the record.
pub fn score(r: &Value) -> arena_report::TaskScore {
    arena_report::score_task(&arena_run::result::parse_result(r.clone()).unwrap())
}

pub fn results(out: &Path) -> Vec<Value> {
    let v: Value =
        serde_json::from_slice(&std::fs::read(out.join("results.json")).unwrap()).unwrap();
    v["tasks"].as_array().unwrap().clone()
}

/// The distinct (task, repeat) pairs of a run's results.
pub fn task_runs(rs: &[Value]) -> BTreeSet<(String, u64)> {
    rs.iter()
        .map(|r| {
            (
                r["task_id"].as_str().unwrap().to_string(),
                r["repeat"].as_u64().unwrap(),
            )
        })
        .collect()
}

pub fn glob_results(out: &Path) -> Vec<PathBuf> {
    let mut v = Vec::new();
    for t in std::fs::read_dir(out.join("tasks"))
        .into_iter()
        .flatten()
        .flatten()
    {
        for r in std::fs::read_dir(t.path()).into_iter().flatten().flatten() {
            let p = r.path().join("result.json");
            if p.exists() {
                v.push(p);
            }
        }
    }
    v.sort();
    v
}

/// Entries of a sealed set distinctive enough to search for (not `(1,)`), and the set's path.
pub fn needles(hidden: &Path) -> Vec<String> {
    let mut out = vec![hidden.display().to_string()];
    for e in std::fs::read_dir(hidden).unwrap().flatten() {
        let name = e.file_name().into_string().unwrap();
        if !name.contains("python2python") {
            continue;
        }
        let v: Value = serde_json::from_slice(&std::fs::read(e.path()).unwrap()).unwrap();
        for c in v["configs"].as_array().unwrap() {
            let entry = c["entry"].as_str().unwrap();
            if entry.len() >= 7 {
                out.push(entry.to_string());
            }
        }
    }
    out
}

impl Daemon {
    /// `arenactl run --json` of `agent` on `tasks` (all CPU tasks when empty) with `extra`
    /// arguments; asserts it succeeds. Returns the report and the task results.
    pub fn run_on(
        &self,
        agent: &str,
        tasks: &[&str],
        out: &Path,
        extra: &[&str],
    ) -> (Value, Vec<Value>) {
        let args = self.run_args_all(agent, out);
        run_tasks(args, tasks, out, extra)
    }

    /// The rounds [`Daemon::run_judged`] gives a self-reported harness: the cheap timing's on
    /// every push, the default in the timing tier.
    pub fn judged_perf_pairs() -> usize {
        if super::tier::timing() {
            arena_eval::paired::DEFAULT_PAIRS as usize
        } else {
            CHEAP_PERF_PAIRS
        }
    }

    /// The run of a test that judges an untouched self-timed kernel's speedup against a bar
    /// (common::tier). On every push: [`Daemon::run_on`], the bar generous. In the timing tier:
    /// [`CHEAP_TIMING`] but for `--perf-pairs`, so that a self-reported harness runs the default
    /// 6 rounds. Two rounds are too few for the tight bar on a 2-core machine, where one
    /// performance run of a pure-Python kernel reads up to 1.6× another as a whole (the median
    /// of its 10 timed calls at 84 ms against 54 ms, on the host alone: an untouched
    /// sum_squares once read 1.31 so). The median of 6 rounds needs most of one kernel's runs
    /// slow and most of the other's fast.
    pub fn run_judged(
        &self,
        agent: &str,
        tasks: &[&str],
        out: &Path,
        extra: &[&str],
    ) -> Vec<Value> {
        if !super::tier::timing() {
            return self.run_on(agent, tasks, out, extra).1;
        }
        let mut args = self.run_args_timed(agent, out);
        args.extend(
            CHEAP_TIMING
                .chunks(2)
                .filter(|flag| flag[0] != "--perf-pairs")
                .flatten()
                .map(|s| s.to_string()),
        );
        run_tasks(args, tasks, out, extra).1
    }
}

/// `arenactl ARGS [--tasks TASKS…] EXTRA… --json`, which must succeed: its report, and the
/// results under `out`.
fn run_tasks(
    mut args: Vec<String>,
    tasks: &[&str],
    out: &Path,
    extra: &[&str],
) -> (Value, Vec<Value>) {
    if !tasks.is_empty() {
        args.push("--tasks".into());
        args.extend(tasks.iter().map(|t| t.to_string()));
    }
    args.extend(extra.iter().map(|s| s.to_string()));
    let o = arenactl().args(&args).arg("--json").output().unwrap();
    assert!(o.status.success(), "{}", show(&o));
    (serde_json::from_slice(&o.stdout).unwrap(), results(out))
}

/// Every file below `dir` whose bytes contain `needle`.
pub fn files_containing(dir: &Path, needle: &[u8]) -> Vec<PathBuf> {
    let mut hits = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let p = e.path();
            let Ok(ft) = e.file_type() else { continue };
            if ft.is_dir() {
                stack.push(p);
            } else if ft.is_file() {
                if let Ok(b) = std::fs::read(&p) {
                    if b.windows(needle.len()).any(|w| w == needle) {
                        hits.push(p);
                    }
                }
            }
        }
    }
    hits
}

/// The log files of a task run's containers of `phase` (e.g. `candidate`), concatenated.
pub fn phase_logs(out: &Path, task: &str, phase: &str) -> String {
    let dir = out
        .join("tasks")
        .join(task.replace('/', "__"))
        .join("r0/logs");
    let mut text = String::new();
    if let Ok(entries) = std::fs::read_dir(&dir) {
        let mut names: Vec<_> = entries.flatten().map(|e| e.path()).collect();
        names.sort();
        for p in names {
            let name = p.file_name().unwrap().to_string_lossy().to_string();
            if name.contains(&format!("-{phase}.")) {
                text.push_str(&std::fs::read_to_string(&p).unwrap_or_default());
            }
        }
    }
    text
}

/// Whether an agent's container of arena's namespace is running (ctr's view of its task).
pub fn agent_task_running(socket: &str) -> bool {
    let o = Command::new("ctr")
        .args(["--address", socket, "--namespace", "arena", "tasks", "ls"])
        .output()
        .unwrap();
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .any(|l| l.contains("-agent ") && l.contains("RUNNING"))
}
