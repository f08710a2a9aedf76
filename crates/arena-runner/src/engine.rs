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
        if req.runs == 0 {
            return Err(RunnerError::invalid(
                "request",
                "runs",
                "must be at least 1",
            ));
        }
        let lock = Lockfile::load(&req.image_lock)?;
        let lock_digest = arena_image::Digest::of_file(&req.image_lock)?.0.to_string();
        let tasks = Self::load_tasks(&req.image_lock, &lock, &req.tasks)?;
        let agent = Agent::resolve(&req.agent, &self.agent_dirs)?;
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
        let hidden = match &req.hidden_set {
            Some(dir) => {
                let m = arena_task::hidden::verify_set(dir)?;
                let dir = dir.canonicalize().map_err(|e| RunnerError::io(dir, e))?;
                Some(HiddenSet {
                    dir,
                    digest: m.set_digest.clone(),
                    files: m
                        .files
                        .iter()
                        .map(|f| (f.task_id.clone(), f.file.clone()))
                        .collect(),
                })
            }
            None => None,
        };
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
        // Every locked image the run needs, in containerd with the locked digest (imported from
        // the store if missing). A different digest refuses the run, naming the task.
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
        if self
            .run(&record.run_id)
            .is_some_and(|h| h.state().0 == RunState::Running)
        {
            return Err(RunnerError::Other(format!(
                "run {} is already running",
                record.run_id
            )));
        }
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
        let (cancel_tx, cancel_rx) = watch::channel(false);
        let handle = Arc::new(RunHandle {
            record: record.clone(),
            rundir: rundir.clone(),
            items,
            events: events.clone(),
            cancel: cancel_tx,
            state: Mutex::new((RunState::Running, None)),
            errors: Mutex::new(0),
        });
        self.runs
            .lock()
            .unwrap()
            .insert(record.run_id.clone(), handle.clone());
        let ctx = Arc::new(RunContext {
            containerd: self.containerd.clone(),
            store: self.store.clone(),
            record,
            rundir,
            agent,
            lock,
            tasks,
            events,
            cancel: cancel_rx.clone(),
            env: std::env::vars().collect(),
            hidden,
            attempt: crate::lifecycle::new_attempt(),
        });
        let pool = self.pool.clone();
        let h = handle.clone();
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
                    async move { run_one(&ctx, &h, item, gpu).await }
                },
            )
            .await;
            let cancelled = *cancel_rx.borrow();
            finish(&ctx, &h, cancelled).await;
        });
        Ok((handle, done))
    }
}

async fn run_one(ctx: &RunContext, h: &RunHandle, item: Item, gpu: Gpu) {
    match ctx.run_item(&item, &gpu).await {
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

async fn finish(ctx: &RunContext, h: &RunHandle, cancelled: bool) {
    // Every container of this start is torn down by now. A request a killed runner had in
    // flight can still be carried out by containerd after the restart's first clean-up (a
    // snapshot prepared for a dead client), so the run's prefix is cleaned once more.
    let prefix = format!("{}-", h.record.run_id);
    if let Err(e) = arena_runtime::gc::gc_prefix(&ctx.containerd, &prefix).await {
        tracing::warn!(run = %h.record.run_id, "clean-up of earlier attempts: {e}");
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
