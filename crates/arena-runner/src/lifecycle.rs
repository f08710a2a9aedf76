//! One task run, start to finish: the locked image, a fresh workspace, the baseline evaluation
//! of the untouched sources, the agent in its container, the evaluation of the agent's declared
//! sources in a fresh evaluator container, and the task result, written atomically.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use arena_eval::layout::{self, GATES_FILE, OUT_DIR, SCRIPT};
use arena_eval::sources::StagedSource;
use arena_eval::{collect, gate_script, stage_sources, GateTimeouts};
use arena_image::{ImageRecord, Lockfile, Store};
use arena_proto::v1::EventKind;
use arena_report::record::TASK_RESULT_SCHEMA;
use arena_report::UnseenResult;
use arena_report::{Evaluation, GateReport, GateStatus, TaskResult};
use arena_runtime::{
    run_container, BindMount, ContainerConfig, Containerd, ImageRef, Network, RunOutcome,
    RunRequest,
};
use arena_task::declarations::Declaration;
use arena_task::hidden::TaskUnseen;
use arena_task::{EntryKind, Task};
use serde_json::json;
use sha2::{Digest, Sha256};
use tokio::sync::watch;

use crate::agent::{Agent, AgentImage, PROMPT_FILE, REFERENCE, WORKSPACE};
use crate::error::{Result, RunnerError};
use crate::events::{Detail, Events};
use crate::gpus::Gpu;
use crate::rundir::{write_json, Item, RunDir, RunRecord};

/// Bytes of each container stream kept in the logs.
const LOG_CAP: u64 = 8 << 20;

/// What every task run of one run shares.
pub struct RunContext {
    pub containerd: Containerd,
    pub store: Store,
    pub record: RunRecord,
    pub rundir: RunDir,
    pub agent: Agent,
    pub lock: Lockfile,
    pub tasks: BTreeMap<String, Task>,
    pub events: Arc<Events>,
    pub cancel: watch::Receiver<bool>,
    /// The environment agent `env_passthrough` entries are read from.
    pub env: HashMap<String, String>,
    /// The sealed hidden set of unseen configurations, if the run has one.
    pub hidden: Option<HiddenSet>,
    /// This runner start's part of container names ([`new_attempt`]).
    pub attempt: String,
}

/// A verified sealed set: its directory, digest, and the file of each task it covers.
#[derive(Debug, Clone)]
pub struct HiddenSet {
    pub dir: PathBuf,
    pub digest: String,
    pub files: BTreeMap<String, String>,
}

/// Where an unseen evaluator sees its task's hidden file (read-only). No other container
/// ever gets a mount of the hidden set.
pub const HIDDEN_MOUNT: &str = "/arena/hidden/task.json";

