//! The runner: its GPUs, its containerd and store, and the runs it carries out. `submit`
//! checks everything a run depends on before anything starts (every locked image in
//! containerd, every task tree against its locked digest), then queues the run's task runs.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use arena_image::{Lockfile, Store};
use arena_proto::v1::{EventKind, RunState};
use arena_runtime::Containerd;
use arena_task::Task;
use tokio::sync::watch;

use crate::agent::{Agent, AgentImage};
use crate::error::{Result, RunnerError};
use crate::events::{Detail, Events};
use crate::gpus::Gpu;
use crate::lifecycle::{HiddenSet, RunContext};
use crate::rundir::{Item, RunDir, RunRecord};
use crate::scheduler::{schedule, GpuPool};

pub struct Engine {
    pub containerd: Containerd,
    pub store: Store,
    pub pool: Arc<GpuPool>,
    /// Where agent names are looked up (`NAME.toml`).
    pub agent_dirs: Vec<PathBuf>,
    runs: Mutex<HashMap<String, Arc<RunHandle>>>,
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
    pub fn state(&self) -> (RunState, Option<String>) {
        self.state.lock().unwrap().clone()
    }
    pub fn errors(&self) -> u32 {
        *self.errors.lock().unwrap()
    }
    pub fn cancel(&self) {
        let _ = self.cancel.send(true);
    }
}

/// What a client asks for.
#[derive(Debug, Clone, Default)]
pub struct RunRequest {
    pub image_lock: PathBuf,
    pub tasks: Vec<String>,
    pub agent: String,
    pub runs: u32,
    pub run_dir: PathBuf,
    pub hidden_set: Option<PathBuf>,
}

/// `*`, an exact id, or a prefix ending in `/`.
pub fn select(selectors: &[String], ids: &[String]) -> Result<Vec<String>> {
    if selectors.is_empty() {
        return Ok(ids.to_vec());
    }
    let mut out = Vec::new();
    for s in selectors {
        let hits: Vec<&String> = ids
            .iter()
            .filter(|id| s == "*" || *id == s || (s.ends_with('/') && id.starts_with(s.as_str())))
            .collect();
        if hits.is_empty() {
            return Err(RunnerError::invalid(
                "--tasks",
                s,
                "selects no task of the lockfile (an id, a prefix ending in /, or *)",
            ));
        }
        out.extend(hits.into_iter().cloned());
    }
    out.sort();
    out.dedup();
    Ok(out)
}

impl Engine {
    pub fn new(
        containerd: Containerd,
        store: Store,
        gpus: Vec<Gpu>,
        agent_dirs: Vec<PathBuf>,
    ) -> Engine {
        Engine {
            containerd,
            store,
            pool: GpuPool::new(gpus),
            agent_dirs,
            runs: Mutex::new(HashMap::new()),
        }
    }

    pub fn run(&self, id: &str) -> Option<Arc<RunHandle>> {
        self.runs.lock().unwrap().get(id).cloned()
    }

    /// Refuses work on a run this engine is carrying out now (`why` completes "run ID …").
    fn refuse_if_running(&self, run_id: &str, why: &str) -> Result<()> {
        if self
            .run(run_id)
            .is_some_and(|h| h.state().0 == RunState::Running)
        {
            return Err(RunnerError::Other(format!("run {run_id} {why}")));
        }
        Ok(())
    }

