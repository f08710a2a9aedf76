//! A runner on the in-memory container engine, for unit tests: a tasks root with small tasks,
//! a store holding their image configs, a lockfile, agent files, and fake programs that play
//! the evaluator and the agent.
//!
//! The fake evaluator plays arena's gate runner (`gates.py`, the self-reported mode these
//! tasks are in): it follows the job's steps and writes the gates file, the reports and its
//! record.
//! A task's kernel (`source/k.py`) is a few `key=value` lines the fake evaluator obeys:
//! `speed=N` (its cases take 10/N ms), `compile=fail`, `correct=fail`, `sleep_ms=N` (the
//! evaluator takes that long), `panic=yes` (the program panics). Where no source is bound over
//! the image's (the baseline), the kernel is the original: `speed=1`. The fake agent obeys its
//! `FAKE_AGENT` environment variable: `write:<kernel>` (rewrites the kernel in the workspace),
//! `symlink` (replaces it with a link to /etc/passwd), `sleep` (sleeps an hour), `exit:N`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use arena_digest::Digest;
use arena_image::{ImageRecord, LayerRecord, Lockfile, Store};
use arena_run::RunRequest;
use arena_runtime::fake::{FakeProcess, FakeRuntime};

use crate::engine::Engine;
use crate::gpus::parse_gpus;
use crate::policy::Policy;

pub const TASKS: [&str; 2] = ["python2python/t/alpha", "python2python/t/beta"];

pub struct Fixture {
    pub dir: tempfile::TempDir,
    pub fake: FakeRuntime,
    pub lock_path: PathBuf,
    pub engine: Arc<Engine>,
}

fn task_config() -> &'static str {
    "task_type: python2python\nsource_file_path: [source/k.py]\ntarget_kernel_functions: [k]\n\
     compile_command: [\"python3 scripts/run.py compile\"]\n\
     correctness_command: [\"python3 scripts/run.py correctness\"]\n\
     performance_command: [\"python3 scripts/run.py performance\"]\n\
     compile_timeout: 5\ncorrectness_timeout: 5\nperformance_timeout: 5\n"
}

/// A kernel's `key=value` settings, from its source at `container_path` (the original's,
/// `speed=1`, where nothing is bound there).
pub fn kernel_at(p: &FakeProcess, container_path: &str) -> BTreeMap<String, String> {
    let text = p
        .host_path(container_path)
        .and_then(|h| std::fs::read_to_string(h).ok())
        .unwrap_or_else(|| "speed=1".into());
    text.lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect()
}

/// The kernel of a single evaluation (its sources bound over the image's task).
pub fn kernel(p: &FakeProcess) -> BTreeMap<String, String> {
    kernel_at(p, "/task/source/k.py")
}

fn report(dir: &Path, name: &str, ok: bool) {
    std::fs::create_dir_all(dir).unwrap();
    let body = if ok {
        r#"{"status":"ok","error":null}"#.to_string()
    } else {
        format!(r#"{{"status":"fail","error":"{name} failed"}}"#)
    };
    std::fs::write(dir.join(format!("{name}_report.json")), body).unwrap();
}

/// The fake evaluator: plays the gate runner's job step by step, each step's kernel following
/// its settings (the candidate's in a paired job from /arena/candidate, else what is bound
/// over /task), writing the gates file and the reports where the job says.
pub async fn evaluator(p: FakeProcess) -> u32 {
    let single = kernel(&p);
    let candidate = if p.host_path("/arena/candidate/source/k.py").is_some() {
        kernel_at(&p, "/arena/candidate/source/k.py")
    } else {
        single.clone()
    };
    if let Some(ms) = candidate.get("sleep_ms").and_then(|v| v.parse().ok()) {
        tokio::time::sleep(Duration::from_millis(ms)).await;
    }
    if candidate.contains_key("panic") {
        panic!("the evaluator program fell over");
    }
    let out = p.host_path("/arena/out").expect("out is bound");
    let job_file = p
        .host_path("/arena/job.json")
        .filter(|j| j.is_file())
        .expect("the gate runner's job is bound");
    let job: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(job_file).unwrap()).unwrap();
    let original: BTreeMap<String, String> = [("speed".to_string(), "1".to_string())].into();
    let mut gates = String::new();
    let mut commands = Vec::new();
    for step in job["steps"].as_array().unwrap() {
        let name = step["name"].as_str().unwrap();
        let uid = step["user"]["uid"].as_u64().unwrap();
        // The original runs as the baseline's user; a single evaluation of the agent's
        // sources (bound over /task) as the candidate's; a probe as the harness's.
        let k = if uid == u64::from(arena_eval::trusted::BASELINE.uid) {
            &original
        } else {
            &candidate
        };
        let gate = if name.starts_with("perf") || name == "performance" {
            "performance"
        } else if name.ends_with("compile") {
            "compile"
        } else {
            "correctness"
        };
        let ok = match gate {
            "compile" => k.get("compile").map(String::as_str) != Some("fail"),
            "correctness" => k.get("correct").map(String::as_str) != Some("fail"),
            _ => true,
        };
        if let Some(dst) = step["reports"].as_str() {
            let dir = out.join(dst);
            if gate == "performance" {
                let speed: f64 = k.get("speed").and_then(|v| v.parse().ok()).unwrap_or(1.0);
                let cases: Vec<String> = (1..=3)
                    .map(|i| {
                        format!(
                            r#"{{"test_case_id":"perf{i}","execution_time_ms":{}}}"#,
                            10.0 / speed
                        )
                    })
                    .collect();
                std::fs::create_dir_all(&dir).unwrap();
                std::fs::write(
                    dir.join("performance_report.json"),
                    format!("[{}]", cases.join(",")),
                )
                .unwrap();
            } else {
                report(&dir, gate, ok);
            }
        }
        gates.push_str(&format!("{name} {}\n", if ok { 0 } else { 1 }));
        commands.push(serde_json::json!({"step": name, "index": 0, "exit": if ok { 0 } else { 1 }, "wall_s": 0.5}));
        if !ok && !step["go_on"].as_bool().unwrap_or(false) {
            break;
        }
    }
    std::fs::write(out.join("gates"), gates).unwrap();
    let mut record =
        serde_json::json!({"mode": "self_reported", "commands": commands, "reports": {}});
    if job.get("floor").is_some() {
        record["floor"] = serde_json::json!({"cpu_call_ms": 3e-5, "gpu": null});
    }
    std::fs::write(out.join("evaluator.json"), record.to_string()).unwrap();
    p.print("evaluator done\n");
    0
}

