//! Sealed hidden sets: one file of unseen configurations per task plus `manifest.json` with
//! each file's sha256 and the set's digest. A task whose shapes cannot be read is listed as
//! skipped with the reason, never dropped silently. The set is written to a temporary
//! directory and renamed into place whole.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

use crate::error::TaskError;
use crate::task::Task;
use crate::unseen::{generate_with, GenOptions, UnseenConfig};
pub use find::{command_files, find_declaration, FoundDeclaration, NotFound};
pub use probe::{choose, needs_more, ProbeRecord, ProbedTask};

pub const SET_SCHEMA: &str = "arena.unseen-set/v1";
pub const TASK_SCHEMA: &str = "arena.unseen/v1";
pub const MANIFEST: &str = "manifest.json";
pub const DECLARATION: &str = "TEST_SHAPES";
pub const DEFAULT_HARNESS: &str = "scripts/task_runner.py";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskUnseen {
    pub schema: String,
    pub task_id: String,
    /// The harness file (relative to the task) whose declaration is replaced.
    pub harness: String,
    /// `TEST_SHAPES`, `parametrize(M, N)` or `get_inputs()` ([`Declaration`]).
    pub declaration: String,
    /// Further files whose declaration is rewritten alike (`get_inputs()` in both of a gpumode
    /// task's PyTorch files).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub also: Vec<String>,
    pub configs: Vec<UnseenConfig>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SetFile {
    pub task_id: String,
    pub file: String,
    pub sha256: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Skipped {
    pub task_id: String,
    pub reason: String,
    /// Why, as a class (sets written before classes were recorded have none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<SkipKind>,
}

/// Why a task has no configurations in a set.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SkipKind {
    /// The task itself could not be read (its config.yaml is invalid).
    InvalidTask,
    /// The task declares no shapes in any form arena reads.
    NoDeclaration,
    /// A declaration is there, but it cannot be read or rewritten (computed shapes…).
    Unreadable,
    /// The shapes are declared only in a file the agent edits, so the agent would choose its
    /// own unseen configurations.
    AgentOwned,
    /// Its shapes were read, but no configurations could be made from them.
    GenerationFailed,
    /// Configurations were made, but the original kernel failed every one of them when the
    /// set was probed (`unseen generate --probe`).
    OriginalFails,
}

impl SkipKind {
    /// Whether a set that skipped the task for this is partial: every kind but a task that
    /// declares no shapes, or declares them where the agent writes.
    pub fn is_failure(self) -> bool {
        !matches!(self, SkipKind::NoDeclaration | SkipKind::AgentOwned)
    }
}

const NO_DECLARATION: &str = "no shape declaration found";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    pub schema: String,
    pub seed: u64,
    pub per_task: usize,
    pub memory_budget: u64,
    pub files: Vec<SetFile>,
    pub skipped: Vec<Skipped>,
    /// The probe every configuration passed with the original kernel, where the set was
    /// probed before it was sealed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probe: Option<ProbeRecord>,
    /// sha256 of this manifest's canonical JSON without this field.
    pub set_digest: String,
}

fn sha256_hex(b: &[u8]) -> String {
    hex::encode(Sha256::digest(b))
}

impl Manifest {
    pub fn compute_digest(&self) -> String {
        let mut m = self.clone();
        m.set_digest = String::new();
        let bytes = serde_json::to_vec(&m).expect("manifest serializes");
        format!("sha256:{}", sha256_hex(&bytes))
    }
}

/// The file name of a task's configurations (`triton2triton/x/y` → `triton2triton__x__y.json`).
pub fn file_name(task_id: &str) -> String {
    format!("{}.json", task_id.replace('/', "__"))
}

/// Reads the visible declaration of a task and generates its configurations.
pub fn task_unseen(task: &Task, opts: GenOptions) -> Result<TaskUnseen, String> {
    classified(task, opts).map_err(|(_, reason)| reason)
}

