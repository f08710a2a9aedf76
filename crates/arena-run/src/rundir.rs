//! The run directory: the run's record (`run.json`), one directory per task run with its
//! workspace, logs and evaluation outputs, and its result (`result.json`), which is written
//! atomically and is the only mark of a finished task run. A restarted runner keeps finished
//! task runs and cleans and redoes every other one.

use std::path::{Path, PathBuf};

use crate::result::{InfraError, ResultSet, TaskResult, RESULT_SET_SCHEMA};
use serde::{Deserialize, Serialize};

use crate::error::{Result, RunError};

pub const RUN_SCHEMA: &str = "arena.run/v2";
/// Run records of an earlier arena: same fields, an id derived from the request.
pub const RUN_SCHEMA_V1: &str = "arena.run/v1";

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
    /// Memory of each container of a task that sets no `memory_limit` (`--memory`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_bytes: Option<u64>,
    /// Rounds of paired performance runs of self-reported harnesses (`--perf-pairs`; absent:
    /// arena_eval's default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub perf_pairs: Option<u32>,
    /// Pairs of timed batches per configuration in arena's trusted evaluator
    /// (`--trusted-pairs`; absent: arena_eval's default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trusted_pairs: Option<u32>,
    /// Outputs of each timed batch the trusted evaluator checks on a GPU (`--checked-calls`;
    /// absent: arena_eval's default, a sample of 64).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checked_calls: Option<u32>,
    /// The identity that submitted the run (runner API): only it, or an admin, may watch or
    /// cancel it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
}

/// `r` and 24 random hex digits: a run id nobody can guess (ids are what the runner API
/// names runs by), and that two directories never share (container names start with it).
pub fn new_run_id() -> String {
    let mut b = [0u8; 12];
    getrandom::fill(&mut b).expect("the kernel's random source is available");
    format!("r{}", hex::encode(b))
}

impl RunRecord {
    pub fn new(
        image_lock: &Path,
        lock_digest: String,
        agent: &crate::agent::Agent,
        tasks: Vec<String>,
        runs: u32,
        hidden_set_digest: Option<String>,
    ) -> RunRecord {
        RunRecord {
            schema: RUN_SCHEMA.into(),
            run_id: new_run_id(),
            image_lock: image_lock.display().to_string(),
            lock_digest,
            agent: agent.name.clone(),
            agent_digest: agent.digest.clone(),
            tasks,
            runs,
            hidden_set_digest,
            memory_bytes: None,
            perf_pairs: None,
            trusted_pairs: None,
            checked_calls: None,
            owner: None,
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
            ("memory_bytes", self.memory_bytes != other.memory_bytes),
            ("perf_pairs", self.perf_pairs != other.perf_pairs),
            ("trusted_pairs", self.trusted_pairs != other.trusted_pairs),
            ("checked_calls", self.checked_calls != other.checked_calls),
        ]
        .into_iter()
        .find_map(|(field, differs)| differs.then_some(field))
    }
}

/// The name prefix of [`write_atomic`]'s temporary files. One whose writer died before the
/// rename is removed when the run resumes ([`RunDir::remove_partial_writes`]).
pub const PARTIAL_PREFIX: &str = ".arena-partial-";

/// Writes `bytes` to `path` so that a reader sees the old file or the new one, never a part:
/// a temporary file in the same directory, fsync, rename, fsync of the directory.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    use std::io::Write;
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(|e| RunError::io(dir, e))?;
    // Readable by everyone (results are for reading), not the temporary file's 0600.
    let mut tmp = tempfile::Builder::new()
        .prefix(PARTIAL_PREFIX)
        .permissions(std::os::unix::fs::PermissionsExt::from_mode(0o644))
        .tempfile_in(dir)
        .map_err(|e| RunError::io(dir, e))?;
    tmp.write_all(bytes).map_err(|e| RunError::io(path, e))?;
    tmp.as_file()
        .sync_all()
        .map_err(|e| RunError::io(path, e))?;
    // The crash tests' point between a complete temporary file and its rename.
    if let Some(name) = path.file_name().and_then(|n| n.to_str()) {
        crate::crash::point("write", name);
    }
    tmp.persist(path).map_err(|e| RunError::io(path, e.error))?;
    if let Ok(d) = std::fs::File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

