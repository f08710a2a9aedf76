//! The engine: the runner's GPUs, its container engine and store, and the runs it carries
//! out — a registry of runs (one per id, reserved atomically), the queue that hands task runs
//! to GPUs ([`crate::scheduler`]), and the run directory that persists every result. How a
//! run starts is in [`submit`] (a new or resumed run), [`unseen`] (a finished run on a hidden
//! set) and [`exec`] (one task run, for a Slurm job).

mod exec;
mod finish;
mod submit;
#[cfg(test)]
mod tests;
mod unseen;

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use arena_image::{Lockfile, Store};
use arena_proto::v1::{EventKind, RunState};
use arena_run::events::{Detail, Events};
use arena_run::{Agent, HiddenSet, Item, RunDir, RunRecord};
use arena_runtime::ContainerRuntime;
use arena_task::Task;
use tokio::sync::watch;
use tracing::Instrument;

pub use exec::ExecRequest;

use crate::error::{Result, RunnerError};
use crate::evaluate::{EvalSettings, Evaluator};
use crate::gpus::Gpu;
use crate::policy::Policy;
use crate::resources::Resources;
use crate::scheduler::{schedule, GpuPool};
use crate::task_run::{Pipeline, RunContext};

pub struct Engine {
    pub rt: Arc<dyn ContainerRuntime>,
    pub store: Store,
    pub pool: Arc<GpuPool>,
    /// Where agent names are looked up (`NAME.toml`).
    pub agent_dirs: Vec<PathBuf>,
    pub policy: Policy,
    pub resources: Resources,
    runs: Mutex<HashMap<String, Arc<RunHandle>>>,
    eval_settings: EvalSettings,
    evaluator: std::sync::OnceLock<Arc<Evaluator>>,
}

/// A run the engine knows: its events, its state, how to cancel it.
pub struct RunHandle {
    pub record: RunRecord,
    pub rundir: RunDir,
    pub items: Vec<Item>,
    pub events: Arc<Events>,
    cancel: watch::Sender<bool>,
    state: Mutex<(RunState, Option<String>)>,
    errors: Mutex<u32>,
}

impl RunHandle {
    fn new(record: RunRecord, rundir: RunDir, items: Vec<Item>, events: Arc<Events>) -> Self {
        RunHandle {
            record,
            rundir,
            items,
            events,
            cancel: watch::channel(false).0,
            state: Mutex::new((RunState::Queued, None)),
            errors: Mutex::new(0),
        }
    }

    pub fn state(&self) -> (RunState, Option<String>) {
        self.state.lock().unwrap().clone()
    }

    pub fn errors(&self) -> u32 {
        *self.errors.lock().unwrap()
    }

    pub fn cancel(&self) {
        let _ = self.cancel.send(true);
    }

    fn is_live(&self) -> bool {
        matches!(self.state().0, RunState::Queued | RunState::Running)
    }
}

/// What a run context is made of, besides what the engine and the run's start give.
struct ContextParts {
    record: RunRecord,
    rundir: RunDir,
    agent: Agent,
    lock: Lockfile,
    tasks: BTreeMap<String, Task>,
    hidden: Option<HiddenSet>,
    env: HashMap<String, String>,
    secrets: arena_run::Secrets,
}

impl Engine {
    pub fn new(
        rt: Arc<dyn ContainerRuntime>,
        store: Store,
        gpus: Vec<Gpu>,
        agent_dirs: Vec<PathBuf>,
        policy: Policy,
    ) -> Engine {
        Engine {
            rt,
            store,
            pool: GpuPool::new(gpus),
            agent_dirs,
            policy,
            resources: Resources::default(),
            runs: Mutex::new(HashMap::new()),
            eval_settings: EvalSettings::default(),
            evaluator: std::sync::OnceLock::new(),
        }
    }

    /// The same engine, its Evaluate API set up as `s` says.
    pub fn with_eval_settings(mut self, s: EvalSettings) -> Engine {
        self.eval_settings = s;
        self
    }