/// The fake agent: does what its `FAKE_AGENT` says to the workspace.
pub async fn agent(p: FakeProcess) -> u32 {
    let what = p.env("FAKE_AGENT").unwrap_or_default();
    let ws = p.host_path("/workspace").expect("workspace is bound");
    let k = ws.join("source/k.py");
    if let Some(body) = what.strip_prefix("write:") {
        std::fs::write(&k, body.replace(';', "\n")).unwrap();
    } else if what == "symlink" {
        std::fs::remove_file(&k).unwrap();
        std::os::unix::fs::symlink("/etc/passwd", &k).unwrap();
    } else if what == "sleep" {
        tokio::time::sleep(Duration::from_secs(3600)).await;
    } else if let Some(code) = what.strip_prefix("exit:") {
        return code.parse().unwrap_or(1);
    }
    0
}

impl Fixture {
    pub fn new() -> Fixture {
        Fixture::with_gpus("fake:1")
    }

    pub fn with_gpus(gpus: &str) -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let store = Store::open(&root.join("store")).unwrap();
        let mut images = Vec::new();
        for id in TASKS {
            let t = root.join("tasks").join(id);
            std::fs::create_dir_all(t.join("source")).unwrap();
            std::fs::create_dir_all(t.join("scripts")).unwrap();
            std::fs::write(t.join("config.yaml"), task_config()).unwrap();
            std::fs::write(t.join("source/k.py"), "speed=1\n").unwrap();
            std::fs::write(t.join("scripts/run.py"), "# the harness\n").unwrap();
            let config = format!(r#"{{"config":{{"Env":["PATH=/usr/bin:/bin","TASK={id}"]}}}}"#);
            let config_digest = store.put_bytes(config.as_bytes()).unwrap();
            images.push(ImageRecord {
                name: format!("arena/test/{id}"),
                derivation: Digest::of_bytes(id.as_bytes()),
                base: "scratch".into(),
                task: Some(id.to_string()),
                task_digest: Some(arena_task::task_digest(&t).unwrap().to_string()),
                layers: vec![LayerRecord {
                    digest: Digest::of_bytes(b"layer"),
                    diff_id: Digest::of_bytes(b"diff"),
                    size: 5,
                    media_type: "application/vnd.oci.image.layer.v1.tar".into(),
                }],
                config: config_digest,
                config_size: config.len() as u64,
                manifest: Digest::of_bytes(format!("manifest {id}").as_bytes()),
                manifest_size: 10,
            });
        }
        std::fs::create_dir_all(root.join("images")).unwrap();
        std::fs::write(
            root.join("images/sets.toml"),
            "[[set]]\nname = \"test\"\nrecipe = \"none.toml\"\ntasks = \"../tasks\"\ntask_types = [\"python2python\"]\n",
        )
        .unwrap();
        let lock = Lockfile {
            version: 1,
            set: "test".into(),
            sets: "../images/sets.toml".into(),
            pins: vec![],
            images,
        };
        std::fs::create_dir_all(root.join("lockfiles")).unwrap();
        let lock_path = root.join("lockfiles/test.lock");
        lock.write(&lock_path).unwrap();
        std::fs::create_dir_all(root.join("agents")).unwrap();
        let fake = FakeRuntime::new();
        fake.program(
            |s| s.config.args.iter().any(|a| a.ends_with("/gates.py")),
            evaluator,
        );
        fake.program(|s| s.config.args.iter().any(|a| a == "fake-agent"), agent);
        let engine = Arc::new(Engine::new(
            Arc::new(fake.clone()),
            store.clone(),
            parse_gpus(gpus).unwrap(),
            vec![root.join("agents")],
            Policy::new(false, &[root.join("agents")], vec!["admin".into()]).unwrap(),
        ));
        Fixture {
            dir,
            fake,
            lock_path,
            engine,
        }
    }