    /// Loads the locked tasks of the selection and checks their trees against the lock.
    fn load_tasks(
        lock_path: &Path,
        lock: &Lockfile,
        selectors: &[String],
    ) -> Result<BTreeMap<String, Task>> {
        let sets_path = lock.sets_path(lock_path);
        let sets = arena_image::lock::load_sets(&sets_path)?;
        let set = sets.iter().find(|s| s.name == lock.set).ok_or_else(|| {
            RunnerError::invalid(
                sets_path.display(),
                "set",
                format!("no set named {}", lock.set),
            )
        })?;
        let root = sets_path
            .parent()
            .unwrap_or(Path::new("."))
            .join(&set.tasks);
        let ids: Vec<String> = lock.images.iter().filter_map(|r| r.task.clone()).collect();
        let mut tasks = BTreeMap::new();
        for id in select(selectors, &ids)? {
            let rec = lock.task_image(&id).expect("selected from the lock");
            let dir = root.join(&id);
            let task = Task::load(&dir, &id)?;
            let found = arena_task::task_digest(&dir)?;
            let expected = rec.task_digest.clone().unwrap_or_default();
            if found != expected {
                return Err(RunnerError::Drift {
                    task: id,
                    what: format!("task tree {}", dir.display()),
                    expected,
                    found,
                });
            }
            tasks.insert(task.id.clone(), task);
        }
        Ok(tasks)
    }

    /// Checks everything, records the run (or resumes the one in `run_dir`) and starts it.
    pub async fn submit(self: &Arc<Self>, req: RunRequest) -> Result<(Arc<RunHandle>, u32)> {
        let Plan {
            lock,
            tasks,
            agent,
            hidden,
            rundir,
            record,
            ..
        } = plan(&req, &self.agent_dirs)?;
        self.ensure_images(&lock, &tasks).await?;
        self.refuse_if_running(&record.run_id, "is already running")?;
        crate::rundir::write_json(&rundir.record_path(), &record)?;

        let events = Arc::new(Events::default());
        let mut items = Vec::new();
        for id in tasks.keys() {
            for repeat in 0..req.runs {
                items.push(Item {
                    task_id: id.clone(),
                    repeat,
                });
            }
        }
        // A restarted runner: containers of this run that a killed runner left are removed,
        // finished task runs are kept, the rest start over from a clean directory.
        let removed =
            arena_runtime::gc::gc_prefix(&self.containerd, &format!("{}-", record.run_id))
                .await
                .map_err(|e| RunnerError::Runtime {
                    task: record.run_id.clone(),
                    source: e,
                })?;
        if !removed.is_empty() {
            tracing::info!(run = %record.run_id, ?removed, "removed leftovers of an interrupted runner");
        }
        match arena_runtime::gc::gc_orphaned_imports(&self.containerd).await {
            Ok(l) if !l.is_empty() => {
                tracing::info!(leases = ?l, "removed import leases of dead processes")
            }
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e, "could not clean orphaned import leases"),
        }
        let mut todo = Vec::new();
        let mut done = 0;
        for item in &items {
            match rundir.load_result(item) {
                Some(r) => {
                    done += 1;
                    let json = serde_json::to_string(&r).unwrap_or_default();
                    events.emit(
                        EventKind::TaskResult,
                        Some(item),
                        Detail {
                            message: "finished earlier in this run directory".into(),
                            result_json: json,
                            passed: true,
                            ..Default::default()
                        },
                    );
                }
                None => {
                    if rundir.clean_item(item)? {
                        events.message(
                            EventKind::TaskResumed,
                            Some(item),
                            "an interrupted attempt was cleaned; running it again",
                        );
                    }
                    let note = match &hidden {
                        Some(h) if !h.files.contains_key(&item.task_id) => {
                            "the hidden set has no unseen configurations for this task"
                        }
                        _ => "",
                    };
                    events.message(EventKind::TaskQueued, Some(item), note);
                    todo.push(item.clone());
                }
            }
        }
        let parts = ContextParts {
            record,
            rundir,
            agent,
            lock,
            tasks,
            hidden,
            env: std::env::vars().collect(),
        };
        let handle = self.launch(parts, items, todo, events, Work::Full);
        Ok((handle, done))
    }
}

/// A run checked and recorded as far as it can be without containerd: its lockfile, its
/// tasks (each tree against its locked digest), its agent, its hidden set, its directory and
/// record. What runs it (the local engine, or Slurm jobs on other nodes) checks the images.
pub struct Plan {
    pub lock: Lockfile,
    pub lock_path: PathBuf,
    pub tasks: BTreeMap<String, Task>,
    pub agent: Agent,
    pub hidden: Option<HiddenSet>,
    pub rundir: RunDir,
    pub record: RunRecord,
}