    /// The Evaluate API's evaluator (made on first use, with warm evaluators on this engine's
    /// container engine and GPUs).
    pub fn evaluator(&self) -> std::io::Result<Arc<Evaluator>> {
        if let Some(e) = self.evaluator.get() {
            return Ok(e.clone());
        }
        let e = Arc::new(Evaluator::containerd(
            self.rt.clone(),
            self.store.clone(),
            self.resources.clone(),
            self.pool.clone(),
            self.eval_settings.clone(),
        )?);
        Ok(self.evaluator.get_or_init(|| e).clone())
    }

    /// Stops the Evaluate API's idle evaluators (a runner that ends).
    pub async fn shutdown(&self) {
        if let Some(e) = self.evaluator.get() {
            e.shutdown().await;
        }
    }

    /// The same engine, giving its containers `r`.
    pub fn with_resources(mut self, r: Resources) -> Engine {
        self.resources = r;
        self
    }

    pub fn run(&self, id: &str) -> Option<Arc<RunHandle>> {
        self.runs.lock().unwrap().get(id).cloned()
    }

    /// Registers `h` as the run of its id, atomically: a second request for a run that is
    /// queued or running is refused (`why` completes "run ID …"), so two submissions of one
    /// run can never both start, nor one remove the other's containers.
    fn reserve(&self, h: Arc<RunHandle>, why: &str) -> Result<Arc<RunHandle>> {
        let mut runs = self.runs.lock().unwrap();
        let id = h.record.run_id.clone();
        if runs.get(&id).is_some_and(|old| old.is_live()) {
            return Err(RunnerError::Other(format!("run {id} {why}")));
        }
        runs.insert(id, h.clone());
        Ok(h)
    }

    /// Takes back a reservation that never started.
    fn release(&self, h: &RunHandle, error: &str) {
        *h.state.lock().unwrap() = (RunState::Failed, Some(error.to_string()));
    }

    /// Every locked image of `tasks` in the engine with the locked digest (imported from the
    /// store if missing). A different digest refuses the run, naming the task.
    async fn ensure_images(&self, lock: &Lockfile, tasks: &BTreeMap<String, Task>) -> Result<()> {
        for id in tasks.keys() {
            let rec = lock.task_image(id).ok_or_else(|| {
                RunnerError::Other(format!("{id}: loaded but not in the lockfile"))
            })?;
            self.rt
                .ensure_image(&self.store, rec)
                .await
                .map_err(|e| match e {
                    arena_runtime::RuntimeError::ImageMismatch {
                        name,
                        expected,
                        found,
                    } => RunnerError::drift(
                        id,
                        // Never replaced here: a run of the other lock may be using it.
                        format!(
                            "image {name} in containerd (another lock's image under the same \
                             name, as after a relock: remove it with `ctr -n NAMESPACE images \
                             rm {name}` once no run uses it, or run in another --namespace)"
                        ),
                        expected,
                        found,
                    ),
                    e => RunnerError::Runtime {
                        task: id.clone(),
                        error: e,
                    },
                })?;
        }
        Ok(())
    }

    fn context(
        &self,
        parts: ContextParts,
        events: Arc<Events>,
        cancel: watch::Receiver<bool>,
    ) -> RunContext {
        RunContext {
            rt: self.rt.clone(),
            store: self.store.clone(),
            record: parts.record,
            rundir: parts.rundir,
            agent: parts.agent,
            lock: parts.lock,
            tasks: parts.tasks,
            events,
            cancel,
            env: parts.env,
            secrets: parts.secrets,
            hidden: parts.hidden,
            attempt: crate::task_run::new_attempt(),
            resources: self.resources.clone(),
            imports: Default::default(),
        }
    }