/// The image's configured environment (`config.Env`), from its config blob in the store.
pub fn image_env(store: &Store, rec: &ImageRecord) -> Result<Vec<String>> {
    let bytes = store.read_blob(&rec.config)?;
    let v: serde_json::Value = serde_json::from_slice(&bytes)
        .map_err(|e| RunnerError::invalid(&rec.name, "config", e.to_string()))?;
    Ok(v.pointer("/config/Env")
        .and_then(|e| e.as_array())
        .map(|a| {
            a.iter()
                .filter_map(|s| s.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default())
}

fn short_hash(s: &str) -> String {
    hex::encode(&Sha256::digest(s.as_bytes())[..4])
}

/// `<run id>-<attempt>-<task hash>-r<repeat>-<phase>`: every container of a run shares the run
/// id prefix that a resumed runner cleans by, and each runner start (`attempt`) uses new names,
/// because a runner killed while containerd was starting a task can leave that task's shim
/// state behind under the old name, where a new task of the same name cannot be created.
pub fn container_id(run_id: &str, attempt: &str, item: &Item, phase: &str) -> String {
    format!(
        "{run_id}-{attempt}-{}-r{}-{phase}",
        short_hash(&item.task_id),
        item.repeat
    )
}

/// Whether a container id is one of `item`'s in run `run_id` (any runner start, any phase).
pub fn is_item_container(id: &str, run_id: &str, item: &Item) -> bool {
    let marker = format!("-{}-r{}-", short_hash(&item.task_id), item.repeat);
    id.starts_with(&format!("{run_id}-")) && id.contains(&marker)
}

/// A short name for one runner start of a run (see [`container_id`]).
pub fn new_attempt() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!(
        "{:06x}",
        (nanos ^ (u128::from(std::process::id()) << 20)) & 0xff_ffff
    )
}

/// Copies the task tree (without build/ and caches) into a new workspace.
fn copy_task_tree(task_dir: &Path, dest: &Path) -> Result<()> {
    std::fs::create_dir_all(dest).map_err(|e| RunnerError::io(dest, e))?;
    for e in arena_task::task_tree(task_dir)? {
        let to = dest.join(&e.rel);
        match &e.kind {
            EntryKind::Dir => {
                std::fs::create_dir_all(&to).map_err(|err| RunnerError::io(&to, err))?
            }
            EntryKind::File { .. } => {
                std::fs::copy(&e.path, &to).map_err(|err| RunnerError::io(&to, err))?;
            }
            EntryKind::Symlink { target } => {
                std::os::unix::fs::symlink(target, &to).map_err(|err| RunnerError::io(&to, err))?
            }
        }
    }
    Ok(())
}

fn bind(source: impl Into<PathBuf>, destination: &str, readonly: bool) -> BindMount {
    BindMount {
        source: source.into(),
        destination: destination.to_string(),
        readonly,
    }
}

/// Gate names in events: the unseen evaluations say which they are.
fn gate_label(phase: &str, gate: &str) -> String {
    if phase.starts_with("unseen") {
        format!("{phase} {gate}")
    } else {
        gate.to_string()
    }
}

struct Phase {
    evaluation: Evaluation,
    outcome: RunOutcome,
}

impl RunContext {
    fn record_of(&self, task_id: &str) -> Result<&ImageRecord> {
        self.lock.task_image(task_id).ok_or_else(|| {
            RunnerError::invalid(
                &self.record.image_lock,
                "image",
                format!("no image for task {task_id}"),
            )
        })
    }

    fn runtime_err(&self, item: &Item, e: arena_runtime::RuntimeError) -> RunnerError {
        RunnerError::Runtime {
            task: item.label(),
            source: e,
        }
    }

    /// Runs one container of a task run (`phase` names it) with the run's log directory, log
    /// cap and cancel signal.
    async fn container(
        &self,
        item: &Item,
        phase: &str,
        image: &ImageRef,
        config: ContainerConfig,
        timeout_s: u64,
    ) -> Result<RunOutcome> {
        let req = RunRequest {
            id: container_id(&self.record.run_id, &self.attempt, item, phase),
            image: image.clone(),
            config,
            timeout: Duration::from_secs(timeout_s),
            log_dir: self.rundir.item_dir(item).join("logs"),
            log_cap: LOG_CAP,
            labels: HashMap::new(),
            cancel: Some(self.cancel.clone()),
        };
        let out = run_container(&self.containerd, req)
            .await
            .map_err(|e| self.runtime_err(item, e))?;
        if out.cancelled {
            return Err(RunnerError::Cancelled);
        }
        Ok(out)
    }

    /// A fresh evaluator container running a generated script: the image's task, `sources`
    /// bound read-only over its files, the phase's `out/` and `build/` (emptied first) bound
    /// read-write, no network, the task run's GPU. Returns the out and build directories.
    async fn evaluator(&self, run: EvaluatorRun<'_>) -> Result<(PathBuf, PathBuf, RunOutcome)> {
        let dir = self.rundir.item_dir(run.item).join(run.phase);
        let (out, build) = (dir.join("out"), dir.join("build"));
        for d in [&out, &build] {
            // Reports of an earlier evaluation (an unseen set evaluated again) must not stand
            // in for this one's. (The phase directory itself may hold the staged sources.)
            let _ = std::fs::remove_dir_all(d);
            std::fs::create_dir_all(d).map_err(|e| RunnerError::io(d, e))?;
        }
        let script = dir.join(run.script_name);
        std::fs::write(&script, &run.script).map_err(|e| RunnerError::io(&script, e))?;
        let mut cfg = ContainerConfig::command(&["sh", SCRIPT]);
        cfg.env = arena_runtime::spec::merge_env(run.env);
        cfg.cwd = layout::TASK_ROOT.into();
        cfg.network = Network::None;
        cfg.devices = run
            .gpu
            .profile
            .resolve()
            .map_err(|e| self.runtime_err(run.item, e))?;
        cfg.binds = vec![
            bind(&script, SCRIPT, true),
            bind(&out, OUT_DIR, false),
            bind(&build, &layout::build_dir(), false),
        ];
        for s in run.sources {
            cfg.binds
                .push(bind(&s.host, &layout::source_path(&s.rel), true));
        }
        cfg.binds.extend(run.extra_binds.iter().cloned());
        let outcome = self
            .container(run.item, run.phase, run.image, cfg, run.limit_s)
            .await?;
        Ok((out, build, outcome))
    }

    /// One gated evaluation in a fresh evaluator container: the image's harness, `sources`
    /// bound over the task's own files, no network.
    #[allow(clippy::too_many_arguments)]
    async fn evaluate(
        &self,
        item: &Item,
        task: &Task,
        image: &ImageRef,
        env: &[String],
        gpu: &Gpu,
        phase: &str,
        sources: &[StagedSource],
        extra_binds: &[BindMount],
        event: EventKind,
    ) -> Result<Phase> {
        let timeouts = GateTimeouts::for_task(&task.config);
        let run = EvaluatorRun {
            item,
            image,
            env,
            gpu,
            phase,
            script_name: "gates.sh",
            script: gate_script(&task.config, &timeouts),
            sources,
            extra_binds,
            limit_s: timeouts.total(),
        };
        let (out, build, outcome) = self.evaluator(run).await?;
        let note = outcome
            .timed_out
            .then(|| format!("evaluator timed out after {} s", timeouts.total()));
        let evaluation = collect(&out, &build, note.as_deref());
        let _ = std::fs::remove_file(out.join(GATES_FILE));
        for (gate, r) in [
            ("compile", &evaluation.compile),
            ("correctness", &evaluation.correctness),
        ] {
            if r.status != GateStatus::Skipped {
                self.events.emit(
                    event,
                    Some(item),
                    Detail {
                        gpu: Some(gpu.index),
                        gate: gate_label(phase, gate),
                        passed: r.passed(),
                        message: r.error.clone().unwrap_or_default(),
                        ..Default::default()
                    },
                );
            }
        }
        if evaluation.correct() {
            let ok = !evaluation.performance.is_empty()
                && evaluation.performance.iter().all(|c| c.measured());
            self.events.emit(
                event,
                Some(item),
                Detail {
                    gpu: Some(gpu.index),
                    gate: gate_label(phase, "performance"),
                    passed: ok,
                    message: format!("{} cases", evaluation.performance.len()),
                    ..Default::default()
                },
            );
        }
        Ok(Phase {
            evaluation,
            outcome,
        })
    }

    /// The agent in its own container: workspace read-write, the task read-only, the prompt.
    async fn run_agent(
        &self,
        item: &Item,
        task: &Task,
        image: &ImageRef,
        env: &[String],
        gpu: &Gpu,
        workspace: &Path,
    ) -> Result<RunOutcome> {
        let agent_dir = self.rundir.item_dir(item).join("agent");
        std::fs::create_dir_all(&agent_dir).map_err(|e| RunnerError::io(&agent_dir, e))?;
        let prompt = crate::prompt::prompt(task, &self.agent, &gpu.kind);
        let pf = agent_dir.join("prompt.md");
        std::fs::write(&pf, &prompt).map_err(|e| RunnerError::io(&pf, e))?;
        let args = self.agent.render_command(&task.id, &prompt);
        let mut cfg = ContainerConfig::command(&[]);
        cfg.args = args;
        let mut envs = env.to_vec();
        envs.extend(self.agent.environment(|k| self.env.get(k).cloned()));
        envs.push(format!("ARENA_TASK_ID={}", task.id));
        envs.push(format!("ARENA_PROMPT_FILE={PROMPT_FILE}"));
        envs.push(format!("ARENA_WORKSPACE={WORKSPACE}"));
        cfg.env = arena_runtime::spec::merge_env(&envs);
        cfg.cwd = WORKSPACE.into();
        cfg.network = self.agent.network;
        cfg.devices = gpu
            .profile
            .resolve()
            .map_err(|e| self.runtime_err(item, e))?;
        cfg.tmp_bytes = 1 << 30;
        cfg.binds = vec![
            bind(workspace, WORKSPACE, false),
            bind(&task.dir, REFERENCE, true),
            bind(&agent_dir, "/arena", true),
        ];
        for m in &self.agent.mounts {
            cfg.binds.push(bind(&m.host, &m.container, true));
        }
        self.events.emit(
            EventKind::AgentStarted,
            Some(item),
            Detail {
                gpu: Some(gpu.index),
                message: self.agent.name.clone(),
                ..Default::default()
            },
        );
        let out = self
            .container(item, "agent", image, cfg, self.agent.timeout_s)
            .await?;
        self.events.emit(
            EventKind::AgentFinished,
            Some(item),
            Detail {
                gpu: Some(gpu.index),
                passed: out.exit_code == 0 && !out.timed_out,
                message: if out.timed_out {
                    format!("timed out after {} s", self.agent.timeout_s)
                } else {
                    format!("exit {} after {:.1} s", out.exit_code, out.durations.run_s)
                },
                ..Default::default()
            },
        );
        Ok(out)
    }

    /// The original and the agent's kernel on the task's hidden unseen configurations:
    /// private copies of the harness with the declaration rewritten are bound over the image's,
    /// the task's hidden file is bound read-only, both only into these evaluator containers,
    /// and the copies are removed afterwards. A list declaration (`TEST_SHAPES`, parametrize)
    /// holds every configuration in one evaluation, and a kernel that fails it is probed per
    /// configuration for the failure counts; `get_inputs()` describes one configuration, so
    /// each is its own evaluation.
    pub(crate) async fn evaluate_unseen(
        &self,
        item: &Item,
        task: &Task,
        image: &ImageRef,
        env: &[String],
        gpu: &Gpu,
        staged: Option<&[StagedSource]>,
    ) -> Result<Option<UnseenResult>> {
        let Some(hidden) = &self.hidden else {
            return Ok(None);
        };
        let Some(file) = hidden.files.get(&task.id) else {
            return Ok(None);
        };
        let hidden_file = hidden.dir.join(file);
        let text =
            std::fs::read_to_string(&hidden_file).map_err(|e| RunnerError::io(&hidden_file, e))?;
        let set: TaskUnseen = serde_json::from_str(&text)
            .map_err(|e| RunnerError::invalid(hidden_file.display(), "(json)", e.to_string()))?;
        let private = self.rundir.item_dir(item).join("unseen-harness");
        let _ = std::fs::remove_dir_all(&private);
        let unseen = UnseenEval {
            ctx: self,
            item,
            task,
            image,
            env,
            gpu,
            hidden_file: &hidden_file,
            decl: Declaration::parse(&set.declaration),
            files: std::iter::once(set.harness.clone())
                .chain(set.also.iter().cloned())
                .collect(),
            set: &set,
            private: &private,
        };
        let outcome = async {
            let original = unseen.kernel("unseen-original", &[]).await?;
            let optimized = match staged {
                Some(s) => Some(unseen.kernel("unseen-optimized", s).await?),
                None => None,
            };
            Ok::<_, RunnerError>((original, optimized))
        }
        .await;
        let _ = std::fs::remove_dir_all(&private);
        let (original, optimized) = outcome?;
        let optimized = match optimized {
            Some(p) => p,
            None => KernelOnUnseen {
                evaluation: Evaluation {
                    compile: GateReport::new(
                        GateStatus::Fail,
                        Some("the agent's sources were refused".into()),
                    ),
                    correctness: GateReport::new(GateStatus::Skipped, None),
                    performance: Vec::new(),
                },
                failures: unseen.count(&vec![false; set.configs.len()]),
            },
        };
        Ok(Some(UnseenResult {
            set_digest: hidden.digest.clone(),
            original: original.evaluation,
            optimized: optimized.evaluation,
            failures_by_category: optimized.failures,
            original_failures_by_category: original.failures,
        }))
    }

    /// A task run's task, its locked image (in containerd, imported if missing) and the
    /// image's environment.
    async fn task_image(
        &self,
        item: &Item,
    ) -> Result<(&Task, &ImageRecord, ImageRef, Vec<String>)> {
        let task = self
            .tasks
            .get(&item.task_id)
            .ok_or_else(|| RunnerError::Other(format!("{}: task not loaded", item.task_id)))?;
        let rec = self.record_of(&task.id)?;
        let image = arena_runtime::ensure_image(&self.containerd, &self.store, rec)
            .await
            .map_err(|e| self.runtime_err(item, e))?;
        let env = image_env(&self.store, rec)?;
        Ok((task, rec, image, env))
    }

    /// Evaluates a finished task run on the run's hidden set: the agent's declared sources are
    /// staged again from its workspace (as the evaluator took them), and the result gains the
    /// unseen result, written atomically. Its seen result is not touched.
    pub async fn run_unseen_item(&self, item: &Item, gpu: &Gpu) -> Result<TaskResult> {
        let mut result = self.rundir.load_result(item).ok_or_else(|| {
            RunnerError::Other(format!("{}: no finished result to evaluate", item.label()))
        })?;
        let (task, _, image, env) = self.task_image(item).await?;
        let item_dir = self.rundir.item_dir(item);
        let stage = item_dir.join("unseen-candidate/src");
        let _ = std::fs::remove_dir_all(&stage);
        let staged = stage_sources(
            &item_dir.join("workspace"),
            &task.config.source_file_path,
            &stage,
        )
        .ok();
        let unseen = self
            .evaluate_unseen(item, task, &image, &env, gpu, staged.as_deref())
            .await?;
        let _ = std::fs::remove_dir_all(item_dir.join("unseen-candidate"));
        result.unseen = unseen;
        write_json(&self.rundir.result_path(item), &result)?;
        Ok(result)
    }

    /// Runs one task run to its result (written to `result.json`).
    pub async fn run_item(&self, item: &Item, gpu: &Gpu) -> Result<TaskResult> {
        let t0 = Instant::now();
        let (task, rec, image, env) = self.task_image(item).await?;
        let (agent_image, agent_env) = match &self.agent.image {
            AgentImage::Task => (image.clone(), env.clone()),
            AgentImage::Locked(name) => {
                let r = self
                    .lock
                    .images
                    .iter()
                    .find(|r| &r.name == name)
                    .ok_or_else(|| {
                        RunnerError::invalid(
                            self.agent.file.display(),
                            "image",
                            format!("lock:{name} is not in the lockfile"),
                        )
                    })?;
                let img = arena_runtime::ensure_image(&self.containerd, &self.store, r)
                    .await
                    .map_err(|e| self.runtime_err(item, e))?;
                (img, image_env(&self.store, r)?)
            }
        };
        self.events.emit(
            EventKind::ImageVerified,
            Some(item),
            Detail {
                gpu: Some(gpu.index),
                message: image.manifest.to_string(),
                passed: true,
                ..Default::default()
            },
        );

        let baseline = self
            .evaluate(
                item,
                task,
                &image,
                &env,
                gpu,
                "baseline",
                &[],
                &[],
                EventKind::BaselineGate,
            )
            .await?;

        let workspace = self.rundir.item_dir(item).join("workspace");
        copy_task_tree(&task.dir, &workspace)?;
        let agent = self
            .run_agent(item, task, &agent_image, &agent_env, gpu, &workspace)
            .await?;

        let stage = self.rundir.item_dir(item).join("candidate/src");
        let (candidate, staging_error) =
            match stage_sources(&workspace, &task.config.source_file_path, &stage) {
                Ok(staged) => {
                    let p = self
                        .evaluate(
                            item,
                            task,
                            &image,
                            &env,
                            gpu,
                            "candidate",
                            &staged,
                            &[],
                            EventKind::EvaluatorGate,
                        )
                        .await?;
                    (Some((p, staged)), None)
                }
                // The agent left something the evaluator refuses to take: its work fails to
                // compile, with the reason, and no container sees it.
                Err(e) => (None, Some(e.to_string())),
            };
        let candidate_eval = match (&candidate, &staging_error) {
            (Some((p, _)), _) => p.evaluation.clone(),
            (None, err) => {
                let r = GateReport::new(GateStatus::Fail, err.clone());
                self.events.emit(
                    EventKind::EvaluatorGate,
                    Some(item),
                    Detail {
                        gpu: Some(gpu.index),
                        gate: "compile".into(),
                        passed: false,
                        message: err.clone().unwrap_or_default(),
                        ..Default::default()
                    },
                );
                Evaluation {
                    compile: r,
                    correctness: GateReport::new(GateStatus::Skipped, None),
                    performance: Vec::new(),
                }
            }
        };

        let staged = candidate.as_ref().map(|(_, s)| s.as_slice());
        let unseen = self
            .evaluate_unseen(item, task, &image, &env, gpu, staged)
            .await?;

        let mut result = TaskResult {
            schema: TASK_RESULT_SCHEMA.into(),
            task_id: task.id.clone(),
            task_type: task.config.task_type.as_str().to_string(),
            repeat: item.repeat,
            baseline: baseline.evaluation.clone(),
            candidate: candidate_eval,
            unseen,
            extra: Default::default(),
        };
        let score = arena_report::score_task(&result);
        let rel = |p: &Path| {
            p.strip_prefix(&self.rundir.root)
                .unwrap_or(p)
                .display()
                .to_string()
        };
        let container = |o: &RunOutcome| {
            json!({
                "id": o.id, "exit_code": o.exit_code, "timed_out": o.timed_out,
                "create_s": o.durations.create_s, "start_s": o.durations.start_s,
                "run_s": o.durations.run_s, "teardown_s": o.durations.teardown_s,
                "stdout": rel(&o.stdout), "stderr": rel(&o.stderr),
                "stdout_truncated": o.stdout_truncated, "stderr_truncated": o.stderr_truncated,
            })
        };
        let x = &mut result.extra;
        x.insert("run_id".into(), json!(self.record.run_id));
        x.insert("speedup".into(), json!(score.speedup));
        x.insert("score".into(), json!(score.score));
        x.insert("gpu".into(), json!({"index": gpu.index, "kind": gpu.kind}));
        x.insert(
            "digests".into(),
            json!({
                "image_manifest": rec.manifest.to_string(),
                "agent_image_manifest": agent_image.manifest.to_string(),
                "task": rec.task_digest,
                "harness": arena_task::harness_digest(&task.dir, &task.config.source_file_path)?,
                "agent": self.agent.digest,
                "lockfile": self.record.lock_digest,
            }),
        );
        x.insert(
            "agent".into(),
            json!({"name": self.agent.name, "container": container(&agent)}),
        );
        x.insert(
            "containers".into(),
            json!({
                "baseline": container(&baseline.outcome),
                "candidate": candidate.as_ref().map(|(p, _)| container(&p.outcome)),
            }),
        );
        if let Some(e) = staging_error {
            x.insert("candidate_refused".into(), json!(e));
        }
        x.insert("duration_s".into(), json!(t0.elapsed().as_secs_f64()));
        write_json(&self.rundir.result_path(item), &result)?;
        Ok(result)
    }
}

/// One evaluator container: which task run, phase and GPU, the script it runs, what is bound
/// in, and how long it may take.
struct EvaluatorRun<'a> {
    item: &'a Item,
    image: &'a ImageRef,
    env: &'a [String],
    gpu: &'a Gpu,
    phase: &'a str,
    script_name: &'a str,
    script: String,
    sources: &'a [StagedSource],
    extra_binds: &'a [BindMount],
    limit_s: u64,
}

/// One kernel's evaluation on the unseen configurations, and the configurations it fails
/// by category.
struct KernelOnUnseen {
    evaluation: Evaluation,
    failures: BTreeMap<String, u32>,
}

/// What evaluating one task on its unseen set needs.
struct UnseenEval<'a> {
    ctx: &'a RunContext,
    item: &'a Item,
    task: &'a Task,
    image: &'a ImageRef,
    env: &'a [String],
    gpu: &'a Gpu,
    hidden_file: &'a Path,
    decl: Declaration,
    /// The files the declaration is rewritten in (relative to the task).
    files: Vec<String>,
    set: &'a TaskUnseen,
    /// The run directory's private copies (removed after the evaluations).
    private: &'a Path,
}