impl Plan {
    /// Every (task, repeat) of the run, in order.
    pub fn items(&self) -> Vec<Item> {
        let mut items = Vec::new();
        for id in self.tasks.keys() {
            for repeat in 0..self.record.runs {
                items.push(Item {
                    task_id: id.clone(),
                    repeat,
                });
            }
        }
        items
    }
}

/// Checks a request and computes its record; refuses a directory holding another run.
pub fn plan(req: &RunRequest, agent_dirs: &[PathBuf]) -> Result<Plan> {
    if req.runs == 0 {
        return Err(RunnerError::invalid(
            "request",
            "runs",
            "must be at least 1",
        ));
    }
    let lock = Lockfile::load(&req.image_lock)?;
    let lock_digest = arena_image::Digest::of_file(&req.image_lock)?.0.to_string();
    let tasks = Engine::load_tasks(&req.image_lock, &lock, &req.tasks)?;
    let agent = Agent::resolve(&req.agent, agent_dirs)?;
    if let AgentImage::Locked(name) = &agent.image {
        if !lock.images.iter().any(|r| &r.name == name) {
            return Err(RunnerError::invalid(
                agent.file.display(),
                "image",
                format!(
                    "lock:{name} is not an image of {}",
                    req.image_lock.display()
                ),
            ));
        }
    }
    // A sealed set is checked file by file against its manifest before it is used.
    let hidden = req.hidden_set.as_deref().map(load_hidden).transpose()?;
    if let (Some(h), Some(dir)) = (&hidden, &req.hidden_set) {
        if !tasks.keys().any(|id| h.files.contains_key(id)) {
            let theirs: Vec<&String> = h.files.keys().take(3).collect();
            return Err(RunnerError::invalid(
                    dir.display(),
                    "files",
                    format!(
                        "the hidden set covers none of the selected tasks (its task ids: {theirs:?}…); \
                         generate it from the tasks root the lockfile uses"
                    ),
                ));
        }
    }
    let hidden_digest = hidden.as_ref().map(|h| h.digest.clone());
    let rundir = RunDir::new(&req.run_dir)?;
    let image_lock = req
        .image_lock
        .canonicalize()
        .map_err(|e| RunnerError::io(&req.image_lock, e))?;
    let record = RunRecord::new(
        &rundir.root,
        &image_lock,
        lock_digest,
        &agent,
        tasks.keys().cloned().collect(),
        req.runs,
        hidden_digest,
    );
    if let Some(old) = rundir.load_record()? {
        if let Some(field) = old.first_difference(&record) {
            return Err(RunnerError::invalid(
                    rundir.record_path().display(),
                    field,
                    "this run directory holds a different run; use another --out, or repeat the original request to resume it",
                ));
        }
    }
    Ok(Plan {
        lock,
        lock_path: image_lock,
        tasks,
        agent,
        hidden,
        rundir,
        record,
    })
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
}

/// A run as its directory recorded it, its lockfile checked against the recorded digest: what
/// work on an existing run (an unseen evaluation, a Slurm job's task run) starts from.
struct Recorded {
    rundir: RunDir,
    record: RunRecord,
    lock_path: PathBuf,
    lock: Lockfile,
}

impl Recorded {
    fn load(run_dir: &Path) -> Result<Recorded> {
        let rundir = RunDir::new(run_dir)?;
        let record = rundir.load_record()?.ok_or_else(|| {
            RunnerError::invalid(
                rundir.record_path().display(),
                "(file)",
                "missing: not a run directory (arenactl run writes it)",
            )
        })?;
        let lock_path = PathBuf::from(&record.image_lock);
        let lock = Lockfile::load(&lock_path)?;
        let lock_digest = arena_image::Digest::of_file(&lock_path)?.0.to_string();
        if lock_digest != record.lock_digest {
            return Err(RunnerError::Drift {
                task: record.run_id.clone(),
                what: format!("lockfile {}", lock_path.display()),
                expected: record.lock_digest.clone(),
                found: lock_digest,
            });
        }
        Ok(Recorded {
            rundir,
            record,
            lock_path,
            lock,
        })
    }
}