pub fn write_json(path: &Path, v: &impl Serialize) -> Result<()> {
    let mut bytes = serde_json::to_vec_pretty(v).map_err(|e| RunError::Other(e.to_string()))?;
    bytes.push(b'\n');
    write_atomic(path, &bytes)
}

/// What a task run's directory holds as its result.
#[derive(Debug, Clone, PartialEq)]
pub enum ResultState {
    Missing,
    Finished(Box<TaskResult>),
    /// A `result.json` that cannot be read or parsed, with the reason.
    Unreadable(String),
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
    /// The run directory at `root`, made where missing without following a link someone else
    /// could have planted on the way (nofollow.rs); `root` is then the path with no link in it.
    pub fn new(root: &Path) -> Result<RunDir> {
        let root = nofollow::walk(root, true)?;
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

    /// The item's directory, created where missing, with no symbolic link from the run's root
    /// down to it: a link planted there would have the runner write, mount or bind-mount
    /// somewhere else on the host. Checked again before each container of a task run.
    pub fn secure_item_dir(&self, item: &Item) -> Result<PathBuf> {
        self.walk_item_dir(item, true)
    }

    /// Refuses a symbolic link or a non-directory on the way from the run's root to the
    /// item's directory (itself included); with `create`, makes what is missing.
    fn walk_item_dir(&self, item: &Item, create: bool) -> Result<PathBuf> {
        let dir = self.item_dir(item);
        let planted = |p: &Path, what: &str| {
            RunError::invalid(
                p.display(),
                "(run directory)",
                format!("{what}: refused (the runner writes only beneath its run directory, never through a link)"),
            )
        };
        let check = |p: &Path| -> Result<bool> {
            match std::fs::symlink_metadata(p) {
                Ok(m) if m.file_type().is_symlink() => Err(planted(p, "a symbolic link")),
                Ok(m) if !m.is_dir() => Err(planted(p, "not a directory")),
                Ok(_) => Ok(true),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
                Err(e) => Err(RunError::io(p, e)),
            }
        };
        let mut p = self.root.clone();
        if !check(&p)? {
            return Err(RunError::io(
                &p,
                std::io::Error::new(std::io::ErrorKind::NotFound, "the run directory is gone"),
            ));
        }
        // Above the run's root too: a directory there swapped for a link since it was made.
        if nofollow::walk(&self.root, false)? != self.root {
            return Err(planted(&self.root, "reached through a symbolic link"));
        }
        for c in dir.strip_prefix(&self.root).unwrap_or(&dir).components() {
            p.push(c);
            if !check(&p)? {
                if !create {
                    break;
                }
                match std::fs::create_dir(&p) {
                    Ok(()) => {}
                    // Another task run of the same run (a Slurm job on this or another node)
                    // made it in between: what it made must pass the same check.
                    Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                        check(&p)?;
                    }
                    Err(e) => return Err(RunError::io(&p, e)),
                }
            }
        }
        Ok(dir)
    }

    pub fn result_path(&self, item: &Item) -> PathBuf {
        self.item_dir(item).join("result.json")
    }

    pub fn load_record(&self) -> Result<Option<RunRecord>> {
        let p = self.record_path();
        let record: RunRecord = match std::fs::read_to_string(&p) {
            Ok(t) => serde_json::from_str(&t)
                .map_err(|e| RunError::invalid(p.display(), "(json)", e.to_string()))?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(RunError::io(p, e)),
        };
        if record.schema != RUN_SCHEMA && record.schema != RUN_SCHEMA_V1 {
            return Err(RunError::invalid(
                p.display(),
                "schema",
                format!(
                    "`{}` is not a run record this arena reads ({RUN_SCHEMA}, {RUN_SCHEMA_V1})",
                    record.schema
                ),
            ));
        }
        Ok(Some(record))
    }