    pub fn root(&self) -> &Path {
        self.dir.path()
    }

    /// Writes `agents/NAME.toml`: the fake agent doing `what`, with `extra` TOML lines.
    pub fn agent(&self, name: &str, what: &str, extra: &str) -> String {
        let timeout = if extra.contains("timeout_s") {
            ""
        } else {
            "timeout_s = 30\n"
        };
        let text = format!(
            "name = \"{name}\"\ncommand = [\"fake-agent\"]\n{timeout}\
             env = {{ FAKE_AGENT = \"{what}\" }}\n{extra}"
        );
        std::fs::write(self.root().join(format!("agents/{name}.toml")), text).unwrap();
        name.to_string()
    }

    pub fn request(&self, agent: &str, out: &str) -> RunRequest {
        RunRequest {
            image_lock: self.lock_path.clone(),
            tasks: Vec::new(),
            agent: agent.to_string(),
            runs: 1,
            run_dir: self.root().join(out),
            hidden_set: None,
            memory: None,
            perf_pairs: None,
            trusted_pairs: None,
            checked_calls: None,
            secrets: Default::default(),
            probe: false,
        }
    }
}

/// Waits until the run's last event, and returns its state.
pub async fn wait_end(h: &crate::engine::RunHandle) -> arena_proto::v1::RunState {
    let (history, mut live) = h.events.subscribe();
    if !history.iter().any(arena_run::events::is_terminal) {
        loop {
            match tokio::time::timeout(Duration::from_secs(600), live.recv()).await {
                Ok(Ok(ev)) if arena_run::events::is_terminal(&ev) => break,
                Ok(Ok(_)) => {}
                Ok(Err(e)) => panic!("event stream: {e}"),
                Err(_) => panic!("the run did not end"),
            }
        }
    }
    h.state().0
}

impl Fixture {
    /// Submits `agent` on every task into `out` and waits for the run to end.
    pub async fn run(
        &self,
        agent: &str,
        out: &str,
    ) -> (Arc<crate::engine::RunHandle>, arena_proto::v1::RunState) {
        let (h, _) = self
            .engine
            .submit(self.request(agent, out), None)
            .await
            .expect("submitted");
        let state = wait_end(&h).await;
        (h, state)
    }

    /// The result of task `i` (of [`TASKS`]), repeat 0, in run directory `out`.
    pub fn result(&self, out: &str, i: usize) -> Option<arena_run::TaskResult> {
        let rd = arena_run::RunDir::new(&self.root().join(out)).unwrap();
        rd.load_result(&arena_run::Item {
            task_id: TASKS[i].into(),
            repeat: 0,
        })
    }

    /// The specs of the containers created so far whose id ends with `-<phase>`.
    pub fn specs(&self, phase: &str) -> Vec<arena_runtime::ContainerSpec> {
        self.fake
            .history()
            .into_iter()
            .filter(|s| s.id.ends_with(&format!("-{phase}")))
            .collect()
    }
}

/// The messages of a run's events of `kind`.
pub fn messages(h: &crate::engine::RunHandle, kind: arena_proto::v1::EventKind) -> Vec<String> {
    h.events
        .subscribe()
        .0
        .into_iter()
        .filter(|e| e.kind == kind as i32)
        .map(|e| e.message)
        .collect()
}

/// The bind mount of `spec` at `dst`, if any.
pub fn bind_of<'a>(
    spec: &'a arena_runtime::ContainerSpec,
    dst: &str,
) -> Option<&'a arena_runtime::BindMount> {
    spec.config.binds.iter().find(|b| b.destination == dst)
}