impl Engine {
    fn context(
        &self,
        parts: ContextParts,
        events: Arc<Events>,
        cancel: watch::Receiver<bool>,
    ) -> RunContext {
        RunContext {
            containerd: self.containerd.clone(),
            store: self.store.clone(),
            record: parts.record,
            rundir: parts.rundir,
            agent: parts.agent,
            lock: parts.lock,
            tasks: parts.tasks,
            events,
            cancel,
            env: parts.env,
            hidden: parts.hidden,
            attempt: crate::lifecycle::new_attempt(),
        }
    }

    /// Registers the run's handle and queues `todo`.
    fn launch(
        &self,
        parts: ContextParts,
        items: Vec<Item>,
        todo: Vec<Item>,
        events: Arc<Events>,
        work: Work,
    ) -> Arc<RunHandle> {
        let (cancel_tx, cancel_rx) = watch::channel(false);
        let handle = Arc::new(RunHandle {
            record: parts.record.clone(),
            rundir: parts.rundir.clone(),
            items,
            events: events.clone(),
            cancel: cancel_tx,
            state: Mutex::new((RunState::Running, None)),
            errors: Mutex::new(0),
        });
        self.runs
            .lock()
            .unwrap()
            .insert(handle.record.run_id.clone(), handle.clone());
        let ctx = Arc::new(self.context(parts, events, cancel_rx.clone()));
        self.spawn(ctx, handle.clone(), todo, work, cancel_rx);
        handle
    }
}

/// What a queued task run does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Work {
    /// Baseline, agent, evaluator (and the unseen evaluations if the run has a hidden set).
    Full,
    /// Only the unseen evaluations of a finished task run (`arenactl unseen eval`).
    UnseenOnly,
}

/// Reads and verifies a sealed hidden set.
fn load_hidden(dir: &Path) -> Result<HiddenSet> {
    let m = arena_task::hidden::verify_set(dir)?;
    let canonical = dir.canonicalize().map_err(|e| RunnerError::io(dir, e))?;
    Ok(HiddenSet {
        dir: canonical,
        digest: m.set_digest.clone(),
        files: m
            .files
            .iter()
            .map(|f| (f.task_id.clone(), f.file.clone()))
            .collect(),
    })
}

impl Engine {
    /// Every locked image of `tasks` in containerd with the locked digest (imported from the
    /// store if missing). A different digest refuses the run, naming the task.
    async fn ensure_images(&self, lock: &Lockfile, tasks: &BTreeMap<String, Task>) -> Result<()> {
        for id in tasks.keys() {
            let rec = lock.task_image(id).expect("loaded from the lock");
            arena_runtime::ensure_image(&self.containerd, &self.store, rec)
                .await
                .map_err(|e| match e {
                    arena_runtime::RuntimeError::ImageMismatch {
                        name,
                        expected,
                        found,
                    } => RunnerError::Drift {
                        task: id.clone(),
                        what: format!("image {name} in containerd"),
                        expected,
                        found,
                    },
                    e => RunnerError::Runtime {
                        task: id.clone(),
                        source: e,
                    },
                })?;
        }
        Ok(())
    }

    /// Queues `todo` on the GPU pool and finishes the run when the queue is empty.
    fn spawn(
        &self,
        ctx: Arc<RunContext>,
        h: Arc<RunHandle>,
        todo: Vec<Item>,
        work: Work,
        cancel_rx: watch::Receiver<bool>,
    ) {
        let pool = self.pool.clone();
        tokio::spawn(async move {
            let c2 = ctx.clone();
            let h2 = h.clone();
            schedule(
                todo,
                pool,
                cancel_rx.clone(),
                Item::label,
                move |item, gpu| {
                    let ctx = c2.clone();
                    let h = h2.clone();
                    async move { run_one(&ctx, &h, item, gpu, work).await }
                },
            )
            .await;
            let cancelled = *cancel_rx.borrow();
            finish(&ctx, &h, cancelled, work).await;
        });
    }