    /// What the item's `result.json` says: nothing yet, a result, or something unreadable
    /// (which is kept as it is and reported, never taken for unfinished and cleaned away).
    pub fn result_state(&self, item: &Item) -> ResultState {
        let p = self.result_path(item);
        let text = match std::fs::read_to_string(&p) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return ResultState::Missing,
            Err(e) => return ResultState::Unreadable(format!("{}: {e}", p.display())),
        };
        let parsed = serde_json::from_str::<serde_json::Value>(&text)
            .map_err(|e| e.to_string())
            .and_then(crate::result::parse_result);
        match parsed {
            Ok(r) => ResultState::Finished(Box::new(r)),
            Err(e) => ResultState::Unreadable(format!("{}: {e}", p.display())),
        }
    }

    /// The item's result if it finished and is readable.
    pub fn load_result(&self, item: &Item) -> Option<TaskResult> {
        match self.result_state(item) {
            ResultState::Finished(r) => Some(*r),
            _ => None,
        }
    }

    /// Removes what an interrupted attempt left in the item's directory.
    pub fn clean_item(&self, item: &Item) -> Result<bool> {
        // Never through a planted link: that would remove a directory elsewhere.
        let d = self.walk_item_dir(item, false)?;
        if d.exists() {
            std::fs::remove_dir_all(&d).map_err(|e| RunError::io(&d, e))?;
            return Ok(true);
        }
        Ok(false)
    }

    /// Removes the temporary files of atomic writes whose writer died before renaming them
    /// (a client killed while it wrote the record, a result or the results), in the run's
    /// directory and `items`' directories; returns what it removed. Only for the one process
    /// that resumes the run (a live writer's file would go too).
    pub fn remove_partial_writes(&self, items: &[Item]) -> Result<Vec<PathBuf>> {
        let mut removed = Vec::new();
        let dirs = std::iter::once(self.root.clone()).chain(items.iter().map(|i| self.item_dir(i)));
        for dir in dirs {
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            for e in entries.flatten() {
                let partial = e.file_name().to_string_lossy().starts_with(PARTIAL_PREFIX);
                if partial && e.file_type().is_ok_and(|t| t.is_file()) {
                    let p = e.path();
                    std::fs::remove_file(&p).map_err(|err| RunError::io(&p, err))?;
                    removed.push(p);
                }
            }
        }
        Ok(removed)
    }

    pub fn infra_error_path(&self, item: &Item) -> PathBuf {
        self.item_dir(item).join("infra_error.json")
    }

    /// Records that the arena could not carry out `item` (it stays without a result).
    pub fn write_infra_error(&self, item: &Item, reason: &str) -> Result<()> {
        let at = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        write_json(
            &self.infra_error_path(item),
            &InfraError {
                task_id: item.task_id.clone(),
                repeat: item.repeat,
                reason: reason.to_string(),
                at,
            },
        )
    }

    /// Every finished task run, sorted by task and repeat, and the task runs without a result
    /// that hit an infrastructure error.
    pub fn result_set(&self, run_id: &str, items: &[Item]) -> ResultSet {
        let mut tasks: Vec<TaskResult> = items.iter().filter_map(|i| self.load_result(i)).collect();
        tasks.sort_by(|a, b| (&a.task_id, a.repeat).cmp(&(&b.task_id, b.repeat)));
        let infra_errors = items
            .iter()
            .filter(|i| !self.result_path(i).exists())
            .filter_map(|i| std::fs::read(self.infra_error_path(i)).ok())
            .filter_map(|b| serde_json::from_slice::<InfraError>(&b).ok())
            .collect();
        ResultSet {
            schema: RESULT_SET_SCHEMA.into(),
            run_id: Some(run_id.to_string()),
            tasks,
            infra_errors,
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

mod nofollow;
#[cfg(test)]
mod tests;
