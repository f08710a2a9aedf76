//! `arenactl run` end to end on the CPU sample tasks, through a real containerd (a private
//! daemon per test, started by ci/containerd.sh) and the in-process gRPC runner: three scripted
//! agents (one optimizes, one breaks correctness, one tampers with the harness), a runner
//! killed with SIGKILL and restarted on its run directory, and the refusal of drifted digests.
//! Needs root, containerd and runc (ci/setup.sh installs them).

mod common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use common::{debs, repo};
use serde_json::Value;

fn arenactl() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_arenactl"));
    c.current_dir(repo());
    c
}

fn show(o: &Output) -> String {
    format!(
        "exit {:?}\n--- stdout\n{}--- stderr\n{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// A store holding the images of lockfiles/cpu.lock (built from the pinned .debs once).
fn store() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let store = repo().join("target/arena-run-test-store");
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

/// A private containerd, stopped when dropped.
struct Daemon {
    dir: tempfile::TempDir,
    socket: String,
}

impl Daemon {
    fn start() -> Daemon {
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
    fn run_args(&self, agent: &str, out: &Path) -> Vec<String> {
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

    /// `arenactl run` on every CPU task: trusted and self-reported.
    fn run_args_all(&self, agent: &str, out: &Path) -> Vec<String> {
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
    fn run(&self, agent: &str, out: &Path) -> Value {
        let o = arenactl()
            .args(self.run_args_all(agent, out))
            .arg("--json")
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", show(&o));
        serde_json::from_slice(&o.stdout).unwrap()
    }

    /// What arena left in containerd (gc removes it and says what it removed).
    fn leftovers(&self) -> Value {
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

fn empty(leftovers: &Value) -> bool {
    ["containers", "snapshots", "leases"]
        .iter()
        .all(|k| leftovers[k].as_array().is_some_and(|a| a.is_empty()))
}

/// A result's score, as arena-report computes it from the record.
fn score(r: &Value) -> arena_report::TaskScore {
    arena_report::score_task(&arena_run::result::parse_result(r.clone()).unwrap())
}

fn results(out: &Path) -> Vec<Value> {
    let v: Value =
        serde_json::from_slice(&std::fs::read(out.join("results.json")).unwrap()).unwrap();
    v["tasks"].as_array().unwrap().clone()
}

#[test]
fn three_scripted_agents_and_drift_refusal() {
    let d = Daemon::start();
    let tmp = d.dir.path();

    // An agent that truly optimizes: faster and still correct.
    let report = d.run("ci/agents/optimize.toml", &tmp.join("optimize"));
    assert_eq!(report["state"], "done");
    let tasks = report["report"]["tasks"].as_array().unwrap();
    assert_eq!(tasks.len(), 3);
    for t in tasks {
        assert_eq!(t["correct"], true, "{t}");
        let s = t["speedup"].as_f64().unwrap();
        assert!(s > 1.0, "optimized kernel not measured faster: {t}");
        assert!(t["score"].as_f64().unwrap() > 220.0, "{t}");
    }
    for r in results(&tmp.join("optimize")) {
        // Every digest the result depends on is recorded.
        for k in [
            "image",
            "agent_image",
            "task",
            "harness",
            "agent",
            "lockfile",
        ] {
            assert!(
                r["provenance"][k].as_str().unwrap().starts_with("sha256:"),
                "{k}: {r}"
            );
        }
        assert_eq!(r["baseline"]["compile"]["status"], "ok");
    }

    // An agent that breaks correctness: compiles, not correct → 20.
    let report = d.run("ci/agents/break.toml", &tmp.join("break"));
    for t in report["report"]["tasks"].as_array().unwrap() {
        assert_eq!(t["compiled"], true, "{t}");
        assert_eq!(t["correct"], false, "{t}");
        assert_eq!(t["score"].as_f64().unwrap(), 20.0, "{t}");
    }

    // An agent that rewrites scripts/task_runner.py to pass everything with 1 ns timings: the
    // evaluator uses the image's harness, so its edit changes nothing.
    d.run("ci/agents/cheat.toml", &tmp.join("cheat"));
    for r in results(&tmp.join("cheat")) {
        let ws = tmp
            .join("cheat/tasks")
            .join(r["task_id"].as_str().unwrap().replace('/', "__"))
            .join("r0/workspace/scripts/task_runner.py");
        assert!(
            std::fs::read_to_string(ws)
                .unwrap()
                .contains("print(\"PASS\")"),
            "the agent did not tamper"
        );
        for gate in ["compile", "correctness"] {
            assert_eq!(
                r["candidate"][gate]["status"], r["baseline"][gate]["status"],
                "{gate}: {r}"
            );
        }
        let ids = |e: &Value| -> Vec<String> {
            e["performance"]
                .as_array()
                .unwrap()
                .iter()
                .map(|c| c["test_case_id"].as_str().unwrap().to_string())
                .collect()
        };
        assert_eq!(ids(&r["candidate"]), ids(&r["baseline"]));
        for c in r["candidate"]["performance"].as_array().unwrap() {
            assert!(
                c["execution_time_ms"].as_f64().unwrap() > 1e-3,
                "fake timing got through: {c}"
            );
        }
        // The real harness measured the same kernel: no speedup to speak of.
        let s = score(&r).speedup;
        assert!(
            (0.5..2.0).contains(&s),
            "speedup {s} from an untouched kernel: {r}"
        );
    }

    // A lockfile whose pinned manifest differs from the image: refused before anything runs,
    // naming the task, the expected and the found digest.
    let lock = std::fs::read_to_string(repo().join("lockfiles/cpu.lock")).unwrap();
    let parsed = arena_image::Lockfile::load(&repo().join("lockfiles/cpu.lock")).unwrap();
    let real = parsed
        .task_image("python2python/arena/prefix_sum")
        .unwrap()
        .manifest
        .to_string();
    let real = real.as_str();
    let fake = "sha256:1111111111111111111111111111111111111111111111111111111111111111";
    let drifted = tmp.join("drifted.lock");
    let sets = repo().join("images/sets.toml");
    std::fs::write(
        &drifted,
        lock.replace(real, fake).replace(
            "sets = \"../images/sets.toml\"",
            &format!("sets = \"{}\"", sets.display()),
        ),
    )
    .unwrap();
    let mut args = d.run_args("ci/agents/optimize.toml", &tmp.join("drift"));
    args[2] = drifted.display().to_string();
    let o = arenactl().args(&args).output().unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", show(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("python2python/arena/prefix_sum") && err.contains(fake) && err.contains(real),
        "{err}"
    );
    assert!(
        !tmp.join("drift/run.json").exists(),
        "a refused run must not start"
    );

    assert!(
        empty(&d.leftovers()),
        "containers, snapshots or leases leaked"
    );
}

#[test]
fn killed_runner_resumes_without_repeating_finished_tasks() {
    let d = Daemon::start();
    let tmp = d.dir.path();
    let agent = tmp.join("slow.toml");
    std::fs::write(
        &agent,
        "name = \"slow\"\ncommand = [\"sh\", \"-c\", \"sleep 1\"]\ntimeout_s = 60\n",
    )
    .unwrap();
    let out = tmp.join("run");
    let mut args = d.run_args(agent.to_str().unwrap(), &out);
    args.extend(["--runs".to_string(), "2".to_string()]);
    let mut child = arenactl()
        .args(&args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Kill it (SIGKILL: no clean-up of its own) once the first task run has finished.
    let t0 = Instant::now();
    let first = loop {
        let done: Vec<PathBuf> = glob_results(&out);
        if let Some(p) = done.first() {
            break p.clone();
        }
        assert!(
            t0.elapsed() < Duration::from_secs(120),
            "no task run finished"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    child.kill().unwrap();
    child.wait().unwrap();
    let first_bytes = std::fs::read(&first).unwrap();
    let finished_before = glob_results(&out).len();
    assert!(
        finished_before < 4,
        "the run finished before it could be killed"
    );

    // The same command again: the run completes, finished task runs are kept as they were.
    let o = arenactl().args(&args).arg("--json").output().unwrap();
    assert!(o.status.success(), "{}", show(&o));
    let report: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(report["finished"], 4);
    assert_eq!(
        std::fs::read(&first).unwrap(),
        first_bytes,
        "a finished task run was repeated"
    );
    let rs = results(&out);
    let keys = task_runs(&rs);
    assert_eq!(rs.len(), 4);
    assert_eq!(keys.len(), 4, "a task run was counted twice");
    let left = d.leftovers();
    assert!(
        empty(&left),
        "the killed runner's containers were not cleaned: {left}"
    );
}

/// The distinct (task, repeat) pairs of a run's results.
fn task_runs(rs: &[Value]) -> BTreeSet<(String, u64)> {
    rs.iter()
        .map(|r| {
            (
                r["task_id"].as_str().unwrap().to_string(),
                r["repeat"].as_u64().unwrap(),
            )
        })
        .collect()
}

fn glob_results(out: &Path) -> Vec<PathBuf> {
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
fn needles(hidden: &Path) -> Vec<String> {
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

#[test]
fn unseen_configurations_reach_only_the_evaluator() {
    let d = Daemon::start();
    let tmp = d.dir.path();
    let hidden = tmp.join("hidden-set-e2e");
    let o = arenactl()
        .args([
            "unseen",
            "generate",
            "--tasks",
            "tasks",
            "--seed",
            "11",
            "--per-task",
            "6",
            "--out",
        ])
        .arg(&hidden)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", show(&o));
    let digest = String::from_utf8_lossy(&o.stdout)
        .split_whitespace()
        .next()
        .unwrap()
        .to_string();
    let with_unseen = |agent: &str, out: &Path| -> Value {
        let mut args = d.run_args_all(agent, out);
        args.extend([
            "--unseen".to_string(),
            hidden.display().to_string(),
            "--json".to_string(),
        ]);
        let o = arenactl().args(&args).output().unwrap();
        assert!(o.status.success(), "{}", show(&o));
        serde_json::from_slice(&o.stdout).unwrap()
    };

    // Hard-coding the visible shapes passes seen correctness and fails the unseen ones; the
    // honest kernel passes both.
    let report = with_unseen("ci/agents/overfit.toml", &tmp.join("overfit"));
    for r in results(&tmp.join("overfit")) {
        assert_eq!(r["unseen"]["set_digest"], digest.as_str());
        assert_eq!(
            r["candidate"]["correctness"]["status"], "ok",
            "seen correctness: {r}"
        );
    }
    let g = &report["report"]["generalization"];
    let row = g
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["task_type"] == "python2python")
        .unwrap();
    assert_eq!(row["quadrants"]["opt_regression"], 1, "{g}");
    assert_eq!(row["quadrants"]["both_pass"], 2, "{g}");
    assert!(row["delta_g"].as_f64().is_some(), "Δg not computed: {g}");
    // The overfit kernel is wrong on every unseen size, and the probe says so per category;
    // the original kernel fails none.
    let failures = |r: &Value, field: &str| -> u64 {
        r["unseen"][field]
            .as_object()
            .unwrap()
            .values()
            .map(|n| n.as_u64().unwrap())
            .sum()
    };
    for r in results(&tmp.join("overfit")) {
        let overfit = r["task_id"].as_str().unwrap().ends_with("prefix_sum");
        let expected = if overfit { 6 } else { 0 };
        assert_eq!(failures(&r, "failures_by_category"), expected, "{r}");
        assert_eq!(failures(&r, "original_failures_by_category"), 0, "{r}");
    }
    let by_category: u64 = row["failures_by_category"]
        .as_object()
        .unwrap()
        .values()
        .map(|n| n.as_u64().unwrap())
        .sum();
    assert_eq!(by_category, 6, "{g}");

    // After the run, on a new set: `unseen eval` re-evaluates the finished task runs, results
    // name the new digest, the seen results stay as they were; again, nothing is repeated.
    let hidden2 = tmp.join("hidden-set-e2e-2");
    let o = arenactl()
        .args([
            "unseen",
            "generate",
            "--tasks",
            "tasks",
            "--seed",
            "12",
            "--per-task",
            "4",
        ])
        .arg("--out")
        .arg(&hidden2)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", show(&o));
    let digest2 = String::from_utf8_lossy(&o.stdout)
        .split_whitespace()
        .next()
        .unwrap()
        .to_string();
    assert_ne!(digest, digest2);
    let before = results(&tmp.join("overfit"));
    let eval = || {
        let o = arenactl()
            .args(["unseen", "eval"])
            .arg(tmp.join("overfit"))
            .arg("--unseen")
            .arg(&hidden2)
            .args(["--containerd", &d.socket, "--gpus", "cpu:1", "--json"])
            .arg("--store")
            .arg(store())
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", show(&o));
        serde_json::from_slice::<Value>(&o.stdout).unwrap()
    };
    let report2 = eval();
    let after = results(&tmp.join("overfit"));
    assert_eq!(before.len(), after.len());
    for (b, a) in before.iter().zip(&after) {
        assert_eq!(a["unseen"]["set_digest"], digest2.as_str());
        assert_eq!(a["candidate"], b["candidate"], "the seen result changed");
        assert_eq!(a["baseline"], b["baseline"]);
        let overfit = a["task_id"].as_str().unwrap().ends_with("prefix_sum");
        assert_eq!(
            failures(a, "failures_by_category"),
            if overfit { 4 } else { 0 }
        );
    }
    let row2 = report2["report"]["generalization"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["task_type"] == "python2python")
        .unwrap()
        .clone();
    assert_eq!(row2["quadrants"]["opt_regression"], 1, "{row2}");
    let bytes: Vec<Vec<u8>> = glob_results(&tmp.join("overfit"))
        .iter()
        .map(|p| std::fs::read(p).unwrap())
        .collect();
    eval();
    let again: Vec<Vec<u8>> = glob_results(&tmp.join("overfit"))
        .iter()
        .map(|p| std::fs::read(p).unwrap())
        .collect();
    assert_eq!(
        bytes, again,
        "a task run evaluated on this set was evaluated again"
    );
    // A directory that holds no run is refused, naming its run.json.
    let o = arenactl()
        .args(["unseen", "eval"])
        .arg(tmp.join("no-such-run"))
        .arg("--unseen")
        .arg(&hidden2)
        .args(["--containerd", &d.socket, "--gpus", "cpu:1"])
        .arg("--store")
        .arg(store())
        .output()
        .unwrap();
    assert!(!o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("run.json"),
        "{}",
        show(&o)
    );

    // An adversarial agent, told the unseen values out of band, searches everything it can
    // see — its filesystem (the image's /usr aside: it is locked before any set exists), its
    // mounts, every process's environment and command line — and finds nothing. A positive
    // control proves the search finds the values where they are.
    let needles_file = tmp.join("oob/needles");
    std::fs::create_dir_all(needles_file.parent().unwrap()).unwrap();
    let ns = needles(&hidden);
    assert!(ns.len() >= 3, "too few distinctive entries: {ns:?}");
    std::fs::write(&needles_file, ns.join("\n") + "\n").unwrap();
    let agent = tmp.join("adversary.toml");
    std::fs::write(
        &agent,
        format!(
            r#"name = "adversary"
command = ["sh", "-c", """
N=/oob/needles
search() {{ for d in "$@"; do find "$d" -xdev -type f 2>/dev/null; done | grep -v -e '^/usr/' -e '^/oob/' | xargs grep -lF -f $N 2>/dev/null; }}
mkdir -p /tmp/control && cp $N /tmp/control/copy
search /tmp/control > /workspace/control.txt
rm -rf /tmp/control
search / /workspace /reference /tmp /arena > /workspace/findings.txt
for p in /proc/[0-9]*; do cat $p/environ $p/cmdline 2>/dev/null | tr '\\0' '\\n'; done | grep -F -f $N >> /workspace/findings.txt
env | grep -F -f $N >> /workspace/findings.txt
grep -F -f $N /proc/self/mountinfo >> /workspace/findings.txt
echo searched > /workspace/done.txt
"""]
timeout_s = 120

[[mount]]
host = "{}"
container = "/oob"
"#,
            needles_file.parent().unwrap().display()
        ),
    )
    .unwrap();
    let out = tmp.join("adversary");
    with_unseen(agent.to_str().unwrap(), &out);
    for r in results(&out) {
        let ws = out
            .join("tasks")
            .join(r["task_id"].as_str().unwrap().replace('/', "__"))
            .join("r0/workspace");
        assert_eq!(
            std::fs::read_to_string(ws.join("done.txt")).unwrap(),
            "searched\n"
        );
        assert_eq!(
            std::fs::read_to_string(ws.join("control.txt")).unwrap(),
            "/tmp/control/copy\n",
            "the search does not work"
        );
        let found = std::fs::read_to_string(ws.join("findings.txt")).unwrap();
        assert!(
            found.is_empty(),
            "the agent found unseen configurations:\n{found}"
        );
        // The unseen evaluations did run, on the same set.
        assert_eq!(r["unseen"]["set_digest"], digest.as_str());
        // Nothing of the set is left in the task run's directory but the evaluators' reports.
        assert!(!ws.parent().unwrap().join("unseen-harness").exists());
    }
    assert!(empty(&d.leftovers()));
}

/// A single-node Slurm cluster (ci/slurm.sh) with fake GPUs, stopped when dropped.
struct Slurm {
    dir: PathBuf,
    conf: String,
}

impl Slurm {
    fn start(dir: &Path, gpus: u32) -> Slurm {
        let o = Command::new("bash")
            .arg(repo().join("ci/slurm.sh"))
            .arg("start")
            .arg(dir)
            .arg(gpus.to_string())
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", show(&o));
        let conf = String::from_utf8(o.stdout).unwrap().trim().to_string();
        Slurm {
            dir: dir.to_path_buf(),
            conf,
        }
    }

    fn cmd(&self, program: &str) -> Command {
        let mut c = Command::new(program);
        c.env("SLURM_CONF", &self.conf);
        c
    }

    /// squeue's state of a job ("" once Slurm forgot it).
    fn state(&self, job: &str) -> String {
        let o = self
            .cmd("squeue")
            .args(["-h", "--states=all", "-o", "%T", "-j", job])
            .output()
            .unwrap();
        String::from_utf8_lossy(&o.stdout).trim().to_string()
    }
}

impl Drop for Slurm {
    fn drop(&mut self) {
        let _ = Command::new("bash")
            .arg(repo().join("ci/slurm.sh"))
            .arg("stop")
            .arg(&self.dir)
            .status();
    }
}

/// Waits until a Slurm job of the run in `out` has started its agent (its log says so);
/// returns that job's id.
fn agent_started(out: &Path) -> String {
    let t0 = Instant::now();
    loop {
        assert!(
            t0.elapsed() < Duration::from_secs(120),
            "no job started its agent"
        );
        let started = std::fs::read_dir(out.join("slurm"))
            .into_iter()
            .flatten()
            .flatten()
            .find(|e| {
                std::fs::read_to_string(e.path()).is_ok_and(|t| t.contains("agent slow started"))
            });
        if let Some(e) = started {
            let name = e.file_name().to_string_lossy().into_owned();
            let id = name.rsplit_once('-').unwrap().1.trim_end_matches(".log");
            return id.to_string();
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn ledger(out: &Path) -> Vec<Value> {
    let v: Value =
        serde_json::from_slice(&std::fs::read(out.join("slurm/jobs.json")).unwrap()).unwrap();
    v["jobs"].as_array().unwrap().clone()
}

fn gates(e: &Value) -> (Value, Value) {
    (
        e["compile"]["status"].clone(),
        e["correctness"]["status"].clone(),
    )
}

#[test]
fn slurm_backend_runs_one_job_per_task_run_and_survives_scancel() {
    let d = Daemon::start();
    let tmp = d.dir.path();
    let slurm = Slurm::start(&tmp.join("slurm"), 3);
    let head = |agent: &str, out: &Path, extra: &[&str]| {
        let mut c = slurm.cmd(env!("CARGO_BIN_EXE_arenactl"));
        c.current_dir(repo())
            .args(d.run_args(agent, out))
            .args(["--backend", "slurm", "--json"])
            .args(extra);
        c
    };

    // The same tasks and agent, locally and as Slurm jobs: the same gates and outcomes.
    let o = arenactl()
        .args(d.run_args("ci/agents/optimize.toml", &tmp.join("local")))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", show(&o));
    let o = head("ci/agents/optimize.toml", &tmp.join("jobs"), &[])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", show(&o));
    let (local, jobs) = (results(&tmp.join("local")), results(&tmp.join("jobs")));
    assert_eq!(local.len(), 2);
    assert_eq!(jobs.len(), 2);
    for (l, j) in local.iter().zip(&jobs) {
        assert_eq!(l["task_id"], j["task_id"]);
        for phase in ["baseline", "candidate"] {
            assert_eq!(gates(&l[phase]), gates(&j[phase]), "{phase}: {l} vs {j}");
        }
        assert!(score(j).speedup > 1.0, "{j}");
        assert!(score(j).score > 220.0, "{j}");
        for k in [
            "task",
            "harness",
            "image",
            "agent_image",
            "agent",
            "lockfile",
        ] {
            assert_eq!(
                j["provenance"][k], l["provenance"][k],
                "the same locked inputs"
            );
        }
    }
    // Both jobs ran at once, each on the GPU Slurm gave it.
    let gpus: BTreeSet<u64> = jobs
        .iter()
        .map(|r| r["gpu"]["index"].as_u64().unwrap())
        .collect();
    assert_eq!(gpus.len(), 2, "two jobs shared a GPU: {jobs:?}");
    let l = ledger(&tmp.join("jobs"));
    assert_eq!(l.len(), 2);
    assert!(l.iter().all(|j| j["state"] == "COMPLETED"), "{l:?}");

    // Nodes with their own, empty stores: each job fills its store from a bundle (every blob
    // verified) before it checks the images.
    let bundle = tmp.join("cpu-bundle.tar");
    let o = arenactl()
        .args([
            "bundle",
            "export",
            "--image-lock",
            "lockfiles/cpu.lock",
            "-o",
        ])
        .arg(&bundle)
        .arg("--store")
        .arg(store())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", show(&o));
    let node_store = tmp.join("node-store");
    let mut c = slurm.cmd(env!("CARGO_BIN_EXE_arenactl"));
    c.current_dir(repo())
        .args([
            "run",
            "--image-lock",
            "lockfiles/cpu.lock",
            "--agent",
            "ci/agents/break.toml",
        ])
        .args([
            "--gpus",
            "cpu:1",
            "--containerd",
            &d.socket,
            "--backend",
            "slurm",
            "--json",
        ])
        .arg("--store")
        .arg(&node_store)
        .arg("--bundle")
        .arg(&bundle)
        .arg("--out")
        .arg(tmp.join("bundled"));
    let o = c.output().unwrap();
    assert!(o.status.success(), "{}", show(&o));
    for r in results(&tmp.join("bundled")) {
        assert_eq!(score(&r).score, 20.0, "{r}");
    }
    assert!(node_store.join("blobs/sha256").read_dir().unwrap().count() > 3);

    // scancel of one job while its agent runs: the head records Slurm's verdict and (with no
    // retries) gives that task run up; the same command again runs only that one.
    let slow = tmp.join("slow.toml");
    std::fs::write(
        &slow,
        "name = \"slow\"\ncommand = [\"sh\", \"-c\", \"sleep 5\"]\ntimeout_s = 60\n",
    )
    .unwrap();
    let out = tmp.join("scancel");
    let args = ["--runs", "2", "--retries", "0"];
    let child = head(slow.to_str().unwrap(), &out, &args)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let victim = agent_started(&out);
    assert_eq!(slurm.state(&victim), "RUNNING");
    let o = slurm.cmd("scancel").arg(&victim).output().unwrap();
    assert!(o.status.success(), "{}", show(&o));
    let o = child.wait_with_output().unwrap();
    assert!(!o.status.success(), "a cancelled task run was not reported");
    let report: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(report["finished"], 3, "{report}");
    assert_eq!(report["errors"], 1, "{report}");
    let l = ledger(&out);
    let cancelled = l.iter().find(|j| j["job_id"] == victim.as_str()).unwrap();
    assert_eq!(cancelled["state"], "CANCELLED", "{cancelled}");
    assert!(
        cancelled["failure"]
            .as_str()
            .unwrap()
            .contains("ended CANCELLED"),
        "{cancelled}"
    );
    let before: Vec<(PathBuf, Vec<u8>)> = glob_results(&out)
        .into_iter()
        .map(|p| {
            let b = std::fs::read(&p).unwrap();
            (p, b)
        })
        .collect();
    let o = head(slow.to_str().unwrap(), &out, &args).output().unwrap();
    assert!(o.status.success(), "{}", show(&o));
    let report: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(report["finished"], 4, "{report}");
    for (p, b) in &before {
        assert_eq!(
            &std::fs::read(p).unwrap(),
            b,
            "a finished task run was repeated"
        );
    }
    let rs = results(&out);
    let keys = task_runs(&rs);
    assert_eq!((rs.len(), keys.len()), (4, 4), "a task run counted twice");
    let l = ledger(&out);
    assert_eq!(
        l.len(),
        5,
        "only the cancelled task run was submitted again: {l:?}"
    );

    // `arenactl cancel RUN_DIR` stops a run whose head is following it: no retries, exit 130,
    // and the jobs' containers are removed as they go.
    let out = tmp.join("cancel");
    let child = head(slow.to_str().unwrap(), &out, &["--retries", "3"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    agent_started(&out);
    let o = slurm
        .cmd(env!("CARGO_BIN_EXE_arenactl"))
        .args(["cancel", "--json"])
        .arg(&out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", show(&o));
    let cancelled: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(!cancelled["cancelled"].as_array().unwrap().is_empty());
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(130));
    assert!(ledger(&out)
        .iter()
        .all(|j| j["state"] == "CANCELLED" || j["state"] == "COMPLETED"));
    let t0 = Instant::now();
    for j in ledger(&out) {
        let id = j["job_id"].as_str().unwrap().to_string();
        while !matches!(slurm.state(&id).as_str(), "CANCELLED" | "COMPLETED" | "") {
            assert!(
                t0.elapsed() < Duration::from_secs(60),
                "job {id} did not end"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    assert!(empty(&d.leftovers()), "a cancelled job left containers");
}