    /// Evaluates the finished task runs of the run in `run_dir` on the sealed hidden set in
    /// `hidden_dir`: the original and the agent's kernel, in evaluator containers only. The
    /// run's record names the lockfile and tasks; every digest is checked again, as for a run.
    /// Task runs already evaluated on this set are not repeated; others get the set's result
    /// (replacing one from another set). Nothing is run for task runs that never finished.
    pub async fn submit_unseen(
        self: &Arc<Self>,
        run_dir: &Path,
        hidden_dir: &Path,
    ) -> Result<(Arc<RunHandle>, u32)> {
        let Recorded {
            rundir,
            record,
            lock_path,
            lock,
        } = Recorded::load(run_dir)?;
        let tasks = Self::load_tasks(&lock_path, &lock, &record.tasks)?;
        let hidden = load_hidden(hidden_dir)?;
        if !tasks.keys().any(|id| hidden.files.contains_key(id)) {
            return Err(RunnerError::invalid(
                hidden_dir.display(),
                "files",
                "the hidden set covers none of the run's tasks",
            ));
        }
        self.ensure_images(&lock, &tasks).await?;
        self.refuse_if_running(
            &record.run_id,
            "is still running; evaluate it on a hidden set once it is done",
        )?;
        let events = Arc::new(Events::default());
        let mut items = Vec::new();
        let mut todo: Vec<Item> = Vec::new();
        let mut done = 0;
        for id in tasks.keys() {
            for repeat in 0..record.runs {
                let item = Item {
                    task_id: id.clone(),
                    repeat,
                };
                let Some(result) = rundir.load_result(&item) else {
                    events.message(
                        EventKind::TaskError,
                        Some(&item),
                        "not finished in this run directory: nothing to evaluate (resume the run first)",
                    );
                    continue;
                };
                items.push(item.clone());
                let evaluated = result
                    .unseen
                    .as_ref()
                    .is_some_and(|u| u.set_digest == hidden.digest);
                if evaluated || !hidden.files.contains_key(id) {
                    done += 1;
                    let json = serde_json::to_string(&result).unwrap_or_default();
                    events.emit(
                        EventKind::TaskResult,
                        Some(&item),
                        Detail {
                            message: if evaluated {
                                "evaluated on this hidden set earlier".into()
                            } else {
                                "the hidden set has no unseen configurations for this task".into()
                            },
                            result_json: json,
                            passed: true,
                            ..Default::default()
                        },
                    );
                } else {
                    events.message(EventKind::TaskQueued, Some(&item), "unseen evaluation");
                    todo.push(item);
                }
            }
        }
        if items.is_empty() {
            return Err(RunnerError::invalid(
                run_dir.display(),
                "tasks",
                "no task run of this run has finished: nothing to evaluate",
            ));
        }
        // What an interrupted unseen evaluation of these task runs left. Only their unseen
        // containers: other task runs of the run may still be running (a Slurm job on this node).
        arena_runtime::gc::gc_where(&self.containerd, |id| {
            id.contains("-unseen-")
                && todo
                    .iter()
                    .any(|i| crate::lifecycle::is_item_container(id, &record.run_id, i))
        })
        .await
        .map_err(|e| RunnerError::Runtime {
            task: record.run_id.clone(),
            source: e,
        })?;
        let parts = ContextParts {
            agent: Agent::recorded(&record.agent, &record.agent_digest),
            record,
            rundir,
            lock,
            tasks,
            hidden: Some(hidden),
            env: HashMap::new(),
        };
        let handle = self.launch(parts, items, todo, events, Work::UnseenOnly);
        Ok((handle, done))
    }
}

/// What one-shot mode (`arenactl runner exec`, a Slurm job) is asked to do.
#[derive(Debug, Clone)]
pub struct ExecRequest {
    pub run_dir: PathBuf,
    pub item: Item,
    /// The agent file; its digest must be the recorded one.
    pub agent: String,
    /// The hidden set, where the record names one; its digest must be the recorded one.
    pub hidden_set: Option<PathBuf>,
    /// A bundle (`arenactl bundle export`) to fill this node's store from when it lacks a
    /// locked blob; every blob is verified on import.
    pub bundle: Option<PathBuf>,
}