fn classified(task: &Task, opts: GenOptions) -> Result<TaskUnseen, (SkipKind, String)> {
    let found = find_declaration(task).map_err(|r| match r {
        NotFound::None(r) => (SkipKind::NoDeclaration, r),
        NotFound::Unreadable(r) => (SkipKind::Unreadable, r),
        NotFound::AgentOwned(r) => (SkipKind::AgentOwned, r),
    })?;
    let configs = generate_with(&task.id, &found.entries, &found.hints, opts).map_err(|e| {
        (
            SkipKind::GenerationFailed,
            format!("{}: {e}", task.dir.join(&found.file).display()),
        )
    })?;
    Ok(TaskUnseen {
        schema: TASK_SCHEMA.into(),
        task_id: task.id.to_string(),
        harness: found.file,
        declaration: found.declaration.to_string(),
        also: found.also,
        configs,
    })
}

/// What the configurations of `set` break of the rules the task's visible configurations
/// obey (`task: config: why`); empty when none breaks any.
pub fn set_violations(task: &Task, set: &TaskUnseen) -> Result<Vec<String>, String> {
    let found = find_declaration(task).map_err(|e| format!("{e:?}"))?;
    let mut out = Vec::new();
    for (i, c) in set.configs.iter().enumerate() {
        for why in crate::unseen::violations(&found.entries, &found.hints, c) {
            out.push(format!(
                "{}: configuration {i} `{}`: {why}",
                task.id, c.entry
            ));
        }
    }
    Ok(out)
}

fn io(path: &Path, e: std::io::Error) -> TaskError {
    TaskError::Io {
        path: path.to_path_buf(),
        error: e,
    }
}

/// Generates and writes a sealed set for `tasks` into `out` (which must not exist or be empty).
pub fn write_set(tasks: &[Task], opts: GenOptions, out: &Path) -> Result<Manifest, TaskError> {
    write_set_with(tasks, Vec::new(), opts, out)
}

/// [`write_set`], with tasks that could not even be loaded (`refused`, each with its reason)
/// recorded among the skipped: one bad task never stops a set.
pub fn write_set_with(
    tasks: &[Task],
    refused: Vec<Skipped>,
    opts: GenOptions,
    out: &Path,
) -> Result<Manifest, TaskError> {
    let (sets, mut skipped) = generate_sets(tasks, opts);
    skipped.extend(refused);
    seal_set(out, sets, skipped, opts, None)
}

/// Every task's configurations, or the reason it has none.
pub fn generate_sets<'a>(
    tasks: impl IntoIterator<Item = &'a Task>,
    opts: GenOptions,
) -> (Vec<TaskUnseen>, Vec<Skipped>) {
    let mut sets = Vec::new();
    let mut skipped = Vec::new();
    for t in tasks {
        match classified(t, opts) {
            Ok(u) => sets.push(u),
            Err((kind, reason)) => skipped.push(Skipped {
                task_id: t.id.to_string(),
                reason,
                kind: Some(kind),
            }),
        }
    }
    (sets, skipped)
}

/// Writes `sets` as a sealed set into `out` (which must not exist or be empty): a file per
/// task, sorted by task id, and the manifest with the set's digest; all renamed into place
/// at once.
pub fn seal_set(
    out: &Path,
    mut sets: Vec<TaskUnseen>,
    mut skipped: Vec<Skipped>,
    opts: GenOptions,
    probe: Option<ProbeRecord>,
) -> Result<Manifest, TaskError> {
    if out.exists()
        && std::fs::read_dir(out)
            .map_err(|e| io(out, e))?
            .next()
            .is_some()
    {
        return Err(io(
            out,
            std::io::Error::new(
                std::io::ErrorKind::AlreadyExists,
                "not empty: a new set goes into a new directory (sets are never mixed)",
            ),
        ));
    }
    let parent = out
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    std::fs::create_dir_all(parent).map_err(|e| io(parent, e))?;
    let tmp = tempfile::Builder::new()
        .prefix(".unseen-")
        .tempdir_in(parent)
        .map_err(|e| io(parent, e))?;
    sets.sort_by(|a, b| a.task_id.cmp(&b.task_id));
    let mut files = Vec::new();
    for u in &sets {
        let mut bytes = serde_json::to_vec_pretty(u).expect("serializes");
        bytes.push(b'\n');
        let name = file_name(&u.task_id);
        let p = tmp.path().join(&name);
        std::fs::write(&p, &bytes).map_err(|e| io(&p, e))?;
        files.push(SetFile {
            task_id: u.task_id.clone(),
            file: name,
            sha256: sha256_hex(&bytes),
        });
    }
    skipped.sort_by(|a, b| a.task_id.cmp(&b.task_id));
    let mut m = Manifest {
        schema: SET_SCHEMA.into(),
        seed: opts.seed,
        per_task: opts.per_task,
        memory_budget: opts.memory_budget,
        files,
        skipped,
        probe,
        set_digest: String::new(),
    };
    m.set_digest = m.compute_digest();
    let mut bytes = serde_json::to_vec_pretty(&m).expect("serializes");
    bytes.push(b'\n');
    let mp = tmp.path().join(MANIFEST);
    std::fs::write(&mp, bytes).map_err(|e| io(&mp, e))?;
    if out.exists() {
        std::fs::remove_dir(out).map_err(|e| io(out, e))?;
    }
    let kept: PathBuf = tmp.keep();
    std::fs::rename(&kept, out).map_err(|e| io(out, e))?;
    Ok(m)
}

