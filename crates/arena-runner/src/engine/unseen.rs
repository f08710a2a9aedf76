//! A finished run evaluated on a sealed hidden set (`arenactl unseen eval`): the original
//! and the agent's kernel of each finished task run, in evaluator containers only. The run's
//! record names the lockfile and tasks, and every digest is checked again, as for a run.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use arena_proto::v1::EventKind;
use arena_run::events::{Detail, Events};
use arena_run::plan::{load_tasks, Recorded};
use arena_run::{Agent, HiddenSet, Item};

use super::{ContextParts, Engine, RunHandle};
use crate::error::{Result, RunnerError};
use crate::task_run::is_item_container;
use crate::task_run::Pipeline;

impl Engine {
    /// Task runs already evaluated on this set are not repeated; others get the set's result
    /// (replacing one from another set). Nothing is run for task runs that never finished.
    pub async fn submit_unseen(
        self: &Arc<Self>,
        run_dir: &Path,
        hidden_dir: &Path,
        caller: Option<String>,
    ) -> Result<(Arc<RunHandle>, u32)> {
        let Recorded {
            rundir,
            record,
            lock_path,
            lock,
        } = Recorded::load(run_dir)?;
        self.policy.check_owner(&record, caller.as_deref())?;
        let tasks = load_tasks(&lock_path, &lock, &record.tasks)?;
        let hidden = HiddenSet::load(hidden_dir)?;
        if !tasks.keys().any(|id| hidden.files.contains_key(id)) {
            return Err(RunnerError::invalid(
                hidden_dir.display(),
                "files",
                "the hidden set covers none of the run's tasks",
            ));
        }
        self.ensure_images(&lock, &tasks).await?;
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
                    events.emit(
                        EventKind::TaskResult,
                        Some(&item),
                        Detail {
                            message: if evaluated {
                                "evaluated on this hidden set earlier".into()
                            } else {
                                "the hidden set has no unseen configurations for this task".into()
                            },
                            result_json: serde_json::to_string(&result).unwrap_or_default(),
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
        let h = self.reserve(
            Arc::new(RunHandle::new(
                record.clone(),
                rundir.clone(),
                items,
                events,
            )),
            "is still running; evaluate it on a hidden set once it is done",
        )?;
        // What an interrupted unseen evaluation of these task runs left. Only their unseen
        // containers: other task runs of the run may still be running (a Slurm job on this node).
        let cleaned = arena_runtime::cleanup::gc_where(self.rt.as_ref(), |id| {
            id.contains("-unseen-")
                && todo
                    .iter()
                    .any(|i| is_item_container(id, &record.run_id, i))
        })
        .await;
        if let Err(e) = cleaned {
            let e = RunnerError::Runtime {
                task: record.run_id.clone(),
                error: e,
            };
            self.release(&h, &e.to_string());
            return Err(e);
        }
        let parts = ContextParts {
            agent: Agent::recorded(&record.agent, &record.agent_digest),
            record,
            rundir,
            lock,
            tasks,
            hidden: Some(hidden),
            env: HashMap::new(),
            // No agent runs in an unseen evaluation.
            secrets: arena_run::Secrets::default(),
        };
        self.launch(h.clone(), parts, todo, Pipeline::UnseenOnly);
        Ok((h, done))
    }
}
