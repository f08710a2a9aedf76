//! The run directory: the run's record (`run.json`), one directory per task run with its
//! workspace, logs and evaluation outputs, and its result (`result.json`), which is written
//! atomically and is the only mark of a finished task run. A restarted runner keeps finished
//! task runs and cleans and redoes every other one.

use std::path::{Path, PathBuf};

use arena_report::record::RESULT_SET_SCHEMA;
use arena_report::{ResultSet, TaskResult};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::error::{Result, RunnerError};

pub const RUN_SCHEMA: &str = "arena.run/v1";

/// What identifies a run. A run directory resumes only the same run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunRecord {
    pub schema: String,
    pub run_id: String,
    pub image_lock: String,
    /// sha256 of the lockfile's bytes.
    pub lock_digest: String,
    pub agent: String,
    pub agent_digest: String,
    pub tasks: Vec<String>,
    pub runs: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hidden_set_digest: Option<String>,
}

impl RunRecord {
    /// The run id: a hash of what defines the run and where it lives, so the same request on
    /// the same directory is the same run, and two directories never share container names.
    pub fn new(
        run_dir: &Path,
        image_lock: &Path,
        lock_digest: String,
        agent: &crate::agent::Agent,
        tasks: Vec<String>,
        runs: u32,
        hidden_set_digest: Option<String>,
    ) -> RunRecord {
        let mut h = Sha256::new();
        for part in [
            run_dir.display().to_string(),
            lock_digest.clone(),
            agent.digest.clone(),
            tasks.join("\n"),
            runs.to_string(),
            hidden_set_digest.clone().unwrap_or_default(),
        ] {
            h.update((part.len() as u64).to_le_bytes());
            h.update(part.as_bytes());
        }
        RunRecord {
            schema: RUN_SCHEMA.into(),
            run_id: format!("r{}", &hex::encode(h.finalize())[..11]),
            image_lock: image_lock.display().to_string(),
            lock_digest,
            agent: agent.name.clone(),
            agent_digest: agent.digest.clone(),
            tasks,
            runs,
            hidden_set_digest,
        }
    }

    /// The first field that differs, for an error that says why a directory cannot resume.
    pub fn first_difference(&self, other: &RunRecord) -> Option<&'static str> {
        [
            ("lock_digest", self.lock_digest != other.lock_digest),
            ("agent_digest", self.agent_digest != other.agent_digest),
            ("tasks", self.tasks != other.tasks),
            ("runs", self.runs != other.runs),
            (
                "hidden_set_digest",
                self.hidden_set_digest != other.hidden_set_digest,
            ),
            ("run_id", self.run_id != other.run_id),
        ]
        .into_iter()
        .find_map(|(field, differs)| differs.then_some(field))
    }
}

/// Writes `bytes` to `path` so that a reader sees the old file or the new one, never a part:
/// a temporary file in the same directory, fsync, rename, fsync of the directory.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    use std::io::Write;
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(|e| RunnerError::io(dir, e))?;
    let mut tmp = tempfile::NamedTempFile::new_in(dir).map_err(|e| RunnerError::io(dir, e))?;
    tmp.write_all(bytes).map_err(|e| RunnerError::io(path, e))?;
    tmp.as_file()
        .sync_all()
        .map_err(|e| RunnerError::io(path, e))?;
    tmp.persist(path)
        .map_err(|e| RunnerError::io(path, e.error))?;
    if let Ok(d) = std::fs::File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

pub fn write_json(path: &Path, v: &impl Serialize) -> Result<()> {
    let mut bytes = serde_json::to_vec_pretty(v).map_err(|e| RunnerError::Other(e.to_string()))?;
    bytes.push(b'\n');
    write_atomic(path, &bytes)
}

/// One (task, repeat) of a run.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Item {
    pub task_id: String,
    pub repeat: u32,
}

impl Item {
    pub fn label(&self) -> String {
        format!("{}#{}", self.task_id, self.repeat)
    }
}

#[derive(Debug, Clone)]
pub struct RunDir {
    pub root: PathBuf,
}

