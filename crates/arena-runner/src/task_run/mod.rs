//! One task run, start to finish, one file per phase: the locked image ([`image`]), the
//! baseline evaluation of the untouched sources ([`baseline`]), the agent in its container
//! ([`agent`]), the evaluation of the agent's declared sources in a fresh evaluator container
//! ([`evaluator`]), both kernels on the hidden unseen configurations ([`unseen`]), and the task
//! result, written atomically ([`result`]). Every container goes through the
//! [`ContainerRuntime`] boundary, so each phase is unit-tested against the in-memory engine.

mod agent;
mod baseline;
mod breakdown;
#[cfg(test)]
mod edge_tests;
mod evaluator;
mod files;
mod image;
pub(crate) mod import_once;
#[cfg(test)]
mod paired_tests;
pub(crate) mod phase;
mod redact;
mod result;
mod self_reported;
#[cfg(test)]
mod tests;
mod trusted;
mod unseen;
mod unseen_per_config;
mod unseen_trusted;

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use arena_image::{ImageRecord, Lockfile, Store};
use arena_run::events::Events;
use arena_run::result::{TaskResult, Timings};
use arena_run::{Agent, HiddenSet, Item, RunDir, RunRecord};
use arena_runtime::{
    run_container, BindMount, ContainerConfig, ContainerRuntime, ImageRef, RunOutcome, RunRequest,
};
use arena_task::Task;
use sha2::{Digest, Sha256};
use tokio::sync::watch;
use tracing::Instrument;

use crate::error::{Result, RunnerError};
use crate::gpus::Gpu;
use phase::ContainerPhase;

pub(crate) use baseline::unusable;
pub use image::image_env;
pub(crate) use trusted::{copy_sources, evaluator_config, EvaluatorDir};

/// Releases what a task run may still hold on the host (its workspace's file system), as
/// an interrupted attempt or a failed one leaves it; then its directory can go.
pub async fn release_item(rt: &dyn ContainerRuntime, rundir: &RunDir, item: &Item) -> Result<()> {
    rt.unmount_scratch(&rundir.item_dir(item).join("workspace"))
        .await
        .map_err(|e| RunnerError::Runtime {
            task: item.label(),
            error: e,
        })
}

/// What a task run does: the configurations of the one pipeline ([`RunContext::run`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pipeline {
    /// Baseline, agent, evaluator (and the unseen evaluations if the run has a hidden set).
    Full,
    /// Only the unseen evaluations of a finished task run (`arenactl unseen eval`).
    UnseenOnly,
    /// Only the original kernel on the hidden set's configurations (a probe before sealing).
    Probe,
}

/// Makes a task run ready to run again: what an interrupted attempt holds is released and its
/// directory cleaned, and the run's events say so.
pub async fn resume_item(
    rt: &dyn ContainerRuntime,
    rundir: &RunDir,
    events: &Events,
    item: &Item,
) -> Result<()> {
    release_item(rt, rundir, item).await?;
    if rundir.clean_item(item)? {
        events.message(
            arena_proto::v1::EventKind::TaskResumed,
            Some(item),
            "an interrupted attempt was cleaned; running it again",
        );
    }
    Ok(())
}

/// Bytes of each container stream kept in the logs.
const LOG_CAP: u64 = 8 << 20;

/// What every task run of one run shares.
pub struct RunContext {
    pub rt: Arc<dyn ContainerRuntime>,
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
    /// The values of the agent's `secrets`, for its container only (arena_run::secrets).
    pub secrets: arena_run::Secrets,
    /// The sealed hidden set of unseen configurations, if the run has one.
    pub hidden: Option<HiddenSet>,
    /// This runner start's part of container names ([`new_attempt`]).
    pub attempt: String,
    pub resources: crate::resources::Resources,
    /// The run's imports, one per image (import_once.rs).
    pub imports: import_once::ImportOnce,
}

/// Timings of a task run that begins now: its wall-clock start, the rest to be filled in.
fn started_now() -> Timings {
    let since_epoch = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64());
    Timings {
        started_unix_s: Some(since_epoch),
        ..Timings::default()
    }
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