/// Reads a set's manifest and checks every file and the set digest; names what differs.
pub fn verify_set(dir: &Path) -> Result<Manifest, TaskError> {
    let mp = dir.join(MANIFEST);
    let text = std::fs::read(&mp).map_err(|e| io(&mp, e))?;
    let m: Manifest = serde_json::from_slice(&text).map_err(|e| TaskError::Field {
        file: mp.clone(),
        field: "<document>".into(),
        message: e.to_string(),
    })?;
    let bad = |field: &str, message: String| TaskError::Field {
        file: mp.clone(),
        field: field.into(),
        message,
    };
    for (i, f) in m.files.iter().enumerate() {
        // The set's files lie in its directory under the names sealing gives them: a name
        // with a `/` or `..` would have the runner read (and a task's file rewritten from it
        // be written) elsewhere.
        if f.file != file_name(&f.task_id) || f.file.contains('/') || f.file.starts_with('.') {
            return Err(bad(
                &format!("files[{i}].file"),
                format!(
                    "`{}` is not the set's name for task `{}` (`{}`)",
                    f.file,
                    f.task_id,
                    file_name(&f.task_id)
                ),
            ));
        }
        let p = dir.join(&f.file);
        let bytes = std::fs::read(&p).map_err(|e| io(&p, e))?;
        let found = sha256_hex(&bytes);
        if found != f.sha256 {
            return Err(bad(
                &format!("files[{}].sha256", f.file),
                format!(
                    "expected {}, found {found}: the hidden set was changed",
                    f.sha256
                ),
            ));
        }
    }
    let found = m.compute_digest();
    if found != m.set_digest {
        return Err(bad(
            "set_digest",
            format!(
                "expected {}, found {found}: the manifest was changed",
                m.set_digest
            ),
        ));
    }
    Ok(m)
}

/// A task's file of a verified set (`path`, the set's file for `task_id`), read and checked:
/// the files it names for rewriting lie inside the task, and it has configurations. The runner
/// writes those files rewritten into a run's directory and binds them into the evaluator, so
/// a name that leaves the task is refused here, with the field.
pub fn read_task_set(path: &Path, task_id: &str) -> Result<TaskUnseen, TaskError> {
    let text = std::fs::read(path).map_err(|e| io(path, e))?;
    let u: TaskUnseen = serde_json::from_slice(&text).map_err(|e| TaskError::Field {
        file: path.to_path_buf(),
        field: "<document>".into(),
        message: e.to_string(),
    })?;
    if u.task_id != task_id {
        return Err(TaskError::field(
            path,
            "task_id",
            format!(
                "`{}`, but the manifest names this file for `{task_id}`",
                u.task_id
            ),
        ));
    }
    crate::paths::check_relative(path, "harness", &u.harness)?;
    for (i, rel) in u.also.iter().enumerate() {
        crate::paths::check_relative(path, &format!("also[{i}]"), rel)?;
    }
    if u.configs.is_empty() {
        return Err(TaskError::field(path, "configs", "no configurations"));
    }
    Ok(u)
}

mod find;
mod probe;
#[cfg(test)]
mod tests;