impl RunDir {
    pub fn new(root: &Path) -> Result<RunDir> {
        std::fs::create_dir_all(root).map_err(|e| RunnerError::io(root, e))?;
        let root = root.canonicalize().map_err(|e| RunnerError::io(root, e))?;
        Ok(RunDir { root })
    }

    pub fn record_path(&self) -> PathBuf {
        self.root.join("run.json")
    }

    pub fn results_path(&self) -> PathBuf {
        self.root.join("results.json")
    }

    /// `tasks/<task id with / as __>/r<repeat>`.
    pub fn item_dir(&self, item: &Item) -> PathBuf {
        self.root
            .join("tasks")
            .join(item.task_id.replace('/', "__"))
            .join(format!("r{}", item.repeat))
    }

    pub fn result_path(&self, item: &Item) -> PathBuf {
        self.item_dir(item).join("result.json")
    }

    pub fn load_record(&self) -> Result<Option<RunRecord>> {
        let p = self.record_path();
        match std::fs::read_to_string(&p) {
            Ok(t) => serde_json::from_str(&t)
                .map(Some)
                .map_err(|e| RunnerError::invalid(p.display(), "(json)", e.to_string())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(RunnerError::io(p, e)),
        }
    }

    /// The item's result if it finished; an unreadable result counts as unfinished.
    pub fn load_result(&self, item: &Item) -> Option<TaskResult> {
        let text = std::fs::read_to_string(self.result_path(item)).ok()?;
        serde_json::from_str(&text).ok()
    }

    /// Removes what an interrupted attempt left in the item's directory.
    pub fn clean_item(&self, item: &Item) -> Result<bool> {
        let d = self.item_dir(item);
        if d.exists() {
            std::fs::remove_dir_all(&d).map_err(|e| RunnerError::io(&d, e))?;
            return Ok(true);
        }
        Ok(false)
    }

    /// Every finished task run, sorted by task and repeat.
    pub fn result_set(&self, run_id: &str, items: &[Item]) -> ResultSet {
        let mut tasks: Vec<TaskResult> = items.iter().filter_map(|i| self.load_result(i)).collect();
        tasks.sort_by(|a, b| (&a.task_id, a.repeat).cmp(&(&b.task_id, b.repeat)));
        ResultSet {
            schema: RESULT_SET_SCHEMA.into(),
            run_id: Some(run_id.to_string()),
            tasks,
            extra: Default::default(),
        }
    }

    /// `results.json`: the [`RunDir::result_set`], written when the run ends.
    pub fn write_results(&self, run_id: &str, items: &[Item]) -> Result<ResultSet> {
        let set = self.result_set(run_id, items);
        write_json(&self.results_path(), &set)?;
        Ok(set)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn atomic_write_replaces_whole_files() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("a/b.json");
        write_atomic(&p, b"one").unwrap();
        write_atomic(&p, b"two").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"two");
        // No temporary files are left beside it.
        assert_eq!(std::fs::read_dir(d.path().join("a")).unwrap().count(), 1);
    }

    #[test]
    fn first_difference_names_the_field() {
        let a = RunRecord {
            schema: RUN_SCHEMA.into(),
            run_id: "r1".into(),
            image_lock: "/x/cpu.lock".into(),
            lock_digest: "sha256:a".into(),
            agent: "scripted".into(),
            agent_digest: "sha256:b".into(),
            tasks: vec!["t/a".into()],
            runs: 1,
            hidden_set_digest: None,
        };
        assert_eq!(a.first_difference(&a.clone()), None);
        let mut b = a.clone();
        b.runs = 2;
        b.run_id = "r2".into();
        assert_eq!(a.first_difference(&b), Some("runs"));
        let mut c = a.clone();
        c.hidden_set_digest = Some("sha256:c".into());
        assert_eq!(a.first_difference(&c), Some("hidden_set_digest"));
    }

    #[test]
    fn item_dirs_are_flat_and_distinct() {
        let d = tempfile::tempdir().unwrap();
        let rd = RunDir::new(d.path()).unwrap();
        let a = rd.item_dir(&Item {
            task_id: "t/a/b".into(),
            repeat: 1,
        });
        assert!(a.ends_with("tasks/t__a__b/r1"));
    }
}