impl Engine {
    /// One task run of a recorded run, on this node's containerd and this engine's (first)
    /// GPU: every digest the record and lockfile name is checked on this node first (a node
    /// whose containerd holds another image digest fails the task run, naming it), what an
    /// earlier attempt of this task run left is removed, and the result is written atomically
    /// to the shared run directory. A task run that already has a result is not run again.
    /// Events go to `events` (the job's log).
    pub async fn exec_item(
        &self,
        req: &ExecRequest,
        events: Arc<Events>,
        cancel: watch::Receiver<bool>,
    ) -> Result<arena_report::TaskResult> {
        let Recorded {
            rundir,
            record,
            lock_path,
            lock,
        } = Recorded::load(&req.run_dir)?;
        let item = &req.item;
        if !record.tasks.contains(&item.task_id) || item.repeat >= record.runs {
            return Err(RunnerError::invalid(
                rundir.record_path().display(),
                "tasks",
                format!(
                    "{} is not a task run of run {}",
                    item.label(),
                    record.run_id
                ),
            ));
        }
        if let Some(done) = rundir.load_result(item) {
            return Ok(done);
        }
        let tasks = Self::load_tasks(&lock_path, &lock, std::slice::from_ref(&item.task_id))?;
        let agent = Agent::resolve(&req.agent, &self.agent_dirs)?;
        if agent.digest != record.agent_digest {
            return Err(RunnerError::Drift {
                task: item.task_id.clone(),
                what: format!("agent file {}", agent.file.display()),
                expected: record.agent_digest.clone(),
                found: agent.digest,
            });
        }
        let hidden = match (&record.hidden_set_digest, &req.hidden_set) {
            (None, _) => None,
            (Some(_), None) => {
                return Err(RunnerError::invalid(
                    "--unseen",
                    "(missing)",
                    "the run records a hidden set; pass its directory",
                ))
            }
            (Some(want), Some(dir)) => {
                let h = load_hidden(dir)?;
                if &h.digest != want {
                    return Err(RunnerError::Drift {
                        task: item.task_id.clone(),
                        what: format!("hidden set {}", dir.display()),
                        expected: want.clone(),
                        found: h.digest,
                    });
                }
                Some(h)
            }
        };
        if let Some(bundle) = &req.bundle {
            let missing = tasks.keys().any(|id| {
                lock.task_image(id).is_some_and(|r| {
                    std::iter::once(&r.config)
                        .chain(std::iter::once(&r.manifest))
                        .chain(r.layers.iter().map(|l| &l.digest))
                        .any(|d| !self.store.has_blob(d))
                })
            });
            if missing {
                events.message(
                    EventKind::ImageVerified,
                    Some(item),
                    format!("importing {} into this node's store", bundle.display()),
                );
                arena_image::bundle::import(&self.store, bundle, &arena_image::NoProgress)?;
            }
        }
        self.ensure_images(&lock, &tasks).await?;
        let removed = arena_runtime::gc::gc_where(&self.containerd, |id| {
            crate::lifecycle::is_item_container(id, &record.run_id, item)
        })
        .await
        .map_err(|e| RunnerError::Runtime {
            task: item.label(),
            source: e,
        })?;
        if !removed.is_empty() {
            tracing::info!(task = %item.label(), ?removed, "removed what an earlier attempt left");
        }
        let _ = arena_runtime::gc::gc_orphaned_imports(&self.containerd).await;
        if rundir.clean_item(item)? {
            events.message(
                EventKind::TaskResumed,
                Some(item),
                "an interrupted attempt was cleaned; running it again",
            );
        }
        let gpu =
            self.pool.gpus().first().cloned().ok_or_else(|| {
                RunnerError::Other("this runner has no GPU slot to run on".into())
            })?;
        let ctx = self.context(
            ContextParts {
                record,
                rundir,
                agent,
                lock,
                tasks,
                hidden,
                env: std::env::vars().collect(),
            },
            events.clone(),
            cancel,
        );
        let result = ctx.run_item(item, &gpu).await;
        if let Ok(r) = &result {
            events.emit(
                EventKind::TaskResult,
                Some(item),
                Detail {
                    gpu: Some(gpu.index),
                    passed: r.candidate.correct(),
                    result_json: serde_json::to_string(r).unwrap_or_default(),
                    ..Default::default()
                },
            );
        }
        result
    }
}