/// What every container id of a task's task runs holds (`-<task hash>-r`).
pub fn task_marker(task_id: &str) -> String {
    format!("-{}-r", short_hash(task_id))
}

/// Whether a container id is one of `item`'s in run `run_id` (any runner start, any phase).
pub fn is_item_container(id: &str, run_id: &str, item: &Item) -> bool {
    let marker = format!("-{}-r{}-", short_hash(&item.task_id), item.repeat);
    id.starts_with(&format!("{run_id}-")) && id.contains(&marker)
}

/// A short name for one runner start of a run (see [`container_id`]).
pub fn new_attempt() -> String {
    let mut b = [0u8; 3];
    getrandom::fill(&mut b).expect("the kernel's random source is available");
    hex::encode(b)
}

pub(crate) fn bind(source: impl Into<PathBuf>, destination: &str, readonly: bool) -> BindMount {
    BindMount {
        source: source.into(),
        destination: destination.to_string(),
        readonly,
    }
}

/// The pieces a task run's phases share: its task, image and environment, and its GPU.
pub(crate) struct TaskRun<'a> {
    pub ctx: &'a RunContext,
    pub item: &'a Item,
    pub task: &'a Task,
    pub rec: &'a ImageRecord,
    pub image: ImageRef,
    pub env: Vec<String>,
    pub gpu: &'a Gpu,
    /// Set where the evaluator refused the task's derived harness (a construct of its runner
    /// that arena cannot follow, found only when it ran): the task run goes on self-reported,
    /// and this says why.
    pub refused: std::sync::OnceLock<String>,
}

impl TaskRun<'_> {
    /// The limits of this task run's containers.
    pub(crate) fn limits(&self) -> arena_runtime::Limits {
        self.ctx
            .resources
            .limits(self.task.config.memory_limit, self.ctx.record.memory_bytes)
    }
}

impl RunContext {
    fn runtime_err(&self, item: &Item, e: arena_runtime::RuntimeError) -> RunnerError {
        RunnerError::Runtime {
            task: item.label(),
            error: e,
        }
    }

    /// Runs one container of a task run (`phase` names it) with the run's log directory, log
    /// cap and cancel signal; a cancelled container ends the task run.
    async fn container(
        &self,
        item: &Item,
        phase: ContainerPhase,
        image: &ImageRef,
        config: ContainerConfig,
        timeout_s: u64,
    ) -> Result<RunOutcome> {
        // Every bind source of the container lies below the item's directory: no link may
        // have been planted on the way since the task run began.
        self.rundir.secure_item_dir(item)?;
        let req = RunRequest {
            id: container_id(&self.record.run_id, &self.attempt, item, &phase.to_string()),
            image: image.clone(),
            config,
            timeout: Duration::from_secs(timeout_s),
            log_dir: self.rundir.item_dir(item).join("logs"),
            // A kernel under test on hidden configurations could print them: its output is
            // drained and counted, never kept.
            log_cap: if phase.sees_hidden() { 0 } else { LOG_CAP },
            labels: HashMap::new(),
            cancel: Some(self.cancel.clone()),
            // The crash tests' point while this container runs: once it has started.
            on_started: arena_run::crash::during(&phase.to_string()),
        };
        let span = tracing::info_span!("container", phase = %phase, id = %req.id);
        // The crash tests' point once the container has ended.
        let out = run_container(&self.rt, req)
            .instrument(span.clone())
            .await
            .map_err(|e| self.runtime_err(item, e))?;
        span.in_scope(|| {
            tracing::info!(
                exit_code = out.exit_code,
                timed_out = out.timed_out,
                cancelled = out.cancelled,
                run_s = out.durations.run_s,
                "container ended"
            )
        });
        arena_run::crash::point("ended", &phase.to_string());
        if out.cancelled {
            return Err(RunnerError::Cancelled);
        }
        Ok(out)
    }

