//! A new or resumed run: everything it depends on is checked before anything starts (every
//! locked image in the engine, every task tree against its locked digest), the run is
//! reserved under its id, what a killed runner left of it is removed, finished task runs are
//! kept, unreadable results are reported and kept, and the rest is queued.

use std::sync::Arc;

use arena_proto::v1::EventKind;
use arena_run::events::{Detail, Events};
use arena_run::plan::{plan, Plan, RunRequest};
use arena_run::rundir::ResultState;

use super::{ContextParts, Engine, RunHandle};
use crate::error::{Result, RunnerError};
use crate::task_run::Pipeline;

impl Engine {
    /// Checks everything, records the run (or resumes the one in `run_dir`) and starts it.
    /// `owner` is the identity that submits it (None: a local, unauthenticated caller).
    pub async fn submit(
        self: &Arc<Self>,
        req: RunRequest,
        owner: Option<String>,
    ) -> Result<(Arc<RunHandle>, u32)> {
        let Plan {
            lock,
            tasks,
            agent,
            hidden,
            rundir,
            mut record,
            ..
        } = plan(&req, &self.agent_dirs)?;
        self.policy.check_agent(&agent)?;
        self.policy.check_owner(&record, owner.as_deref())?;
        record.owner = record.owner.clone().or(owner);
        self.ensure_images(&lock, &tasks).await?;
        let items = arena_run::plan::items_of(tasks.keys(), req.runs);
        let events = Arc::new(Events::default());
        let h = self.reserve(
            Arc::new(RunHandle::new(
                record.clone(),
                rundir.clone(),
                items.clone(),
                events.clone(),
            )),
            "is already running",
        )?;
        if agent.network == arena_run::AgentNetwork::Host {
            let warning = format!(
                "warning: agent `{}` runs in the host's network namespace (this runner allows it: \
                 --allow-host-network); it reaches everything the host does",
                agent.name
            );
            tracing::warn!(run = %record.run_id, "{warning}");
            events.message(EventKind::TaskQueued, None, warning);
        }
        let prepared = async {
            arena_run::rundir::write_json(&rundir.record_path(), &record)?;
            // A restarted runner: containers of this run that a killed runner left are removed
            // (the reservation above means no live runner of this process holds them).
            let removed =
                arena_runtime::cleanup::gc_prefix(self.rt.as_ref(), &format!("{}-", record.run_id))
                    .await
                    .map_err(|e| RunnerError::Runtime {
                        task: record.run_id.clone(),
                        error: e,
                    })?;
            if !removed.is_empty() {
                tracing::info!(run = %record.run_id, ?removed, "removed leftovers of an interrupted runner");
            }
            // And the temporary files of writes it did not finish (never read as results).
            let partial = rundir.remove_partial_writes(&items)?;
            if !partial.is_empty() {
                tracing::info!(run = %record.run_id, ?partial, "removed half-written files of an interrupted runner");
            }
            match arena_runtime::cleanup::gc_orphaned_imports(self.rt.as_ref()).await {
                Ok(l) if !l.is_empty() => {
                    tracing::info!(leases = ?l, "removed import leases of dead processes")
                }
                Ok(_) => {}
                Err(e) => tracing::warn!(error = %e, "could not clean orphaned import leases"),
            }
            let mut todo = Vec::new();
            let mut done = 0;
            for item in &items {
                match rundir.result_state(item) {
                    ResultState::Finished(r) => {
                        done += 1;
                        events.emit(
                            EventKind::TaskResult,
                            Some(item),
                            Detail {
                                message: "finished earlier in this run directory".into(),
                                result_json: serde_json::to_string(&r).unwrap_or_default(),
                                passed: true,
                                ..Default::default()
                            },
                        );
                    }
                    // Kept as it is: it may be a result a person wants to look at. The task
                    // run is reported and not run again until it is moved away.
                    ResultState::Unreadable(why) => {
                        *h.errors.lock().unwrap() += 1;
                        events.message(
                            EventKind::TaskError,
                            Some(item),
                            format!("{why}; kept as it is (move it away to run this task run again)"),
                        );
                    }
                    ResultState::Missing => {
                        crate::task_run::resume_item(self.rt.as_ref(), &rundir, &events, item)
                            .await?;
                        let note = match &hidden {
                            Some(hs) if !hs.files.contains_key(&item.task_id) => {
                                "the hidden set has no unseen configurations for this task"
                            }
                            _ => "",
                        };
                        events.message(EventKind::TaskQueued, Some(item), note);
                        todo.push(item.clone());
                    }
                }
            }
            Ok::<_, RunnerError>((todo, done))
        }
        .await;
        let (todo, done) = match prepared {
            Ok(x) => x,
            Err(e) => {
                self.release(&h, &e.to_string());
                return Err(e);
            }
        };
        let parts = ContextParts {
            record,
            rundir,
            agent,
            lock,
            tasks,
            hidden,
            env: std::env::vars().collect(),
            secrets: req.secrets.clone(),
        };
        let work = if req.probe {
            Pipeline::Probe
        } else {
            Pipeline::Full
        };
        self.launch(h.clone(), parts, todo, work);
        Ok((h, done))
    }
}