    /// Starts a reserved run: queues `todo` on the GPU pool and finishes the run when the
    /// queue is empty.
    fn launch(&self, h: Arc<RunHandle>, parts: ContextParts, todo: Vec<Item>, work: Pipeline) {
        *h.state.lock().unwrap() = (RunState::Running, None);
        let cancel_rx = h.cancel.subscribe();
        let ctx = Arc::new(self.context(parts, h.events.clone(), cancel_rx.clone()));
        let pool = self.pool.clone();
        // Images are imported ahead (while the GPUs work on the task runs before) where the
        // slots are devices. A runner of CPU slots times its kernels on the cores an import
        // would take: there each task run imports its own images in its turn, as before.
        let ahead = pool.gpus().iter().any(|g| !g.is_cpu_slot());
        let run_span = tracing::info_span!(
            "run",
            run_id = %h.record.run_id,
            agent = %h.record.agent,
            task_runs = todo.len()
        );
        let inner = run_span.clone();
        tokio::spawn(
            async move {
                tracing::info!("run started");
                let (c2, h2, c3) = (ctx.clone(), h.clone(), ctx.clone());
                schedule(
                    todo,
                    pool,
                    cancel_rx.clone(),
                    Item::label,
                    move |item| {
                        let (ctx, item) = (c3.clone(), item.clone());
                        // In a task of its own: a panic while importing ahead must not take
                        // the queue down with it (the task run imports again, and reports).
                        let import = async move { ctx.images_ready(&item, work).await };
                        async move {
                            if ahead {
                                let _ = tokio::spawn(import.in_current_span()).await;
                            }
                        }
                    },
                    move |item, gpu| {
                        let (ctx, h) = (c2.clone(), h2.clone());
                        let span = tracing::info_span!(
                            parent: &inner,
                            "task",
                            task = %item.task_id,
                            repeat = item.repeat,
                            gpu = gpu.index
                        );
                        async move { run_one(ctx, h, item, gpu, work).await }.instrument(span)
                    },
                )
                .await;
                let cancelled = *cancel_rx.borrow();
                finish::finish(&ctx, &h, cancelled, work).await;
                tracing::info!(cancelled, "run ended");
            }
            .instrument(run_span),
        );
    }
}

/// One task run on its GPU. A failure of the arena itself — the engine, a file, a panic —
/// is an infrastructure error: recorded in the task run's directory with its reason, counted,
/// reported, and retried by the next start of the run; it never becomes a result.
async fn run_one(ctx: Arc<RunContext>, h: Arc<RunHandle>, item: Item, gpu: Gpu, work: Pipeline) {
    let (c2, i2, g2) = (ctx.clone(), item.clone(), gpu.clone());
    // In a task of its own, so that a panic is caught here and not lost with the GPU.
    let joined = tokio::spawn(
        async move { c2.run(&i2, &g2, work).await }.instrument(tracing::Span::current()),
    )
    .await;
    let outcome = joined.unwrap_or_else(|e| {
        let why = if e.is_panic() {
            let p = e.into_panic();
            p.downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "a panic".into())
        } else {
            "the task run was aborted".into()
        };
        Err(RunnerError::Other(format!("internal error: {why}")))
    });
    match outcome {
        Ok(result) => emit_result(&ctx.events, &item, &gpu, &result),
        Err(RunnerError::Cancelled) => {
            let _ = crate::task_run::release_item(ctx.rt.as_ref(), &h.rundir, &item).await;
        }
        Err(e) => {
            *h.errors.lock().unwrap() += 1;
            let reason = e.to_string();
            if let Err(r) = crate::task_run::release_item(ctx.rt.as_ref(), &h.rundir, &item).await {
                tracing::warn!(task = %item.label(), "releasing its workspace: {r}");
            }
            tracing::error!(task = %item.label(), "infrastructure error: {reason}");
            if let Err(w) = h.rundir.write_infra_error(&item, &reason) {
                tracing::error!(task = %item.label(), "recording it: {w}");
            }
            ctx.events.emit(
                EventKind::TaskError,
                Some(&item),
                Detail {
                    gpu: Some(gpu.index),
                    message: reason,
                    ..Default::default()
                },
            );
        }
    }
}

/// The event of a task run's result, as the run's followers read it.
fn emit_result(events: &Events, item: &Item, gpu: &Gpu, result: &arena_run::TaskResult) {
    events.emit(
        EventKind::TaskResult,
        Some(item),
        Detail {
            gpu: Some(gpu.index),
            passed: result.candidate.correct(),
            result_json: serde_json::to_string(result).unwrap_or_default(),
            ..Default::default()
        },
    );
}