    /// Runs one task run of `pipeline` to its result (written to `result.json`): the one
    /// entry of every kind of task run, so that each is built the same way.
    pub async fn run(&self, item: &Item, gpu: &Gpu, pipeline: Pipeline) -> Result<TaskResult> {
        match pipeline {
            Pipeline::Full => self.run_full(item, gpu).await,
            Pipeline::Probe => self.run_probe(item, gpu).await,
            Pipeline::UnseenOnly => self.run_unseen_only(item, gpu).await,
        }
    }

    /// A task run's shared pieces: its task, locked image and environment, on `gpu`.
    async fn task_run<'a>(&'a self, item: &'a Item, gpu: &'a Gpu) -> Result<TaskRun<'a>> {
        let (task, rec, image, env) = self.task_image(item, gpu).await?;
        Ok(TaskRun {
            ctx: self,
            item,
            task,
            rec,
            image,
            env,
            gpu,
            refused: Default::default(),
        })
    }

    async fn run_full(&self, item: &Item, gpu: &Gpu) -> Result<TaskResult> {
        let t0 = Instant::now();
        let mut timings = started_now();
        self.rundir.secure_item_dir(item)?;
        let run = self.task_run(item, gpu).await?;
        let agent_image = self.agent_image(item).await?;
        timings.image_s = Some(t0.elapsed().as_secs_f64());
        let t = Instant::now();
        let baseline = run.baseline().await?;
        timings.baseline_s = Some(t.elapsed().as_secs_f64());
        if let Some(reason) = baseline::unusable(&baseline.evaluation) {
            return Err(RunnerError::BaselineFailed {
                task: item.label(),
                reason,
            });
        }
        let t = Instant::now();
        let agent = run.agent(&agent_image, &mut timings).await?;
        timings.agent_s = Some(t.elapsed().as_secs_f64());
        let t = Instant::now();
        let candidate = run.candidate().await?;
        timings.candidate_s = Some(t.elapsed().as_secs_f64());
        let t = Instant::now();
        let unseen = run.unseen(candidate.staged()).await?;
        if unseen.is_some() {
            timings.unseen_s = Some(t.elapsed().as_secs_f64());
        }
        timings.total_s = t0.elapsed().as_secs_f64();
        run.write_result(result::Parts {
            baseline,
            agent,
            candidate,
            unseen,
            timings,
        })
    }

    /// A probe of the run's hidden set before it is sealed: the original kernel alone on the
    /// task's configurations, each judged on its own. The result holds no baseline and no
    /// candidate (both skipped, and said so); its unseen part says which configurations the
    /// original passed.
    async fn run_probe(&self, item: &Item, gpu: &Gpu) -> Result<TaskResult> {
        let t0 = Instant::now();
        let mut timings = started_now();
        self.rundir.secure_item_dir(item)?;
        let run = self.task_run(item, gpu).await?;
        timings.image_s = Some(t0.elapsed().as_secs_f64());
        let t = Instant::now();
        let unseen = run.unseen(None).await?;
        timings.unseen_s = Some(t.elapsed().as_secs_f64());
        timings.total_s = t0.elapsed().as_secs_f64();
        run.probe_result(unseen, timings)
    }

    /// Evaluates a finished task run on the run's hidden set: the agent's declared sources are
    /// staged again from its workspace (as the evaluator took them), and the result gains the
    /// unseen result, written atomically. Its seen result is not touched.
    async fn run_unseen_only(&self, item: &Item, gpu: &Gpu) -> Result<TaskResult> {
        let mut result = self.rundir.load_result(item).ok_or_else(|| {
            RunnerError::Other(format!("{}: no finished result to evaluate", item.label()))
        })?;
        let run = self.task_run(item, gpu).await?;
        let staged = run.restage()?;
        let unseen = run.unseen(staged.as_deref()).await;
        let _ = std::fs::remove_dir_all(self.rundir.item_dir(item).join("staged/unseen"));
        result.unseen = unseen?;
        if let (Some(p), Some(h)) = (result.provenance.as_mut(), &self.hidden) {
            p.unseen_set = arena_digest::Digest::parse(&h.digest).ok();
        }
        arena_run::rundir::write_json(&self.rundir.result_path(item), &result)?;
        Ok(result)
    }
}
