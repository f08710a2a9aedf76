//! A sealed hidden set, verified: its directory, its digest, and the file of each task it
//! covers. Only the runner reads it, and only evaluators are given what a task's file holds.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::error::{Result, RunError};

#[derive(Debug, Clone)]
pub struct HiddenSet {
    pub dir: PathBuf,
    pub digest: String,
    /// Task id → the set's file for it (relative to `dir`).
    pub files: BTreeMap<String, String>,
}

impl HiddenSet {
    /// Reads a sealed set and checks every file against its manifest.
    pub fn load(dir: &Path) -> Result<HiddenSet> {
        let m = arena_task::hidden::verify_set(dir)?;
        let canonical = dir.canonicalize().map_err(|e| RunError::io(dir, e))?;
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

    /// The set's file for `task_id`, if the set covers that task.
    pub fn file_of(&self, task_id: &str) -> Option<PathBuf> {
        self.files.get(task_id).map(|f| self.dir.join(f))
    }
}