impl UnseenEval<'_> {
    /// Writes the task's declaration files rewritten with `entries` under `dir`.
    fn write_variant(&self, dir: &Path, entries: &[String]) -> Result<()> {
        for rel in &self.files {
            let host = self.task.dir.join(rel);
            let src = std::fs::read_to_string(&host).map_err(|e| RunnerError::io(&host, e))?;
            let text =
                arena_task::declarations::rewrite(&src, &self.decl, entries).map_err(|e| {
                    RunnerError::invalid(host.display(), &self.set.declaration, e.to_string())
                })?;
            let to = dir.join(rel);
            if let Some(parent) = to.parent() {
                std::fs::create_dir_all(parent).map_err(|e| RunnerError::io(parent, e))?;
            }
            std::fs::write(&to, text).map_err(|e| RunnerError::io(&to, e))?;
        }
        Ok(())
    }

    /// Read-only binds of a variant's files over the image's, and of the task's hidden file.
    fn binds(&self, dir: &Path) -> Vec<BindMount> {
        let mut b: Vec<BindMount> = self
            .files
            .iter()
            .map(|rel| bind(dir.join(rel), &layout::source_path(rel), true))
            .collect();
        b.push(bind(self.hidden_file, HIDDEN_MOUNT, true));
        b
    }

    fn entries(&self) -> Vec<String> {
        self.set.configs.iter().map(|c| c.entry.clone()).collect()
    }

    /// Failed configurations by category, from one pass/fail per configuration.
    fn count(&self, passed: &[bool]) -> BTreeMap<String, u32> {
        let mut out = BTreeMap::new();
        for (c, ok) in self.set.configs.iter().zip(passed) {
            if !ok {
                *out.entry(c.category.as_str().to_string()).or_default() += 1;
            }
        }
        out
    }

    async fn evaluate(&self, phase: &str, sources: &[StagedSource], dir: &Path) -> Result<Phase> {
        self.ctx
            .evaluate(
                self.item,
                self.task,
                self.image,
                self.env,
                self.gpu,
                phase,
                sources,
                &self.binds(dir),
                EventKind::EvaluatorGate,
            )
            .await
    }

    /// One kernel (`sources` over the image's; none for the original) on the whole set.
    async fn kernel(&self, phase: &str, sources: &[StagedSource]) -> Result<KernelOnUnseen> {
        let n = self.set.configs.len();
        if self.decl.one_config_per_file() {
            let mut evals = Vec::new();
            for (k, entry) in self.entries().into_iter().enumerate() {
                let dir = self.private.join(format!("{phase}-{k}"));
                self.write_variant(&dir, &[entry])?;
                evals.push(
                    self.evaluate(&format!("{phase}-{k}"), sources, &dir)
                        .await?,
                );
            }
            let passed: Vec<bool> = evals.iter().map(|p| p.evaluation.correct()).collect();
            let evaluation =
                merge_per_config(evals.into_iter().map(|p| p.evaluation).collect(), self.set);
            return Ok(KernelOnUnseen {
                evaluation,
                failures: self.count(&passed),
            });
        }
        let dir = self.private.join(phase);
        self.write_variant(&dir, &self.entries())?;
        let evaluation = self.evaluate(phase, sources, &dir).await?.evaluation;
        let passed = if evaluation.correct() {
            vec![true; n]
        } else if evaluation.compiled() {
            self.probe(&format!("{phase}-probe"), sources).await?
        } else {
            vec![false; n]
        };
        Ok(KernelOnUnseen {
            evaluation,
            failures: self.count(&passed),
        })
    }

    /// Compiles once and runs correctness per configuration in one evaluator container.
    async fn probe(&self, phase: &str, sources: &[StagedSource]) -> Result<Vec<bool>> {
        let n = self.set.configs.len();
        let variants = self.private.join(phase);
        for (k, entry) in self.entries().into_iter().enumerate() {
            self.write_variant(&variants.join(k.to_string()), &[entry])?;
        }
        let timeouts = GateTimeouts::for_task(&self.task.config);
        let extra = [
            bind(&variants, arena_eval::probe::PROBE_DIR, true),
            bind(self.hidden_file, HIDDEN_MOUNT, true),
        ];
        let run = EvaluatorRun {
            item: self.item,
            image: self.image,
            env: self.env,
            gpu: self.gpu,
            phase,
            script_name: "probe.sh",
            script: arena_eval::probe_script(&self.task.config, &timeouts, &self.files, n),
            sources,
            extra_binds: &extra,
            limit_s: timeouts.compile + timeouts.correctness * n as u64 + 60,
        };
        let (out, _, _) = self.ctx.evaluator(run).await?;
        let passed = arena_eval::read_probe(&out, n).unwrap_or_else(|| vec![false; n]);
        let failed = passed.iter().filter(|p| !**p).count();
        self.ctx.events.emit(
            EventKind::EvaluatorGate,
            Some(self.item),
            Detail {
                gpu: Some(self.gpu.index),
                gate: gate_label(phase, "per-configuration correctness"),
                passed: failed == 0,
                message: format!("{failed} of {n} unseen configurations fail"),
                ..Default::default()
            },
        );
        Ok(passed)
    }
}

