//! The tasks the Evaluate API serves: a lockfile (a path on the runner's machine) and a task in
//! it, named by id or by its locked digest. A task is loaded once per lockfile content (the
//! lockfile's digest is part of the key), its tree checked against the lock as a run checks it,
//! and only a task with a trusted harness is served: the Evaluate API exists for loops that
//! evaluate thousands of candidates, where a harness that times itself would be the first thing
//! a candidate learns to game.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use arena_digest::Digest;
use arena_image::{ImageRecord, Lockfile};
use arena_task::Task;

use super::EvalError;

/// One served task: the task, its locked image and what a warm evaluator is warm for.
#[derive(Debug)]
pub struct ServedTask {
    pub task: Task,
    pub image: ImageRecord,
    pub lock_path: PathBuf,
    pub lock_digest: Digest,
    pub task_digest: Digest,
    /// `<lock digest> <task id>`: evaluators are shared by requests with the same key only.
    pub key: String,
}

#[derive(Default)]
pub struct Catalog {
    loaded: Mutex<HashMap<(PathBuf, Digest, String), Arc<ServedTask>>>,
}

impl Catalog {
    /// The task `selector` (an id, or a `sha256:` task digest) of the lockfile at `lock_path`.
    pub fn task(&self, lock_path: &Path, selector: &str) -> Result<Arc<ServedTask>, EvalError> {
        if lock_path.as_os_str().is_empty() {
            return Err(EvalError::Invalid("image_lock: required".into()));
        }
        if selector.is_empty() {
            return Err(EvalError::Invalid(
                "task: required (a task id, or its locked digest sha256:…)".into(),
            ));
        }
        let (lock_digest, _) = Digest::of_file(lock_path)
            .map_err(|e| EvalError::Invalid(format!("{}: {e}", lock_path.display())))?;
        let key = (
            lock_path.to_path_buf(),
            lock_digest.clone(),
            selector.to_string(),
        );
        if let Some(t) = self.loaded.lock().unwrap().get(&key) {
            return Ok(t.clone());
        }
        let lock = Lockfile::load(lock_path)
            .map_err(|e| EvalError::Invalid(format!("{}: {e}", lock_path.display())))?;
        let id = if selector.starts_with("sha256:") {
            lock.images
                .iter()
                .find(|r| r.task_digest.as_deref() == Some(selector))
                .and_then(|r| r.task.clone())
                .ok_or_else(|| {
                    EvalError::Invalid(format!(
                        "task {selector}: no task of {} has this digest",
                        lock_path.display()
                    ))
                })?
        } else {
            selector.to_string()
        };
        let image = lock
            .task_image(&id)
            .ok_or_else(|| {
                EvalError::Invalid(format!(
                    "task {id}: not in {} (a task id, or its locked digest sha256:…)",
                    lock_path.display()
                ))
            })?
            .clone();
        let mut tasks = arena_run::plan::load_tasks(lock_path, &lock, std::slice::from_ref(&id))
            .map_err(|e| match e {
                arena_run::RunError::Drift { .. } => EvalError::Precondition(e.to_string()),
                e => EvalError::Invalid(e.to_string()),
            })?;
        let task = tasks
            .remove(&id)
            .ok_or_else(|| EvalError::Invalid(format!("task {id}: not loaded")))?;
        if task.config.trusted_harness.is_none() {
            return Err(EvalError::Precondition(format!(
                "task {id} has no trusted harness: the Evaluate API serves only tasks arena's \
                 evaluator measures (a harness that times itself is evaluated by `arenactl run`)"
            )));
        }
        let task_digest = Digest::parse(image.task_digest.as_deref().unwrap_or_default())
            .map_err(|e| EvalError::Invalid(format!("task {id}: locked digest: {e}")))?;
        let served = Arc::new(ServedTask {
            key: format!("{lock_digest} {id}"),
            task,
            image,
            lock_path: lock_path.to_path_buf(),
            lock_digest,
            task_digest,
        });
        self.loaded.lock().unwrap().insert(key, served.clone());
        Ok(served)
    }
}