async fn run_one(ctx: &RunContext, h: &RunHandle, item: Item, gpu: Gpu, work: Work) {
    let outcome = match work {
        Work::Full => ctx.run_item(&item, &gpu).await,
        Work::UnseenOnly => ctx.run_unseen_item(&item, &gpu).await,
    };
    match outcome {
        Ok(result) => {
            let json = serde_json::to_string(&result).unwrap_or_default();
            ctx.events.emit(
                EventKind::TaskResult,
                Some(&item),
                Detail {
                    gpu: Some(gpu.index),
                    passed: result.candidate.correct(),
                    result_json: json,
                    ..Default::default()
                },
            );
        }
        Err(RunnerError::Cancelled) => {}
        Err(e) => {
            *h.errors.lock().unwrap() += 1;
            tracing::error!(task = %item.label(), "{e}");
            ctx.events.emit(
                EventKind::TaskError,
                Some(&item),
                Detail {
                    gpu: Some(gpu.index),
                    message: e.to_string(),
                    ..Default::default()
                },
            );
        }
    }
}

async fn finish(ctx: &RunContext, h: &RunHandle, cancelled: bool, work: Work) {
    // Every container of this start is torn down by now. A request a killed runner had in
    // flight can still be carried out by containerd after the restart's first clean-up (a
    // snapshot prepared for a dead client), so the run's prefix is cleaned once more. Not
    // after an unseen evaluation: task runs of the run may still be running elsewhere on
    // this containerd (Slurm jobs), and its own containers were each removed.
    if work == Work::Full {
        let prefix = format!("{}-", h.record.run_id);
        if let Err(e) = arena_runtime::gc::gc_prefix(&ctx.containerd, &prefix).await {
            tracing::warn!(run = %h.record.run_id, "clean-up of earlier attempts: {e}");
        }
    }
    if let Err(e) = arena_runtime::gc::gc_orphaned_imports(&ctx.containerd).await {
        tracing::warn!("clean-up of orphaned import leases: {e}");
    }
    let written = h.rundir.write_results(&h.record.run_id, &h.items);
    let (state, kind, msg) = match (&written, cancelled, h.errors()) {
        (Err(e), _, _) => (
            RunState::Failed,
            EventKind::RunDone,
            format!("results.json: {e}"),
        ),
        (Ok(_), true, _) => (
            RunState::Cancelled,
            EventKind::RunCancelled,
            "cancelled; run the same request again to resume".into(),
        ),
        (Ok(_), false, 0) => (RunState::Done, EventKind::RunDone, String::new()),
        (Ok(_), false, n) => (
            RunState::Failed,
            EventKind::RunDone,
            format!("{n} task runs could not be carried out; run again to retry them"),
        ),
    };
    *h.state.lock().unwrap() = (state, (!msg.is_empty()).then(|| msg.clone()));
    ctx.events.message(kind, None, msg);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selectors() {
        let ids: Vec<String> = ["a/x/one", "a/x/two", "b/y/three"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert_eq!(select(&[], &ids).unwrap().len(), 3);
        assert_eq!(
            select(&["a/".into()], &ids).unwrap(),
            ["a/x/one", "a/x/two"]
        );
        assert_eq!(
            select(&["b/y/three".into(), "*".into()], &ids)
                .unwrap()
                .len(),
            3
        );
        let e = select(&["c/".into()], &ids).unwrap_err().to_string();
        assert!(e.contains("--tasks: c/: selects no task"), "{e}");
    }
}