/// One evaluation from the per-configuration evaluations of a `get_inputs()` task: it compiles
/// if every one did, is correct if every one is, and its cases are every configuration's,
/// named `u<k>.<case>`.
fn merge_per_config(evals: Vec<Evaluation>, set: &TaskUnseen) -> Evaluation {
    let label = |k: usize| {
        set.configs
            .get(k)
            .map(|c| format!("unseen configuration {k} ({})", c.category.as_str()))
            .unwrap_or_else(|| format!("unseen configuration {k}"))
    };
    let with_label = |k: usize, r: &GateReport| {
        let mut r = r.clone();
        r.error = Some(match &r.error {
            Some(e) => format!("{}: {e}", label(k)),
            None => label(k),
        });
        r
    };
    let compile = match evals.iter().position(|e| !e.compiled()) {
        Some(k) => with_label(k, &evals[k].compile),
        None => evals
            .first()
            .map(|e| e.compile.clone())
            .unwrap_or_else(|| GateReport::new(GateStatus::Fail, Some("no configurations".into()))),
    };
    let correctness = if !compile.passed() {
        GateReport::new(GateStatus::Skipped, None)
    } else {
        match evals.iter().position(|e| !e.correct()) {
            Some(k) => with_label(k, &evals[k].correctness),
            None => evals[0].correctness.clone(),
        }
    };
    let performance = if correctness.passed() {
        evals
            .iter()
            .enumerate()
            .flat_map(|(k, e)| {
                e.performance.iter().map(move |c| {
                    let mut c = c.clone();
                    c.test_case_id = format!("u{k}.{}", c.test_case_id);
                    c
                })
            })
            .collect()
    } else {
        Vec::new()
    };
    Evaluation {
        compile,
        correctness,
        performance,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arena_report::PerfCase;
    use arena_task::unseen::{Category, UnseenConfig};

    fn eval(compiled: bool, correct: bool, cases: &[(&str, f64)]) -> Evaluation {
        let gate = |ok: bool, err: &str| {
            GateReport::new(
                if ok { GateStatus::Ok } else { GateStatus::Fail },
                (!ok).then(|| err.to_string()),
            )
        };
        Evaluation {
            compile: gate(compiled, "no build"),
            correctness: if compiled {
                gate(correct, "mismatch")
            } else {
                GateReport::new(GateStatus::Skipped, None)
            },
            performance: cases.iter().map(|(i, m)| PerfCase::new(i, *m)).collect(),
        }
    }

    fn set(n: usize) -> TaskUnseen {
        TaskUnseen {
            schema: "arena.unseen/v1".into(),
            task_id: "t".into(),
            harness: "ref.py".into(),
            declaration: "get_inputs()".into(),
            also: Vec::new(),
            configs: (0..n)
                .map(|k| UnseenConfig {
                    category: if k == 1 {
                        Category::AlignmentStress
                    } else {
                        Category::EdgeCase
                    },
                    entry: format!("({k},)"),
                })
                .collect(),
        }
    }

    #[test]
    fn per_configuration_evaluations_merge_into_one() {
        let all_ok = merge_per_config(
            vec![
                eval(true, true, &[("perf1", 1.0)]),
                eval(true, true, &[("perf1", 2.0)]),
            ],
            &set(2),
        );
        assert!(all_ok.correct());
        let ids: Vec<&str> = all_ok
            .performance
            .iter()
            .map(|c| c.test_case_id.as_str())
            .collect();
        assert_eq!(ids, ["u0.perf1", "u1.perf1"]);

        // One wrong configuration makes the whole evaluation wrong, named with its category;
        // no performance cases are kept from a wrong evaluation.
        let one_wrong = merge_per_config(
            vec![eval(true, true, &[("perf1", 1.0)]), eval(true, false, &[])],
            &set(2),
        );
        assert!(one_wrong.compiled() && !one_wrong.correct());
        assert_eq!(
            one_wrong.correctness.error.as_deref(),
            Some("unseen configuration 1 (alignment_stress): mismatch")
        );
        assert!(one_wrong.performance.is_empty());

        let no_build = merge_per_config(vec![eval(false, false, &[])], &set(1));
        assert!(!no_build.compiled());
        assert_eq!(no_build.correctness.status, GateStatus::Skipped);
    }

    #[test]
    fn container_ids_share_the_run_prefix_and_differ_by_phase() {
        let i = Item {
            task_id: "python2python/arena/prefix_sum".into(),
            repeat: 2,
        };
        let a = container_id("r0123456789a", "0a1b2c", &i, "agent");
        let b = container_id("r0123456789a", "0a1b2c", &i, "baseline");
        let c = container_id("r0123456789a", "ffffff", &i, "agent");
        assert!(a.starts_with("r0123456789a-0a1b2c-") && a.ends_with("-r2-agent"));
        assert_ne!(a, b);
        assert_ne!(a, c);
        let id = container_id("r0123456789a", "0a1b2c", &i, "agent");
        assert!(is_item_container(&id, "r0123456789a", &i));
        assert!(!is_item_container(&id, "r0123456789b", &i));
        let other = Item {
            task_id: i.task_id.clone(),
            repeat: 12,
        };
        assert!(!is_item_container(&id, "r0123456789a", &other));
        let longest = container_id("r0123456789a", "0a1b2c", &i, "unseen-optimized");
        assert!(longest.len() <= 76, "{longest}");
        assert_eq!(new_attempt().len(), 6);
    }

    #[test]
    fn workspace_copy_skips_build_outputs() {
        let d = tempfile::tempdir().unwrap();
        let t = d.path().join("t");
        std::fs::create_dir_all(t.join("build")).unwrap();
        std::fs::create_dir_all(t.join("source")).unwrap();
        std::fs::write(t.join("config.yaml"), "x").unwrap();
        std::fs::write(t.join("build/old_report.json"), "x").unwrap();
        std::fs::write(t.join("source/k.py"), "k").unwrap();
        let w = d.path().join("w");
        copy_task_tree(&t, &w).unwrap();
        assert!(w.join("source/k.py").is_file());
        assert!(!w.join("build").exists());
    }
}
