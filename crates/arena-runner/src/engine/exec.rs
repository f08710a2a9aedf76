//! One task run of a recorded run on this node (`arenactl runner exec`, what each Slurm
//! job runs): every digest the record and lockfile name is checked here first, what an
//! earlier attempt of this task run left is removed, and the result is written atomically to
//! the shared run directory.

use std::path::PathBuf;
use std::sync::Arc;

use arena_proto::v1::EventKind;
use arena_run::events::Events;
use arena_run::plan::{load_tasks, Recorded};
use arena_run::{Agent, HiddenSet, Item};
use tokio::sync::watch;

use super::{ContextParts, Engine};
use crate::error::{Result, RunnerError};
use crate::task_run::{is_item_container, Pipeline};

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
    ) -> Result<arena_run::TaskResult> {
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
        let tasks = load_tasks(&lock_path, &lock, std::slice::from_ref(&item.task_id))?;
        let agent = Agent::resolve(&req.agent, &self.agent_dirs)?;
        if !agent.secrets.is_empty() {
            return Err(RunnerError::invalid(
                agent.file.display(),
                "secrets",
                "a scheduler's job carries no secret (it would lie on disk for the job to \
                 read); run an agent that needs one with the local backend or a runner",
            ));
        }
        if agent.digest != record.agent_digest {
            return Err(RunnerError::drift(
                &item.task_id,
                format!("agent file {}", agent.file.display()),
                record.agent_digest.clone(),
                agent.digest,
            ));
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
                let h = HiddenSet::load(dir)?;
                if &h.digest != want {
                    return Err(RunnerError::drift(
                        &item.task_id,
                        format!("hidden set {}", dir.display()),
                        want.clone(),
                        h.digest,
                    ));
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
                // Every blob is read and hashed: blocking work, off the async workers.
                let (store, bundle) = (self.store.clone(), bundle.clone());
                tokio::task::spawn_blocking(move || {
                    arena_image::bundle::import(&store, &bundle, &arena_image::NoProgress)
                })
                .await
                .map_err(|e| RunnerError::Other(format!("bundle import: {e}")))??;
            }
        }
        self.ensure_images(&lock, &tasks).await?;
        let removed = arena_runtime::cleanup::gc_where(self.rt.as_ref(), |id| {
            is_item_container(id, &record.run_id, item)
        })
        .await
        .map_err(|e| RunnerError::Runtime {
            task: item.label(),
            error: e,
        })?;
        if !removed.is_empty() {
            tracing::info!(task = %item.label(), ?removed, "removed what an earlier attempt left");
        }
        let _ = arena_runtime::cleanup::gc_orphaned_imports(self.rt.as_ref()).await;
        crate::task_run::resume_item(self.rt.as_ref(), &rundir, &events, item).await?;
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
                // A job carries no secret (it would be on disk for the scheduler): an agent
                // that needs one is refused before this (exec_item's check).
                secrets: arena_run::Secrets::default(),
            },
            events.clone(),
            cancel,
        );
        let result = ctx.run(item, &gpu, Pipeline::Full).await;
        if result.is_err() {
            // A cancelled or failed attempt may still hold its workspace's file system (the
            // agent step was cut short): release it here, as the engine does for its own.
            if let Err(e) = crate::task_run::release_item(ctx.rt.as_ref(), &ctx.rundir, item).await
            {
                tracing::warn!(task = %item.label(), "releasing its workspace: {e}");
            }
        }
        if let Ok(r) = &result {
            super::emit_result(&events, item, &gpu, r);
        }
        result
    }
}
